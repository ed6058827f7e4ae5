//! Transport limits applied before authentication: requests processed at once and their
//! timeout. (Open connections are capped per address and in total by [`crate::serve`], at
//! accept; requests in flight per address by [`super::in_flight`]; bodies are read, capped
//! and timed by [`super::body_first`] before a request gets here.)

use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Middleware: at most `max_concurrent_requests` in flight (more are 503 at once rather
/// than queued), each answered within `request_timeout` (else 503).
pub(crate) async fn concurrency_and_timeout(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let limits = state.limits();
    let retry = limits.unavailable_retry_after.as_secs_ceil();
    let Ok(_permit) = state.concurrency().try_acquire_owned() else {
        crate::metrics::overload("saturated");
        return ApiError::unavailable("the server is at its concurrency limit", retry)
            .into_response();
    };
    match tokio::time::timeout(limits.request_timeout.as_duration(), next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            crate::metrics::overload("timeout");
            ApiError::unavailable("the request timed out; retry later", retry).into_response()
        }
    }
}

/// 413 for a body over `cap` bytes.
pub(crate) fn payload_too_large(cap: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request body is over the {cap}-byte limit"),
    )
}
