//! An absolute-form request whose host is a numeric IPv4 form (`http://2130706433/`,
//! `http://127.1/`) goes upstream with the dotted address its target was checked as, so
//! an upstream proxy cannot resolve the URL to another address than the one admitted.

use http::Request;
use http::header::{self, HeaderValue};
use http::uri::{Authority, Uri};
use proxypool_proto::{TargetAddr, inet_aton_v4};
use std::net::{Ipv4Addr, SocketAddr};

/// Rewrites the request URI's host (and a `Host` header naming the same address) to the
/// dotted form of `target`; a request already in that form is left alone, and then
/// nothing is allocated (the usual request on the hot path).
pub(super) fn canonical_host<B>(request: &mut Request<B>, target: &TargetAddr) {
    let TargetAddr::Ip(SocketAddr::V4(addr)) = target else {
        return;
    };
    let ip = *addr.ip();
    if let Some(authority) = request.uri().authority()
        && !is_dotted(authority.host(), ip)
        && let Ok(rewritten) = with_host(authority, &ip.to_string())
    {
        let mut parts = request.uri().clone().into_parts();
        parts.authority = Some(rewritten);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    let Some(value) = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
    else {
        return;
    };
    // An IPv4 host has no colon: what precedes the last one is the host.
    let host_part = value.rsplit_once(':').map_or(value, |(host, _)| host);
    if is_dotted(host_part, ip) {
        return;
    }
    let dotted = ip.to_string();
    if let Ok(host) = value.parse::<Authority>()
        && host.host() != dotted
        && inet_aton_v4(host.host()) == Some(ip)
        && let Ok(rewritten) = with_host(&host, &dotted)
        && let Ok(value) = HeaderValue::from_str(rewritten.as_str())
    {
        request.headers_mut().insert(header::HOST, value);
    }
}

/// Whether `host` is `ip` in its dotted form: the standard parser takes exactly four
/// decimal parts without leading zeros, the form `Ipv4Addr` prints.
fn is_dotted(host: &str, ip: Ipv4Addr) -> bool {
    host.parse::<Ipv4Addr>() == Ok(ip)
}

/// `authority` with its host replaced and its port (if any) kept.
fn with_host(authority: &Authority, host: &str) -> Result<Authority, http::uri::InvalidUri> {
    match authority.port() {
        Some(port) => format!("{host}:{port}").parse(),
        None => host.parse(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(uri: &str, host: Option<&str>, target: &str) -> (String, Option<String>) {
        let mut builder = Request::get(uri);
        if let Some(host) = host {
            builder = builder.header(header::HOST, host);
        }
        let mut request = builder.body(()).unwrap();
        canonical_host(&mut request, &target.parse().unwrap());
        let host = request
            .headers()
            .get(header::HOST)
            .map(|value| value.to_str().unwrap().to_owned());
        (request.uri().to_string(), host)
    }

    #[test]
    fn a_numeric_host_goes_upstream_dotted_with_its_port_path_and_query() {
        assert_eq!(
            rewritten(
                "http://0x7f000002:8080/a?b=1",
                Some("0X7F000002:8080"),
                "127.0.0.2:8080"
            ),
            (
                "http://127.0.0.2:8080/a?b=1".into(),
                Some("127.0.0.2:8080".into())
            )
        );
        assert_eq!(
            rewritten("http://2130706434/", Some("2130706434"), "127.0.0.2:80"),
            ("http://127.0.0.2/".into(), Some("127.0.0.2".into()))
        );
    }

    #[test]
    fn only_the_exact_dotted_form_counts_as_dotted() {
        let ip = Ipv4Addr::new(127, 0, 0, 2);
        assert!(is_dotted("127.0.0.2", ip));
        for other in [
            "127.0.0.02",
            "0127.0.0.2",
            "127.2",
            "127.0.0.2.",
            " 127.0.0.2",
            "127.0.0.3",
        ] {
            assert!(!is_dotted(other, ip), "{other}");
        }
        assert_eq!(
            rewritten("http://127.0.0.02/", Some("127.000.0.2:80"), "127.0.0.2:80"),
            ("http://127.0.0.2/".into(), Some("127.0.0.2:80".into()))
        );
    }

    #[test]
    fn other_hosts_are_left_alone() {
        // Already dotted; a name; IPv6; a Host naming something else is the client's.
        for (uri, host, target) in [
            ("http://127.0.0.2/", Some("127.0.0.2"), "127.0.0.2:80"),
            ("http://example.com/", Some("example.com"), "example.com:80"),
            ("http://[::1]:81/", Some("[::1]:81"), "[::1]:81"),
            ("http://127.2/", Some("other.example"), "127.0.0.2:80"),
        ] {
            let (_, kept) = rewritten(uri, host, target);
            assert_eq!(kept.as_deref(), host, "{uri}");
        }
        assert_eq!(
            rewritten("http://example.com/x", None, "example.com:80").0,
            "http://example.com/x"
        );
    }
}
