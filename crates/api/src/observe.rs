//! The outermost middleware: request ids, error bodies, common headers, metrics, tracing.
//!
//! Every response leaves here with `X-Request-Id` and `Cache-Control: no-store` (extraction
//! responses carry proxy passwords; nothing the API says is worth caching). Every error
//! leaves with the API's body shape and the request id, whether a route, a middleware or
//! axum itself produced it.

use crate::error::ErrorMark;
use crate::request_id::RequestId;
use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use proxypool_edge::{Code, REQUEST_ID_HEADER};
use std::time::Instant;
use tracing::Instrument;

/// Standard methods by name, anything else as `other` (bounded metric labels).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

pub(crate) async fn observe(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = RequestId::generate();
    // Route templates, not raw paths: bounded metric labels and no ids in them.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let method = method_label(request.method()).to_owned();
    request.extensions_mut().insert(request_id.clone());
    let span = tracing::debug_span!(
        "api_request",
        request_id = %request_id,
        route = %route,
        method = %method,
        client = tracing::field::Empty,
    );
    let mut response = next.run(request).instrument(span.clone()).await;

    let mark = response.extensions_mut().remove::<ErrorMark>();
    let status = response.status();
    if mark.is_some() || status.is_client_error() || status.is_server_error() {
        let (code, message) = match mark {
            Some(mark) => (mark.code.as_str(), mark.message.into_owned()),
            None => (
                Code::for_status(status).name,
                status.canonical_reason().unwrap_or("error").to_owned(),
            ),
        };
        let bytes = proxypool_edge::error_body(code, message, request_id.as_str());
        let headers = response.headers_mut();
        headers.remove(header::CONTENT_LENGTH);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        *response.body_mut() = Body::from(bytes);
    }
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(request_id.as_str()) {
        headers.insert(REQUEST_ID_HEADER, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));

    let elapsed = started.elapsed();
    crate::metrics::request_finished(&route, &method, status.as_u16(), elapsed);
    span.in_scope(|| {
        tracing::debug!(
            status = status.as_u16(),
            elapsed_us = elapsed.as_micros() as u64,
            "request"
        );
    });
    response
}
