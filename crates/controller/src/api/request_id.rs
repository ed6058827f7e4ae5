//! Request ids: every answer (and every error body) names one, so an operator can find the
//! request in the logs. A caller's `X-Request-Id` is kept when it is short and printable.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl RequestId {
    fn generate() -> Self {
        let prefix = crate::jitter::hex_id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        RequestId(format!("req_{}{n:x}", &prefix[..8]))
    }

    fn from_header(value: &HeaderValue) -> Option<Self> {
        let text = value.to_str().ok()?;
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        ok.then(|| RequestId(text.to_owned()))
    }
}

/// Middleware: assigns the id before any extractor runs and echoes it in the response.
pub async fn assign(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(RequestId::from_header)
        .unwrap_or_else(RequestId::generate);
    request.extensions_mut().insert(id.clone());
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id.0) {
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
