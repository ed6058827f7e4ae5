//! The provider reconciler: brings each vendor's proxies into the pool.
//!
//! - [`reconciler`]: one upstream's loop (fetch → parse → chunked upsert → status).
//! - [`fetch`]: the HTTPS (or allowed HTTP) fetch with timeout and size cap.
//! - [`text`], [`json`]: the two list formats; [`entry`]: what they produce and why an
//!   entry is dropped.
//! - [`hygiene`]: which fetched entries are accepted (`allowed_hosts` for the default
//!   credentials, no internal addresses); `resolve`: names resolved and judged by their
//!   addresses before the entries are stored.
//! - [`status`]: per-upstream status for the API.

pub mod entry;
pub mod fetch;
pub mod hygiene;
pub mod json;
pub mod reconciler;
mod resolve;
pub mod status;
pub mod text;

pub use fetch::{FetchError, VendorClient};
pub use reconciler::{Reconciler, RoundError, RoundOutcome};
pub use status::{StatusBoard, UpstreamOverview, UpstreamStatus};
