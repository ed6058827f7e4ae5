//! Fetching one page of a vendor's list over HTTPS (or, where allowed, HTTP) with a
//! deadline and a size cap.
//!
//! reqwest over the edge's rustls configuration (the upstream's CA bundle and client
//! certificate, or the public roots): the page's fetch (connect, redirects, headers, body)
//! shares one timeout; a gzip or deflate body is decoded; a declared or actual body over the
//! cap fails the fetch without buffering the rest (the cap counts decoded bytes, so a small
//! compressed bomb cannot get past it); every authentication value is marked sensitive so
//! it never reaches a log.
//!
//! Redirects are followed here, not by reqwest, at most [`MAX_REDIRECTS`] times, and only
//! to hosts and ports the [`HostRule`] allows (the list URL's own and `redirect_hosts`), never from
//! `https` down to `http`: the list URL is what the operator configured (and
//! `allow_plaintext` vetted), so a redirect may not carry the request, and its
//! authentication, anywhere else. Each refusal has its own kind on the upstream's status.
//!
//! Where a request may connect is the `dial_rule`'s business: unless the upstream sets
//! `allow_private_hosts`, no host of the fetch (the list's, a redirect's, a next page's)
//! may be or resolve to an internal address, judged on the address that is dialed.

use super::auth::VendorAuth;
use super::dial_rule::{DialRule, Refused};
use super::link::next_link;
use bytes::{Bytes, BytesMut};
use proxypool_config::{UpstreamConfig, parse_redirect_host};
use proxypool_core::Secret;
use proxypool_edge::{ClientTls, ClientTlsFiles};
use reqwest::header::{ACCEPT, LINK, LOCATION, USER_AGENT};
use reqwest::redirect::Policy;
use reqwest::{StatusCode, Url};
use std::error::Error as _;
use std::time::Duration;

pub use super::failure::{FetchError, MAX_REDIRECTS};

/// The HTTP client of one upstream's vendor list: plain `http://` or `https://` with the
/// upstream's CA bundle (or the public roots) and optional client certificate, connecting
/// only where the upstream's dial rule allows (no internal address unless
/// `allow_private_hosts`).
///
/// One connection per fetch (no idle connection is kept): a list is fetched every few
/// seconds at most, so a pool would save little and would keep a socket (and a TLS
/// session) open to every vendor.
#[derive(Debug, Clone)]
pub struct VendorClient {
    /// `Err` when reqwest refused the TLS configuration: every fetch fails with it.
    client: Result<reqwest::Client, String>,
    /// Set when the upstream's TLS files could not be loaded: every `https` fetch fails
    /// with it (an `http` list needs no TLS settings).
    tls_error: Option<String>,
    /// Kept to build the client again for another rule.
    tls: ClientTls,
    rule: DialRule,
}

impl Default for VendorClient {
    fn default() -> Self {
        VendorClient::new()
    }
}

impl VendorClient {
    /// `https://` against the public roots, never to an internal address.
    pub fn new() -> Self {
        VendorClient::with_tls(ClientTls::public_roots())
    }

    /// `https://` with these trust settings, never to an internal address.
    pub fn with_tls(tls: ClientTls) -> Self {
        let rule = DialRule::new(false);
        VendorClient {
            client: client(&tls, rule),
            tls_error: None,
            tls,
            rule,
        }
    }

    /// The client of an upstream: its `provider.tls` (the public roots when unset) and its
    /// `allow_private_hosts`. TLS files that cannot be loaded are logged now and fail every
    /// fetch, so the status shows `tls`.
    pub fn for_upstream(upstream: &UpstreamConfig) -> Self {
        let allow_private = upstream.provider.allow_private_hosts;
        let Some(tls) = &upstream.provider.tls else {
            return VendorClient::new().allowing_private_hosts(allow_private);
        };
        let files = ClientTlsFiles {
            ca: tls.ca.clone(),
            cert: tls.cert.clone(),
            key: tls.key.clone(),
        };
        match ClientTls::load(&files) {
            Ok(tls) => VendorClient::with_tls(tls).allowing_private_hosts(allow_private),
            Err(error) => {
                let upstream = &upstream.id;
                tracing::error!(%upstream, %error, "the vendor list's TLS settings cannot be loaded");
                VendorClient {
                    tls_error: Some(error.to_string()),
                    ..VendorClient::new().allowing_private_hosts(allow_private)
                }
            }
        }
    }

    /// The same client, connecting to internal addresses too when `allow` (an upstream's
    /// `allow_private_hosts`), or refusing them.
    pub fn allowing_private_hosts(self, allow: bool) -> Self {
        self.with_rule(DialRule::new(allow))
    }

    pub(crate) fn with_rule(self, rule: DialRule) -> Self {
        VendorClient {
            client: client(&self.tls, rule),
            rule,
            ..self
        }
    }

    /// GETs `url` alone (no pages, no hosts beyond its own) with an optional
    /// `Authorization`; the body must arrive within `timeout` and be at most `max_bytes`.
    pub async fn fetch(
        &self,
        url: &str,
        authorization: Option<&Secret>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Bytes, FetchError> {
        let url = Url::parse(url).map_err(|_| FetchError::Request)?;
        let hosts = HostRule::new(&url, &[]);
        let auth = VendorAuth::authorization(authorization)?;
        let page = self.page(url, &auth, &hosts, timeout, max_bytes).await?;
        Ok(page.body)
    }

    /// GETs one page at `url` with `auth`, following redirects `hosts` allows; the body
    /// must arrive within `timeout` and be at most `max_bytes`.
    pub async fn page(
        &self,
        url: Url,
        auth: &VendorAuth,
        hosts: &HostRule,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Page, FetchError> {
        tokio::time::timeout(timeout, self.page_inner(url, auth, hosts, max_bytes))
            .await
            .unwrap_or(Err(FetchError::Timeout))
    }

    async fn page_inner(
        &self,
        mut url: Url,
        auth: &VendorAuth,
        hosts: &HostRule,
        max_bytes: usize,
    ) -> Result<Page, FetchError> {
        let client = self
            .client
            .as_ref()
            .map_err(|error| FetchError::Tls(error.clone()))?;
        let mut redirects = 0;
        loop {
            hosts.check(&url)?;
            // A name is judged as it is resolved for the connection (the client's
            // resolver); an address literal never is, so here.
            self.rule.check_literal(&url)?;
            if url.scheme() == "https"
                && let Some(error) = &self.tls_error
            {
                return Err(FetchError::Tls(error.clone()));
            }
            let request = client
                .get(auth.url(&url))
                .header(USER_AGENT, "proxypool-controller")
                .header(ACCEPT, "application/json, text/plain;q=0.9, */*;q=0.5");
            let response = auth
                .apply(request)
                .send()
                .await
                .map_err(|error| sent(&error))?;
            let status = response.status();
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or(FetchError::Status(status.as_u16()))?;
                let next = url
                    .join(location)
                    .map_err(|_| FetchError::Status(status.as_u16()))?;
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(FetchError::TooManyRedirects);
                }
                url = next;
                continue;
            }
            if status != StatusCode::OK {
                return Err(FetchError::Status(status.as_u16()));
            }
            let links = response
                .headers()
                .get_all(LINK)
                .iter()
                .filter_map(|v| v.to_str().ok());
            let next_link = next_link(links);
            let body = read_capped(response, max_bytes).await?;
            return Ok(Page {
                url,
                body,
                next_link,
            });
        }
    }
}

/// One page as it came: the URL that answered (after redirects: what a next link is
/// resolved against), its decoded body, and a `Link: <...>; rel="next"` target as written.
#[derive(Debug, Clone)]
pub struct Page {
    pub url: Url,
    pub body: Bytes,
    pub next_link: Option<String>,
}

/// Where one upstream's fetch may go: the list URL's host on the list URL's port, and
/// `redirect_hosts` (exact, case-insensitive): a bare host on its scheme's standard port
/// (443 for https, 80 for http), `host:port` on that port only. A port is part of where a
/// request goes: another port of the same host may be another service, which must not
/// receive the fetch's authentication unless the operator named it. For an `https` list,
/// only over `https`.
#[derive(Debug, Clone)]
pub struct HostRule {
    /// Host and port (`None`: the standard port of the request's scheme).
    hosts: Vec<(String, Option<u16>)>,
    https_only: bool,
}

impl HostRule {
    /// The rule of a list URL and its (validated) `redirect_hosts`; an entry that does not
    /// parse allows nothing.
    pub fn new(list: &Url, redirect_hosts: &[String]) -> Self {
        let mut hosts: Vec<(String, Option<u16>)> = redirect_hosts
            .iter()
            .filter_map(|entry| parse_redirect_host(entry.trim()).ok())
            .map(|(host, port)| (host_name(&host), port))
            .collect();
        if let Some(host) = list.host_str() {
            hosts.push((host_name(host), list.port_or_known_default()));
        }
        HostRule {
            hosts,
            https_only: list.scheme() == "https",
        }
    }

    /// Whether the fetch may send a request to `url`.
    pub fn check(&self, url: &Url) -> Result<(), FetchError> {
        // Credentials travel in headers or the configured query key, never in the URL.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchError::Request);
        }
        match url.scheme() {
            "https" => {}
            "http" if self.https_only => return Err(FetchError::InsecureRedirect),
            "http" => {}
            _ => return Err(FetchError::Request),
        }
        let host = url.host_str().map(host_name).ok_or(FetchError::Request)?;
        let port = url.port_or_known_default().ok_or(FetchError::Request)?;
        let standard = url.port().is_none();
        let allowed = self.hosts.iter().any(|(allowed, allowed_port)| {
            *allowed == host
                && match allowed_port {
                    Some(allowed_port) => *allowed_port == port,
                    None => standard,
                }
        });
        if allowed {
            Ok(())
        } else if host.contains(':') {
            Err(FetchError::ForeignHost(format!("[{host}]:{port}")))
        } else {
            Err(FetchError::ForeignHost(format!("{host}:{port}")))
        }
    }
}

/// A URL's host as compared: lower case, an IPv6 address without brackets.
fn host_name(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The body, failing as soon as it is known to be over `max_bytes`.
async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<Bytes, FetchError> {
    // Without decompression this is the header as declared; with it, reqwest reports
    // none and the cap is checked as the body arrives.
    if response
        .content_length()
        .is_some_and(|len| len > max_bytes as u64)
    {
        return Err(FetchError::TooLarge);
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| FetchError::Body)? {
        if body.len() + chunk.len() > max_bytes {
            return Err(FetchError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// One reqwest client on `tls`'s rustls configuration, resolving names through `rule`'s
/// resolver and following no redirect itself ([`VendorClient::page`] does). `Err` (shown
/// as the `tls` kind) if reqwest refuses the configuration.
fn client(tls: &ClientTls, rule: DialRule) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_preconfigured_tls((*tls.config()).clone())
        .dns_resolver(rule.resolver())
        .redirect(Policy::none())
        // As before reqwest: no idle connection kept, no proxy from the environment, and no
        // `Referer` telling a redirect's target where the request came from.
        .pool_max_idle_per_host(0)
        .no_proxy()
        .referer(false)
        .build()
        .map_err(|error| error.to_string())
}

/// What a failed send means: a name the dial rule refused, and a refused certificate, are
/// worth their own kinds (the operator must act on them); anything else before an answer
/// is a failed connection.
fn sent(error: &reqwest::Error) -> FetchError {
    if error.is_builder() {
        return FetchError::Request;
    }
    let mut source = error.source();
    while let Some(mut cause) = source {
        // The TLS error travels inside `io::Error`s (nested), whose `source()` skips it.
        while let Some(inner) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            cause = inner;
        }
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return FetchError::Tls(tls.to_string());
        }
        if let Some(Refused(refusal)) = cause.downcast_ref::<Refused>() {
            return refusal.clone();
        }
        source = cause.source();
    }
    FetchError::Connect
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(list: &str, redirect_hosts: &[&str]) -> HostRule {
        let hosts: Vec<String> = redirect_hosts.iter().map(|h| (*h).to_owned()).collect();
        HostRule::new(&Url::parse(list).unwrap(), &hosts)
    }

    fn check(rule: &HostRule, url: &str) -> Result<(), FetchError> {
        rule.check(&Url::parse(url).unwrap())
    }

    #[test]
    fn the_list_s_own_host_on_its_own_port_only() {
        let r = rule("http://127.0.0.1:8080/list", &[]);
        assert_eq!(check(&r, "http://127.0.0.1:8080/page/2"), Ok(()));
        assert_eq!(
            check(&r, "http://127.0.0.1:8081/list"),
            Err(FetchError::ForeignHost("127.0.0.1:8081".into()))
        );
        assert_eq!(
            check(&r, "http://127.0.0.1/list"),
            Err(FetchError::ForeignHost("127.0.0.1:80".into()))
        );
        let r = rule("https://API.vendor.example/list", &[]);
        assert_eq!(check(&r, "https://api.vendor.example:443/p"), Ok(()));
        assert_eq!(
            check(&r, "https://api.vendor.example:8443/p"),
            Err(FetchError::ForeignHost("api.vendor.example:8443".into()))
        );
    }

    #[test]
    fn redirect_hosts_bare_on_the_standard_port_or_with_theirs() {
        let r = rule(
            "https://api.vendor.example/list",
            &[
                "dl.vendor.example",
                "api.vendor.example:8443",
                "[2001:db8::1]:9443",
            ],
        );
        for ok in [
            "https://dl.vendor.example/x",
            "https://DL.vendor.example:443/x",
            "https://api.vendor.example:8443/x",
            "https://[2001:db8::1]:9443/x",
        ] {
            assert_eq!(check(&r, ok), Ok(()), "{ok}");
        }
        for (foreign, shown) in [
            ("https://dl.vendor.example:8443/x", "dl.vendor.example:8443"),
            (
                "https://api.vendor.example:9443/x",
                "api.vendor.example:9443",
            ),
            ("https://[2001:db8::1]/x", "[2001:db8::1]:443"),
            ("https://other.example/x", "other.example:443"),
        ] {
            assert_eq!(
                check(&r, foreign),
                Err(FetchError::ForeignHost(shown.into())),
                "{foreign}"
            );
        }
        assert_eq!(
            check(&r, "http://dl.vendor.example/x"),
            Err(FetchError::InsecureRedirect)
        );
        // A bare host on an http list: port 80.
        let r = rule("http://127.0.0.1:8080/list", &["127.0.0.2"]);
        assert_eq!(check(&r, "http://127.0.0.2/x"), Ok(()));
        assert!(check(&r, "http://127.0.0.2:8080/x").is_err());
    }
}
