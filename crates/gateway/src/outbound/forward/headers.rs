//! The request and response heads as the gateway rewrites them: the target read from an
//! absolute-form URL, the form and credentials each upstream protocol wants, hop-by-hop
//! headers dropped in order, and no `X-Proxypool-*` header but the gateway's own.

use super::scheme::Scheme;
use crate::refusal::Refusal;
use crate::snapshot::ViewProxy;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Uri};
use proxypool_core::Protocol;
use proxypool_proto::TargetAddr;

/// `http://host[:port]/...` → the target; anything else is a 400.
pub(crate) fn target_of(uri: &Uri) -> Result<TargetAddr, Refusal> {
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(Refusal::BadRequest(format!(
                "scheme '{other}' is not forwarded; use CONNECT for https"
            )));
        }
        None => {
            return Err(Refusal::BadRequest(
                "a proxy request needs an absolute URL (http://host/path) or CONNECT".into(),
            ));
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| Refusal::BadRequest("the URL has no host".into()))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    TargetAddr::domain(host, authority.port_u16().unwrap_or(80))
        .map_err(|error| Refusal::BadRequest(format!("bad target host: {error}")))
}

/// Absolute form + Basic credentials for HTTP proxies; origin form for SOCKS5 tunnels,
/// and for every `https` request (TLS to the origin inside a tunnel: the proxy never
/// reads it, so it never carries the proxy's credentials). `Host` stays as the client
/// wrote it; one is added, from the target, only when the client sent none.
pub(super) fn prepare<B>(
    proxy: &ViewProxy,
    request: &mut Request<B>,
    target: &TargetAddr,
    scheme: Scheme,
) {
    prepare_for(
        proxy.protocol,
        proxy.basic_header.as_ref(),
        request,
        target,
        scheme,
    );
}

/// [`prepare`] for a proxy speaking `protocol` with `basic_header` as its credentials.
fn prepare_for<B>(
    protocol: Protocol,
    basic_header: Option<&HeaderValue>,
    request: &mut Request<B>,
    target: &TargetAddr,
    scheme: Scheme,
) {
    let default_port = match (scheme, protocol) {
        (Scheme::Http, Protocol::Http | Protocol::Https) => {
            if let Some(value) = basic_header {
                request
                    .headers_mut()
                    .insert(header::PROXY_AUTHORIZATION, value.clone());
            }
            return;
        }
        (Scheme::Http, Protocol::Socks5) => 80,
        (Scheme::Https, _) => 443,
    };
    if request.uri().authority().is_some() {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        if let Ok(uri) = path.parse() {
            *request.uri_mut() = uri;
        }
    }
    if !request.headers().contains_key(header::HOST) {
        let host = if target.port() == default_port {
            match target {
                TargetAddr::Ip(addr) if addr.is_ipv6() => format!("[{}]", addr.ip()),
                _ => target.host(),
            }
        } else {
            target.to_string()
        };
        if let Ok(value) = HeaderValue::from_str(&host) {
            request.headers_mut().insert(header::HOST, value);
        }
    }
}

/// What every header of the fleet hop (`crate::fleet`) is named with: a client's never
/// reach an owner, and a member's never reach an upstream.
pub(crate) const FLEET_HEADER_PREFIX: &str = "proxypool-fleet-";

/// Removes hop-by-hop headers (RFC 9110 §7.6.1), including those named in `Connection`,
/// the client's proxy credentials and the fleet hop's `Proxypool-Fleet-*` headers, keeping
/// the order of the rest ([`retain_in_order`]).
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    retain_in_order(headers, |name| {
        !(matches!(
            name.as_str(),
            "connection"
                | "proxy-authorization"
                | "proxy-authenticate"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "upgrade"
                | "keep-alive"
                | "proxy-connection"
        ) || named.contains(name)
            // The fleet hop's own headers (a client's, or a relaying member's) never
            // reach an upstream.
            || name.as_str().starts_with(FLEET_HEADER_PREFIX))
    });
}

/// Keeps the headers whose name `keep` accepts, in their order with their repeats: a
/// removal from a `HeaderMap` moves its last entry into the gap (and sites fingerprint
/// header order), so the map is rebuilt instead whenever something goes.
pub(crate) fn retain_in_order(headers: &mut HeaderMap, keep: impl Fn(&HeaderName) -> bool) {
    if headers.keys().all(&keep) {
        return;
    }
    let all = std::mem::take(headers);
    headers.reserve(all.keys_len());
    let mut current: Option<HeaderName> = None;
    for (name, value) in all {
        // A name comes once, before the first of its values; `None` is one more of them.
        if let Some(name) = name {
            current = Some(name);
        }
        if let Some(name) = current.as_ref().filter(|name| keep(name)) {
            headers.append(name.clone(), value);
        }
    }
}

/// Removes every `X-Proxypool-*` header an upstream or origin sent: only the gateway
/// speaks under its own prefix, so a client never reads a spoofed session, proxy or error.
pub(super) fn strip_own_headers(headers: &mut HeaderMap) {
    const PREFIX: &str = "x-proxypool-";
    retain_in_order(headers, |name| !name.as_str().starts_with(PREFIX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_only_absolute_http() {
        let uri: Uri = "http://example.com/x?y".parse().unwrap();
        assert_eq!(target_of(&uri).unwrap().to_string(), "example.com:80");
        let uri: Uri = "http://[::1]:8080/".parse().unwrap();
        assert_eq!(target_of(&uri).unwrap().to_string(), "[::1]:8080");
        let uri: Uri = "https://example.com/".parse().unwrap();
        assert_eq!(target_of(&uri).unwrap_err().code(), "bad_request");
        let uri: Uri = "/just/a/path".parse().unwrap();
        assert_eq!(target_of(&uri).unwrap_err().code(), "bad_request");
    }

    fn prepared(
        protocol: Protocol,
        scheme: Scheme,
        uri: &str,
        host: Option<&str>,
        target: &str,
    ) -> Request<()> {
        let mut builder = Request::get(uri);
        if let Some(host) = host {
            builder = builder.header(header::HOST, host);
        }
        let mut request = builder.body(()).unwrap();
        let credentials = HeaderValue::from_static("Basic cHJveHk6c2VjcmV0");
        let target: TargetAddr = target.parse().unwrap();
        prepare_for(protocol, Some(&credentials), &mut request, &target, scheme);
        request
    }

    #[test]
    fn an_https_request_goes_in_origin_form_without_the_proxys_credentials() {
        for protocol in [Protocol::Http, Protocol::Https, Protocol::Socks5] {
            // The inner request as the client wrote it inside the tunnel: its Host kept.
            let request = prepared(
                protocol,
                Scheme::Https,
                "/cart?item=1",
                Some("Shop-A.test"),
                "shop-a.test:443",
            );
            assert_eq!(request.uri(), "/cart?item=1");
            assert_eq!(request.headers()[header::HOST], "Shop-A.test");
            assert!(
                !request.headers().contains_key(header::PROXY_AUTHORIZATION),
                "{protocol:?}: the proxy's credentials never go to the origin"
            );
            // An absolute-form inner request is sent in origin form.
            let request = prepared(
                protocol,
                Scheme::Https,
                "https://shop-a.test:8443/x",
                None,
                "shop-a.test:8443",
            );
            assert_eq!(request.uri(), "/x");
            assert_eq!(request.headers()[header::HOST], "shop-a.test:8443");
        }
        // Without a Host, one from the target: 443 left out, an IPv6 address bracketed.
        let request = prepared(Protocol::Http, Scheme::Https, "/", None, "[::1]:443");
        assert_eq!(request.headers()[header::HOST], "[::1]");
        let request = prepared(Protocol::Http, Scheme::Https, "/", None, "shop-a.test:443");
        assert_eq!(request.headers()[header::HOST], "shop-a.test");
    }

    #[test]
    fn plain_http_keeps_its_forms() {
        let request = prepared(
            Protocol::Http,
            Scheme::Http,
            "http://shop-a.test/x",
            Some("shop-a.test"),
            "shop-a.test:80",
        );
        assert_eq!(request.uri(), "http://shop-a.test/x");
        assert_eq!(
            request.headers()[header::PROXY_AUTHORIZATION],
            "Basic cHJveHk6c2VjcmV0"
        );
        let request = prepared(
            Protocol::Socks5,
            Scheme::Http,
            "http://shop-a.test:8080/x",
            None,
            "shop-a.test:8080",
        );
        assert_eq!(request.uri(), "/x");
        assert_eq!(request.headers()[header::HOST], "shop-a.test:8080");
        assert!(!request.headers().contains_key(header::PROXY_AUTHORIZATION));
    }

    #[test]
    fn strips_hop_by_hop_and_credentials() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-drop"),
        );
        headers.insert("x-drop", HeaderValue::from_static("1"));
        headers.insert("x-keep", HeaderValue::from_static("1"));
        headers.insert(
            header::PROXY_AUTHORIZATION,
            HeaderValue::from_static("Basic x"),
        );
        headers.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        headers.insert("proxypool-fleet-client", HeaderValue::from_static("alice"));
        headers.insert(
            "Proxypool-Fleet-Peer",
            HeaderValue::from_static("1.2.3.4:5"),
        );
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key("x-keep"));
    }

    #[test]
    fn stripping_keeps_the_order_and_the_repeats_of_the_rest() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "example.com"),
            ("proxy-authorization", "Basic x"),
            ("x-first", "1"),
            ("accept", "*/*"),
            ("x-first", "2"),
            ("proxy-connection", "keep-alive"),
            ("x-last", "3"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let seen: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect();
        assert_eq!(
            seen,
            [
                ("host", "example.com"),
                ("x-first", "1"),
                ("x-first", "2"),
                ("accept", "*/*"),
                ("x-last", "3"),
            ]
        );
    }
}
