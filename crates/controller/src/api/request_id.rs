//! Request ids: every answer (and every error body) names one, so an operator can find the
//! request in the logs. A worker's `X-Request-Id` is kept when it is short and printable
//! (the rule and the generator are `proxypool_edge::request_id`'s, shared with the client
//! API).

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use proxypool_edge::REQUEST_ID_HEADER;
use std::convert::Infallible;

/// The request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    fn generate() -> Self {
        RequestId(proxypool_edge::RequestId::generate().to_string())
    }
}

/// Middleware: assigns the id before any extractor runs and echoes it in the response.
pub async fn assign(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(proxypool_edge::RequestId::from_header)
        .map_or_else(RequestId::generate, |id| RequestId(id.to_string()));
    request.extensions_mut().insert(id.clone());
    let mut response = next.run(request).await;
    if let Ok(value) = axum::http::HeaderValue::from_str(&id.0) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(RequestId::generate))
    }
}
