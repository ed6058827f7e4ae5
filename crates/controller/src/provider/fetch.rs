//! Fetching a vendor's list over HTTP with a deadline and a size cap.
//!
//! hyper's own client over plain TCP: the whole fetch (connect, headers, body) shares one
//! timeout, a declared or actual body over the cap fails the fetch without buffering the
//! rest, and the `Authorization` value is marked sensitive so it never reaches a log.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use proxypool_core::Secret;
use std::time::Duration;

/// Why a fetch failed; the kind is what the status API shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("cannot connect to the vendor")]
    Connect,
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
            FetchError::Timeout => "timeout",
            FetchError::Status(_) => "http_status",
            FetchError::TooLarge => "too_large",
            FetchError::Body => "body",
            FetchError::Request => "request",
        }
    }
}

/// A shared HTTP client for vendor lists.
#[derive(Debug, Clone)]
pub struct VendorClient {
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for VendorClient {
    fn default() -> Self {
        VendorClient::new()
    }
}

impl VendorClient {
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.enforce_http(true);
        connector.set_nodelay(true);
        VendorClient {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector),
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
        let uri: Uri = url.parse().map_err(|_| FetchError::Request)?;
        let mut request = Request::get(uri)
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
        let response = self
            .client
            .request(request)
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
