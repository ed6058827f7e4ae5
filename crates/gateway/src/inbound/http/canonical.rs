//! An absolute-form request whose host is a numeric IPv4 form (`http://2130706433/`,
//! `http://127.1/`) goes upstream with the dotted address its target was checked as, so
//! an upstream proxy cannot resolve the URL to another address than the one admitted.

use http::Request;
use http::header::{self, HeaderValue};
use http::uri::{Authority, Uri};
use proxypool_proto::{TargetAddr, inet_aton_v4};
use std::net::SocketAddr;

/// Rewrites the request URI's host (and a `Host` header naming the same address) to the
/// dotted form of `target`; a request already in that form is left alone.
pub(super) fn canonical_host<B>(request: &mut Request<B>, target: &TargetAddr) {
    let TargetAddr::Ip(SocketAddr::V4(addr)) = target else {
        return;
    };
    let dotted = addr.ip().to_string();
    if let Some(authority) = request.uri().authority()
        && authority.host() != dotted
        && let Ok(rewritten) = with_host(authority, &dotted)
    {
        let mut parts = request.uri().clone().into_parts();
        parts.authority = Some(rewritten);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    let host_header = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<Authority>().ok());
    if let Some(host) = host_header
        && host.host() != dotted
        && inet_aton_v4(host.host()) == Some(*addr.ip())
        && let Ok(rewritten) = with_host(&host, &dotted)
        && let Ok(value) = HeaderValue::from_str(rewritten.as_str())
    {
        request.headers_mut().insert(header::HOST, value);
    }
}

/// `authority` with its host replaced and its port (if any) kept.
fn with_host(authority: &Authority, host: &str) -> Result<Authority, http::uri::InvalidUri> {
    match authority.port() {
        Some(port) => format!("{host}:{port}").parse(),
        None => host.parse(),
    }
}
