//! Gateway-made HTTP answers: refusals with `X-Proxypool-Error`, `Retry-After` and, for
//! 407, the `Proxy-Authenticate` challenge.

use crate::outbound::forward::body::ProxyBody;
use crate::refusal::{ERROR_HEADER, Refusal};
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

/// The response for a refusal.
pub(super) fn refusal(refusal: &Refusal) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::text(format!("{refusal}\n")));
    *response.status_mut() =
        StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(ERROR_HEADER, HeaderValue::from_static(refusal.code()));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(seconds) = refusal.retry_after_secs() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if matches!(refusal, Refusal::AuthRequired) {
        headers.insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"proxypool\""),
        );
    }
    if matches!(refusal, Refusal::BadRequest(_)) {
        // A malformed request may leave the connection in an unknown state.
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
