//! Fetching a vendor's list over HTTPS (or, where allowed, HTTP) with a deadline and a
//! size cap.
//!
//! hyper's own client over the edge's TLS dial (rustls): the whole fetch (connect, headers, body) shares one
//! timeout, a declared or actual body over the cap fails the fetch without buffering the
//! rest, and the `Authorization` value is marked sensitive so it never reaches a log.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use proxypool_config::ClientTlsConfig;
use proxypool_core::{Secret, UpstreamId};
use proxypool_edge::{ClientTls, ClientTlsFiles, Target};
use std::time::Duration;

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
/// One connection per fetch: a list is fetched every few seconds at most, so a pool
/// would save little and would keep a socket (and a TLS session) open to every vendor.
#[derive(Debug, Clone)]
pub struct VendorClient {
    /// `Err` when the upstream's TLS files could not be loaded: every fetch fails with it.
    tls: Result<ClientTls, String>,
}

impl Default for VendorClient {
    fn default() -> Self {
        VendorClient::new()
    }
}

impl VendorClient {
    /// `https://` against the public roots.
    pub fn new() -> Self {
        VendorClient {
            tls: Ok(ClientTls::public_roots()),
        }
    }

    /// `https://` with these trust settings.
    pub fn with_tls(tls: ClientTls) -> Self {
        VendorClient { tls: Ok(tls) }
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
                    tls: Err(error.to_string()),
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
        let target = Target::parse(url).map_err(|_| FetchError::Request)?;
        let tls = match (&self.tls, target.tls) {
            (Ok(tls), true) => Some(tls),
            (Err(error), true) => return Err(FetchError::Tls(error.clone())),
            (_, false) => None,
        };
        let stream = target.dial(tls).await.map_err(|error| {
            // A refused certificate is worth its own kind: the operator must act on it.
            if target.tls && error.get_ref().is_some_and(|e| e.is::<rustls::Error>()) {
                FetchError::Tls(error.to_string())
            } else {
                FetchError::Connect
            }
        })?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|_| FetchError::Connect)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = Request::get(target.path.as_str())
            .header(HOST, target.authority.as_str())
            .header(USER_AGENT, "proxypool-controller")
            .header(ACCEPT, "application/json, text/plain;q=0.9, */*;q=0.5")
            .body(Empty::new())
            .map_err(|_| FetchError::Request)?;
        if let Some(secret) = authorization {
            let mut value =
                HeaderValue::from_str(secret.expose()).map_err(|_| FetchError::Request)?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let response = sender
            .send_request(request)
            .await
            .map_err(|_| FetchError::Connect)?;
        if response.status() != StatusCode::OK {
            return Err(FetchError::Status(response.status().as_u16()));
        }
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max_bytes as u64) {
            return Err(FetchError::TooLarge);
        }
        match Limited::new(response.into_body(), max_bytes)
            .collect()
            .await
        {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(FetchError::TooLarge),
            Err(_) => Err(FetchError::Body),
        }
    }
}
