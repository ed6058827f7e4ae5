//! The per-address cap on requests in flight (`[api.limits] max_requests_in_flight_per_ip`).
//!
//! The shield limits how often an address may start requests, not how many it keeps
//! open: a few slow requests a second, each held for seconds, pass it. This cap sits
//! after the shield and before the body is read, so one address (an IPv6 network of
//! `ipv6_prefix` bits) can never hold more than its share of the server however slowly
//! it sends; one request more is answered 429 at once rather than queued.

use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Middleware: takes the address's slot for the whole request (body, queue for the global
/// slot, handler) or answers 429 `too_many_requests_in_flight` with `Retry-After: 1`.
pub(crate) async fn per_address(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    // Liveness probes are exempt, as from the shield: a balancer probing from the address
    // it forwards many clients from must not see the server down because they are busy.
    // Only without a body, which would take time to arrive.
    if request.uri().path() == "/healthz" && !super::body_first::has_body(request.headers()) {
        return next.run(request).await;
    }
    let ip = super::shield::peer_ip(&request);
    let Some(_slot) = state.address_slots().try_take(ip) else {
        crate::metrics::overload("in_flight_per_ip");
        return ApiError::new(
            ErrorCode::TooManyRequestsInFlight,
            "too many requests in flight from this address",
        )
        .retry_after(1)
        .into_response();
    };
    next.run(request).await
}
