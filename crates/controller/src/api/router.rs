//! [`router`]: the control API's routes, their handlers and layers.

use super::state::ControlState;
use super::{handlers, request_id};
use axum::Router;
use axum::routing::{delete, get, post};
use proxypool_core::control::SESSIONS_PATH;
use proxypool_core::fleet::FLEET_PATH;

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
        .route(FLEET_PATH, get(handlers::fleet))
        .route("/healthz", get(handlers::healthz))
        .fallback(handlers::not_found)
        .layer(axum::middleware::from_fn(request_id::assign))
        // Handlers read bodies themselves, after the token, with the route's cap.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}
