//! The worker control API (axum): sessions, snapshot long-poll, acknowledgements, runtime
//! reports. Messages and paths are `proxypool_core::control`'s, so the gateway needs only
//! core.
//!
//! - [`handlers`]: one function per route.
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
mod handlers;
pub mod request_id;

pub use auth::WorkerTokens;
pub use error::ApiError;
pub use request_id::RequestId;

use crate::clock::SharedClock;
use crate::config::{ControlLimits, SnapshotConfig};
use crate::snapshot::SnapshotPublisher;
use axum::Router;
use axum::routing::{delete, get, post};
use proxypool_core::ActivityPool;
use proxypool_core::control::SESSIONS_PATH;
use std::sync::Arc;
use tokio::sync::Notify;

/// What the control API handlers share.
#[derive(Debug, Clone)]
pub struct ControlState {
    pub pool: Arc<dyn ActivityPool>,
    pub clock: SharedClock,
    pub publisher: Arc<SnapshotPublisher>,
    pub tokens: Arc<WorkerTokens>,
    pub snapshot: SnapshotConfig,
    /// Body caps per route.
    pub limits: ControlLimits,
    /// Wakes the ownership manager (a new session should get proxies promptly).
    pub wake_ownership: Arc<Notify>,
}

/// The control API's routes.
pub fn router(state: ControlState) -> Router {
    Router::new()
        .route(SESSIONS_PATH, post(handlers::register))
        .route(
            "/control/v1/workers/{worker}/snapshot",
            get(handlers::snapshot),
        )
        .route(
            "/control/v1/workers/{worker}/snapshot-ack",
            post(handlers::ack),
        )
        .route(
            "/control/v1/workers/{worker}/reports",
            post(handlers::report),
        )
        .route(
            "/control/v1/workers/{worker}/sessions/{session_id}",
            delete(handlers::close),
        )
        .route("/healthz", get(handlers::healthz))
        .fallback(handlers::not_found)
        .layer(axum::middleware::from_fn(request_id::assign))
        // Handlers read bodies themselves, after the token, with the route's cap.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}
