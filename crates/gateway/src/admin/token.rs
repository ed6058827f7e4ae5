//! The admin listener's optional bearer token (`[gateway] admin_token`): `/metrics` (every
//! client's usage series) and `/status` (the proxies and the domains tenants are hitting)
//! then need it; `/healthz` and `/readyz` stay open, since orchestrators probe them
//! without credentials and they say nothing about any tenant.
//!
//! The token is held only as a salted hash and checked in constant time
//! (`SecretHash::verify`); it is read from the running settings on every request, so a
//! reload that sets, changes or removes it applies to the next request.

use crate::outbound::forward::body::ProxyBody;
use crate::state::Shared;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

/// Whether the request may read `path`.
pub(crate) fn authorized(shared: &Shared, path: &str, headers: &HeaderMap) -> bool {
    if !matches!(path, "/metrics" | "/status") {
        return true;
    }
    let config = shared.config();
    let Some(token) = config.admin_token.as_ref() else {
        return true;
    };
    let presented = proxypool_edge::bearer_token(headers).unwrap_or_default();
    token.verify(presented)
}

/// 401 in the JSON error shape, naming the scheme to use.
pub(crate) fn unauthorized() -> Response<ProxyBody> {
    let body = proxypool_edge::error_body(
        "unauthenticated",
        "this admin route needs the gateway's admin token as a bearer token".to_owned(),
        "",
    );
    let mut response = Response::new(ProxyBody::text(String::from_utf8_lossy(&body)));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"proxypool-gateway-admin\""),
    );
    response
}
