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
    // The client's credentials for the gateway never go further: replaced in their place
    // by an HTTP proxy's own (no map rebuilt, the usual request), else removed.
    let to_http_proxy = scheme == Scheme::Http && protocol != Protocol::Socks5;
    match basic_header.filter(|_| to_http_proxy) {
        Some(value) => {
            request
                .headers_mut()
                .insert(header::PROXY_AUTHORIZATION, value.clone());
        }
        None => remove_proxy_credentials(request.headers_mut()),
    }
    if to_http_proxy {
        return;
    }
    let default_port = match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
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
    strip(headers, |name| name == header::PROXY_AUTHORIZATION);
}

/// [`strip_hop_by_hop`] for a request about to go upstream through [`prepare`], which
/// replaces the client's `Proxy-Authorization` in place or removes it (so that the usual
/// request, whose only hop-by-hop header is its credentials, rebuilds no map).
pub(super) fn strip_request_hop_by_hop(headers: &mut HeaderMap) {
    strip(headers, |_| false);
}

/// An upstream's response head as the client may read it: [`strip_hop_by_hop`] and no
/// `X-Proxypool-*` header (only the gateway speaks under its own prefix, so a client
/// never reads a spoofed session, proxy or error), in one pass over the headers.
pub(super) fn strip_response_headers(headers: &mut HeaderMap) {
    strip(headers, |name| {
        name == header::PROXY_AUTHORIZATION || name.as_str().starts_with(OWN_HEADER_PREFIX)
    });
}

/// The prefix of the gateway's own response headers.
const OWN_HEADER_PREFIX: &str = "x-proxypool-";

/// Removes the hop-by-hop headers, those `Connection` names, the fleet hop's, and those
/// `also` picks, in one pass that keeps the order of the rest.
fn strip(headers: &mut HeaderMap, also: impl Fn(&HeaderName) -> bool) {
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
                | "proxy-authenticate"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "upgrade"
                | "keep-alive"
                | "proxy-connection"
        ) || also(name)
            || named.contains(name)
            // The fleet hop's own headers (a client's, or a relaying member's) never
            // reach an upstream.
            || name.as_str().starts_with(FLEET_HEADER_PREFIX))
    });
}

/// Removes the client's `Proxy-Authorization`, keeping the order of the rest.
fn remove_proxy_credentials(headers: &mut HeaderMap) {
    retain_in_order(headers, |name| name != header::PROXY_AUTHORIZATION);
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
    fn the_clients_credentials_never_go_upstream() {
        let proxy_credentials = HeaderValue::from_static("Basic cHJveHk6c2VjcmV0");
        for protocol in [Protocol::Http, Protocol::Https, Protocol::Socks5] {
            for scheme in [Scheme::Http, Scheme::Https] {
                for basic in [Some(&proxy_credentials), None] {
                    let mut request = Request::get("http://shop-a.test/x")
                        .header("x-first", "1")
                        .header(header::PROXY_AUTHORIZATION, "Basic Y2xpZW50OnB3")
                        .header(header::PROXY_AUTHORIZATION, "Basic c2Vjb25k")
                        .header("x-last", "2")
                        .body(())
                        .unwrap();
                    strip_request_hop_by_hop(request.headers_mut());
                    let target: TargetAddr = "shop-a.test:80".parse().unwrap();
                    prepare_for(protocol, basic, &mut request, &target, scheme);
                    let sent: Vec<_> = request
                        .headers()
                        .get_all(header::PROXY_AUTHORIZATION)
                        .iter()
                        .collect();
                    let case = format!("{protocol:?} {scheme:?} {basic:?}");
                    let to_proxy = scheme == Scheme::Http && protocol != Protocol::Socks5;
                    match basic.filter(|_| to_proxy) {
                        // In the client's place, between the headers around it.
                        Some(value) => {
                            assert_eq!(sent, [value], "{case}");
                            let names: Vec<&str> =
                                request.headers().keys().map(|n| n.as_str()).collect();
                            assert_eq!(
                                names,
                                ["x-first", "proxy-authorization", "x-last"],
                                "{case}"
                            );
                        }
                        None => assert!(sent.is_empty(), "{case}"),
                    }
                }
            }
        }
    }

    /// A map of `headers` in their order, repeats kept (names in any case).
    fn headers_of(headers: &[(&str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    /// The map's headers in its order, as text.
    fn pairs(headers: &HeaderMap) -> Vec<(&str, &str)> {
        headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect()
    }

    #[test]
    fn a_response_loses_hop_by_hop_and_spoofed_own_headers_in_one_pass() {
        let mut headers = headers_of(&[
            ("content-type", "text/plain"),
            ("x-proxypool-proxy", "spoofed"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("X-Proxypool-Session", "spoofed"),
            ("set-cookie", "a=1"),
            ("keep-alive", "timeout=5"),
            ("set-cookie", "b=2"),
        ]);
        strip_response_headers(&mut headers);
        assert_eq!(
            pairs(&headers),
            [
                ("content-type", "text/plain"),
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
            ]
        );
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
        let mut headers = headers_of(&[
            ("host", "example.com"),
            ("proxy-authorization", "Basic x"),
            ("x-first", "1"),
            ("accept", "*/*"),
            ("x-first", "2"),
            ("proxy-connection", "keep-alive"),
            ("x-last", "3"),
        ]);
        strip_hop_by_hop(&mut headers);
        assert_eq!(
            pairs(&headers),
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
