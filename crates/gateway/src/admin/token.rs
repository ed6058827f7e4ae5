//! The admin listener's optional bearer token (`[gateway] admin_token`) and what a request
//! may read with or without it ([`Access`]).
//!
//! `/metrics` (every client's usage series) and `/status` (the cooldowns by proxy, domain
//! and project; the last reload's keys, which name clients) carry tenants' detail. With a
//! token configured they need it, and show everything to it. Without one they are private
//! by default: anyone who reaches the listener reads only the aggregate (the series
//! without a tenant's label, the status without its tenant detail). `/healthz` and
//! `/readyz` stay open, since orchestrators probe them without credentials and they say
//! nothing about any tenant.
//!
//! The token is held only as a salted hash and checked in constant time
//! (`SecretHash::verify`); it is read from the running settings on every request, so a
//! reload that sets, changes or removes it applies to the next request.

use crate::outbound::forward::body::ProxyBody;
use crate::state::Shared;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

/// What a request may read of the admin routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Everything: the probes, or the operator routes with the configured token.
    Full,
    /// The operator routes without a token configured: no tenant's detail.
    Aggregate,
    /// A token is configured and the request did not present it: 401.
    Refused,
}

/// What the request may read of `path`.
pub(crate) fn access(shared: &Shared, path: &str, headers: &HeaderMap) -> Access {
    if !matches!(path, "/metrics" | "/status") {
        return Access::Full;
    }
    let config = shared.config();
    let Some(token) = config.admin_token.as_ref() else {
        return Access::Aggregate;
    };
    let presented = proxypool_edge::bearer_token(headers).unwrap_or_default();
    if token.verify(presented) {
        Access::Full
    } else {
        Access::Refused
    }
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
