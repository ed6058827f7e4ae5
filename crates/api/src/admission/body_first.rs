//! The request body, read whole before the request takes one of the global slots
//! (`max_concurrent_requests`).
//!
//! A handler that read its own body would hold its slot for as long as the client took to
//! send it, so a few slow senders could fill every slot. Here the body is read first,
//! under the address's in-flight cap only, with a size cap and a deadline
//! (`body_read_timeout`, from the first byte asked for, not from the last one received,
//! so a trickle cannot stretch it); the handlers then read bytes already in memory.

use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use proxypool_edge::BodyError;

/// Whether the request carries a body at all: HTTP/1.1 frames one only with a non-zero
/// `Content-Length` or a `Transfer-Encoding`.
pub(crate) fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0")
}

/// The most bytes a request may send: the dashboard's sign-in takes far less than the
/// API's routes, and is open to anyone.
fn cap_for(request: &Request, max_body_bytes: usize) -> usize {
    if request.method() == Method::POST && request.uri().path() == "/ui/session" {
        crate::ui::SIGN_IN_BODY_CAP
    } else {
        max_body_bytes
    }
}

/// Middleware: 413 for a body over the cap (declared or streamed), 408 `body_timeout` for
/// one not whole within `body_read_timeout`; otherwise the request goes on with its body
/// in memory.
pub(crate) async fn body_first(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let limits = state.limits();
    let cap = cap_for(&request, limits.max_body_bytes);
    if proxypool_edge::body::declared_over(request.headers(), cap) {
        return refused(super::limits::payload_too_large(cap));
    }
    if !has_body(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let read = proxypool_edge::body::read_capped(&parts.headers, body, cap);
    let bytes = match tokio::time::timeout(limits.body_read_timeout.as_duration(), read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error @ BodyError::TooLarge { .. })) => return refused(error.into()),
        // The client broke off or sent a broken chunk: whatever answers it may never arrive.
        Ok(Err(error)) => return ApiError::from(error).into_response(),
        Err(_) => {
            crate::metrics::overload("body_timeout");
            return refused(ApiError::new(
                ErrorCode::BodyTimeout,
                "the request body did not arrive in time",
            ));
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// An answer sent while the rest of the body may still be on its way: the connection is
/// closed after it, since the next request could not be told from the unread bytes.
fn refused(error: ApiError) -> Response {
    error
        .with_headers(vec![(
            header::CONNECTION,
            HeaderValue::from_static("close"),
        )])
        .into_response()
}
