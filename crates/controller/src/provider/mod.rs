//! The provider reconciler: brings each vendor's proxies into the pool.
//!
//! - [`reconciler`]: one upstream's loop (fetch → parse → chunked upsert → status).
//! - [`backconnect`]: a backconnect upstream's sessions, kept alive as proxies;
//!   [`session_health`]: the checker's failed checks of them, so failing ones are retired.
//! - [`failure`]: why a fetch or a round fails, by kind.
//! - [`fetch`]: one page's HTTPS (or allowed HTTP) fetch with timeout, size cap and the
//!   redirect host rule; `dial_rule`: no connection to an internal address (unless
//!   `allow_private_hosts`), judged on the address dialed; [`auth`]: the header, Basic or
//!   query-key authentication it carries; `pages`: a round's walk over every page (next
//!   URL, `Link` header or page parameter, under `max_pages`); [`link`]: the
//!   `Link: rel="next"` header.
//! - [`text`], [`json`]: the two list formats; [`entry`]: what they produce and why an
//!   entry is dropped; [`timestamps`]: times as vendors write them (Unix seconds or
//!   milliseconds, RFC 3339).
//! - [`hygiene`]: which fetched entries are accepted (`allowed_hosts` for the default
//!   credentials, no internal addresses); `resolve`: names resolved and judged by their
//!   addresses before the entries are stored.
//! - [`status`]: per-upstream status for the API.

pub mod auth;
pub mod backconnect;
mod dial_rule;
pub mod entry;
pub mod failure;
pub mod fetch;
pub mod hygiene;
pub mod json;
pub mod link;
mod pages;
pub mod reconciler;
mod resolve;
pub mod session_health;
pub mod status;
pub mod text;
pub mod timestamps;

pub use auth::VendorAuth;
pub use fetch::{FetchError, HostRule, Page, VendorClient};
pub use reconciler::{Reconciler, RoundError, RoundOutcome};
pub use session_health::SessionHealth;
pub use status::{StatusBoard, UpstreamOverview, UpstreamStatus};
