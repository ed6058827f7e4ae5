//! A one-request HTTP/1.1 client for `proxypool extract`, on hyper's connection API.
//!
//! One connection, one request, read the whole answer; no pooled client. Over `https://`
//! the server is verified against the public roots or a CA bundle (`--ca`), on the edge's
//! rustls dial. A base URL may carry a path prefix (`https://host/proxypool`).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use proxypool_edge::{ClientTls, Target};
use std::time::Duration;
use url::{Host, Url};

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A parsed `http(s)://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseUrl {
    /// `host:port`, as dialed and sent in `Host`.
    pub authority: String,
    /// Without a trailing `/` (empty for none).
    pub prefix: String,
    /// Where to dial, and whether over TLS.
    target: Target,
}

impl BaseUrl {
    pub(crate) fn parse(url: &str) -> Result<BaseUrl, String> {
        let bad = || format!("{url}: expected http(s)://host[:port][/path]");
        let parsed = Url::parse(url).map_err(|_| bad())?;
        let tls = match parsed.scheme() {
            "https" => true,
            "http" => false,
            _ => return Err(bad()),
        };
        // A base names where the API is, nothing more: no credentials, query or fragment.
        if !parsed.username().is_empty()
            || parsed.password().is_some()
            || parsed.query().is_some()
            || parsed.fragment().is_some()
        {
            return Err(bad());
        }
        let host = match parsed.host() {
            Some(Host::Domain(name)) => name.to_owned(),
            Some(Host::Ipv4(address)) => address.to_string(),
            Some(Host::Ipv6(address)) => format!("[{address}]"),
            None => return Err(bad()),
        };
        let port = parsed.port_or_known_default().ok_or_else(bad)?;
        let target = Target {
            tls,
            authority: format!("{host}:{port}"),
            host,
            path: parsed.path().to_owned(),
        };
        Ok(BaseUrl {
            authority: target.authority.clone(),
            prefix: target.path.trim_end_matches('/').to_owned(),
            target,
        })
    }

    /// Whether the API is reached over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.target.tls
    }
}

/// Sends one request and reads the answer, all within `timeout`.
pub(crate) async fn send(
    base: &BaseUrl,
    tls: Option<&ClientTls>,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Answer, String> {
    tokio::time::timeout(timeout, exchange(base, tls, method, path, headers, body))
        .await
        .map_err(|_| format!("no answer from {} within {timeout:?}", base.authority))?
}

async fn exchange(
    base: &BaseUrl,
    tls: Option<&ClientTls>,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Vec<u8>>,
) -> Result<Answer, String> {
    let stream = base
        .target
        .dial(tls)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", base.authority))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{}: {e}", base.authority))?;
    // The connection task ends with the exchange (the sender is dropped after it).
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = Request::builder()
        .method(method)
        .uri(format!("{}{path}", base.prefix))
        .header(hyper::header::HOST, &base.authority);
    for (name, value) in headers {
        let value = HeaderValue::from_str(value).map_err(|_| format!("invalid {name} header"))?;
        request = request.header(*name, value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| format!("request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("{}: {e}", base.authority))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{}: reading the answer: {e}", base.authority))?
        .to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let plain = BaseUrl::parse("http://127.0.0.1:17080").unwrap();
        assert_eq!(
            (
                plain.authority.as_str(),
                plain.prefix.as_str(),
                plain.is_tls()
            ),
            ("127.0.0.1:17080", "", false)
        );
        let secure = BaseUrl::parse("https://api.example/pp").unwrap();
        assert_eq!(
            (
                secure.authority.as_str(),
                secure.prefix.as_str(),
                secure.is_tls()
            ),
            ("api.example:443", "/pp", true)
        );
        let prefixed = BaseUrl::parse("http://api.internal/pp/").unwrap();
        assert_eq!(
            (prefixed.authority.as_str(), prefixed.prefix.as_str()),
            ("api.internal:80", "/pp")
        );
        assert_eq!(
            BaseUrl::parse("http://[::1]").unwrap().authority,
            "[::1]:80"
        );
        assert!(BaseUrl::parse("ftp://x").is_err());
        assert!(BaseUrl::parse("http://").is_err());
        assert!(BaseUrl::parse("http://user:pass@api.internal").is_err());
        assert!(BaseUrl::parse("http://api.internal/pp?x=1").is_err());
        assert!(BaseUrl::parse("http://api.internal:99999").is_err());
        let ported = BaseUrl::parse("https://API.example:8443").unwrap();
        assert_eq!(
            (ported.authority.as_str(), ported.prefix.as_str()),
            ("api.example:8443", "")
        );
    }
}
