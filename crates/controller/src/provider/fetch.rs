//! Fetching a vendor's list over HTTPS (or, where allowed, HTTP) with a deadline and a
//! size cap.
//!
//! reqwest over the edge's rustls configuration (the upstream's CA bundle and client
//! certificate, or the public roots): the whole fetch (connect, redirects, headers, body)
//! shares one timeout; a gzip body is decompressed; a declared or actual body over the cap
//! fails the fetch without buffering the rest (the cap counts decompressed bytes, so a
//! small compressed bomb cannot get past it); the `Authorization` value is marked
//! sensitive so it never reaches a log.
//!
//! Redirects are followed at most [`MAX_REDIRECTS`] times, and only on the list URL's own
//! host and never from `https` down to `http`: the list URL is what the operator
//! configured (and `allow_plaintext` vetted), so a redirect may not carry the request,
//! and its `authorization`, anywhere else. A redirect that is not followed fails the fetch
//! with its status.

use bytes::{Bytes, BytesMut};
use proxypool_config::ClientTlsConfig;
use proxypool_core::{Secret, UpstreamId};
use proxypool_edge::{ClientTls, ClientTlsFiles};
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, USER_AGENT};
use reqwest::redirect::{Attempt, Policy};
use reqwest::{StatusCode, Url};
use std::error::Error as _;
use std::time::Duration;

/// Redirects one fetch follows at most.
pub const MAX_REDIRECTS: usize = 5;

/// Why a fetch failed; the kind is what the status API shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("cannot connect to the vendor")]
    Connect,
    /// The TLS handshake failed (the vendor's certificate is not trusted, or the TLS
    /// settings could not be loaded).
    #[error("TLS with the vendor failed: {0}")]
    Tls(String),
    #[error("the vendor did not answer in time")]
    Timeout,
    #[error("the vendor answered HTTP {0}")]
    Status(u16),
    #[error("the response is larger than max_bytes")]
    TooLarge,
    #[error("the response body could not be read")]
    Body,
    #[error("the request could not be built")]
    Request,
}

impl FetchError {
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Connect => "connect",
            FetchError::Tls(_) => "tls",
            FetchError::Timeout => "timeout",
            FetchError::Status(_) => "http_status",
            FetchError::TooLarge => "too_large",
            FetchError::Body => "body",
            FetchError::Request => "request",
        }
    }
}

/// The HTTP client of one upstream's vendor list: plain `http://` or `https://` with the
/// upstream's CA bundle (or the public roots) and optional client certificate.
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
}

impl Default for VendorClient {
    fn default() -> Self {
        VendorClient::new()
    }
}

impl VendorClient {
    /// `https://` against the public roots.
    pub fn new() -> Self {
        VendorClient::with_tls(ClientTls::public_roots())
    }

    /// `https://` with these trust settings.
    pub fn with_tls(tls: ClientTls) -> Self {
        VendorClient {
            client: client(&tls),
            tls_error: None,
        }
    }

    /// The client of an upstream's `provider.tls` (the public roots when unset). Files that
    /// cannot be loaded are logged now and fail every fetch, so the status shows `tls`.
    pub fn for_upstream(upstream: &UpstreamId, tls: Option<&ClientTlsConfig>) -> Self {
        let Some(tls) = tls else {
            return VendorClient::new();
        };
        let files = ClientTlsFiles {
            ca: tls.ca.clone(),
            cert: tls.cert.clone(),
            key: tls.key.clone(),
        };
        match ClientTls::load(&files) {
            Ok(tls) => VendorClient::with_tls(tls),
            Err(error) => {
                tracing::error!(%upstream, %error, "the vendor list's TLS settings cannot be loaded");
                VendorClient {
                    tls_error: Some(error.to_string()),
                    ..VendorClient::new()
                }
            }
        }
    }

    /// GETs `url`; the body must arrive within `timeout` and be at most `max_bytes`.
    pub async fn fetch(
        &self,
        url: &str,
        authorization: Option<&Secret>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Bytes, FetchError> {
        tokio::time::timeout(timeout, self.fetch_inner(url, authorization, max_bytes))
            .await
            .unwrap_or(Err(FetchError::Timeout))
    }

    async fn fetch_inner(
        &self,
        url: &str,
        authorization: Option<&Secret>,
        max_bytes: usize,
    ) -> Result<Bytes, FetchError> {
        let url = Url::parse(url).map_err(|_| FetchError::Request)?;
        // Credentials travel in `authorization`, never in the URL.
        if !url.username().is_empty() || url.password().is_some() || !url.has_host() {
            return Err(FetchError::Request);
        }
        match (url.scheme(), &self.tls_error) {
            ("https", Some(error)) => return Err(FetchError::Tls(error.clone())),
            ("https" | "http", _) => {}
            _ => return Err(FetchError::Request),
        }
        let client = self
            .client
            .as_ref()
            .map_err(|error| FetchError::Tls(error.clone()))?;
        let mut request = client
            .get(url)
            .header(USER_AGENT, "proxypool-controller")
            .header(ACCEPT, "application/json, text/plain;q=0.9, */*;q=0.5");
        if let Some(secret) = authorization {
            let mut value =
                HeaderValue::from_str(secret.expose()).map_err(|_| FetchError::Request)?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let mut response = request.send().await.map_err(|error| sent(&error))?;
        if response.status() != StatusCode::OK {
            return Err(FetchError::Status(response.status().as_u16()));
        }
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
}

/// One reqwest client on `tls`'s rustls configuration, following redirects by
/// [`redirect`]. `Err` (shown as the `tls` kind) if reqwest refuses the configuration.
fn client(tls: &ClientTls) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_preconfigured_tls((*tls.config()).clone())
        .redirect(Policy::custom(redirect))
        // As before reqwest: no idle connection kept, no proxy from the environment, and no
        // `Referer` telling a redirect's target where the request came from.
        .pool_max_idle_per_host(0)
        .no_proxy()
        .referer(false)
        .build()
        .map_err(|error| error.to_string())
}

/// Follows a redirect only on the list URL's host, never down from `https`, at most
/// [`MAX_REDIRECTS`] times; any other redirect is answered as it came (its status fails
/// the fetch).
fn redirect(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    let Some(origin) = attempt.previous().first() else {
        return attempt.stop();
    };
    let next = attempt.url();
    let same_host = next.host() == origin.host();
    let downgrade = origin.scheme() == "https" && next.scheme() != "https";
    if attempt.previous().len() > MAX_REDIRECTS || !same_host || downgrade {
        attempt.stop()
    } else {
        attempt.follow()
    }
}

/// What a failed send means: a refused certificate is worth its own kind (the operator
/// must act on it); anything else before an answer is a failed connection.
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
        source = cause.source();
    }
    FetchError::Connect
}
