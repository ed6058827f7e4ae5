//! The worker control API (axum): sessions, snapshot long-poll, acknowledgements, runtime
//! reports, the gateway fleet's members. Messages and paths are `proxypool_core::control`'s,
//! so the gateway needs only core.
//!
//! - `router`: [`router`], the routes and their layers.
//! - `state`: [`ControlState`], what the handlers share.
//! - [`handlers`]: one function per route.
//! - [`fleet`]: the gateway fleet's members (in report answers and at their own path),
//!   computed from the store and cached briefly ([`FleetCache`]).
//! - [`auth`]: bearer worker tokens, checked from the headers before a body is read.
//! - [`body`]: JSON bodies with the route's cap (`[control.limits]`), read after the token.
//! - [`error`]: [`ApiError`] on the edge's error body, codes and store-error mapping.
//! - [`request_id`]: per-request ids.
//!
//! Served by the edge's server scaffold (`proxypool_edge::serve`, see
//! [`crate::Controller::start_on`]): caps per IP and in total at accept, header and idle
//! timeouts, a head size cap.

pub mod auth;
pub mod body;
pub mod error;
pub mod fleet;
mod handlers;
pub mod request_id;
mod router;
mod state;

pub use auth::WorkerTokens;
pub use error::ApiError;
pub use fleet::FleetCache;
pub use request_id::RequestId;
pub use router::router;
pub use state::ControlState;
