//! The route table and the router with its middleware stack.

mod admin;
mod dashboard;
mod domain;
pub(crate) mod extractions;
pub(crate) mod feedback;
pub(crate) mod health;
mod idempotency;
pub(crate) mod meta;
mod upstreams;
mod usage;

use crate::admission::{body_first, forwarded, in_flight, limits, shield};
use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};

/// Every route the router serves, as (method, path template). The OpenAPI test checks the
/// document against this list, and a live test checks the router against it.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/extractions"),
    ("GET", "/v1/extractions/{id}"),
    ("POST", "/v1/feedback"),
    ("GET", "/v1/me"),
    ("GET", "/v1/upstreams"),
    ("GET", "/v1/upstreams/{id}/inventory"),
    ("GET", "/v1/usage"),
    ("GET", "/v1/admin/overview"),
    ("GET", "/v1/admin/proxies"),
    ("GET", "/v1/admin/clients"),
    ("GET", "/v1/admin/workers"),
    ("POST", "/v1/admin/workers/{id}/cordon"),
    ("POST", "/v1/admin/workers/{id}/drain"),
    ("POST", "/v1/admin/workers/{id}/uncordon"),
    ("GET", "/v1/admin/reload"),
    ("POST", "/v1/admin/reload"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/ui/"),
    ("GET", "/ui/app.js"),
    ("GET", "/ui/app.css"),
    ("GET", "/ui/session"),
    ("POST", "/ui/session"),
    ("DELETE", "/ui/session"),
];

/// The client API as an axum router, ready to serve (see [`crate::serve`]) or to merge into
/// a larger router. Middleware, outermost first: `observe` (request id, error bodies,
/// headers, metrics), the client address behind a trusted balancer, the per-IP shield, the
/// per-address cap on requests in flight, the body read whole (capped and timed), then the
/// global cap on requests being processed and the request timeout; then the route, which
/// authenticates, authorizes and charges quota in that order. The body is read before a
/// global slot is taken, so a slow sender holds only its own address's share.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/v1/extractions", post(extractions::create))
        .route("/v1/extractions/{id}", get(extractions::get))
        .route("/v1/feedback", post(feedback::create))
        .route("/v1/me", get(upstreams::me))
        .route("/v1/upstreams", get(upstreams::list))
        .route("/v1/upstreams/{id}/inventory", get(upstreams::inventory))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/admin/overview", get(dashboard::overview))
        .route("/v1/admin/proxies", get(dashboard::proxies))
        .route("/v1/admin/clients", get(dashboard::clients))
        .route("/v1/admin/workers", get(admin::list_workers))
        .route("/v1/admin/workers/{id}/cordon", post(admin::cordon_worker))
        .route("/v1/admin/workers/{id}/drain", post(admin::drain_worker))
        .route(
            "/v1/admin/workers/{id}/uncordon",
            post(admin::uncordon_worker),
        )
        .route(
            "/v1/admin/reload",
            get(admin::last_reload).post(admin::reload),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(meta::metrics))
        .route("/openapi.json", get(meta::openapi))
        .merge(crate::ui::routes())
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(
            state.clone(),
            limits::concurrency_and_timeout,
        ))
        .layer(from_fn_with_state(state.clone(), body_first::body_first))
        .layer(from_fn_with_state(state.clone(), in_flight::per_address))
        .layer(from_fn_with_state(state.clone(), shield::shield))
        .layer(from_fn_with_state(state.clone(), forwarded::client_address))
        .layer(from_fn(crate::observe::observe))
        .with_state(state)
}

async fn no_such_route() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this route does not accept this method",
    )
}
