//! A one-request HTTP/1.1 client for `proxypool extract`, on hyper's connection API.
//!
//! The client API is plain HTTP on a private network or behind a TLS terminator, so the
//! binary needs no TLS stack and no pooled client: one connection, one request, read the
//! whole answer. A base URL may carry a path prefix (`http://host/proxypool`).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A parsed `http://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseUrl {
    /// `host:port`, as dialed and sent in `Host`.
    pub authority: String,
    /// Without a trailing `/` (empty for none).
    pub prefix: String,
}

impl BaseUrl {
    pub(crate) fn parse(url: &str) -> Result<BaseUrl, String> {
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported by this client; reach the API over plain \
                 HTTP (loopback, private network) or use curl"
            ));
        } else {
            return Err(format!("{url}: the API URL must start with http://"));
        };
        let (authority, prefix) = match rest.find('/') {
            Some(slash) => (&rest[..slash], rest[slash..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url}: expected http://host[:port][/path]"));
        }
        let has_port = match authority.rfind(':') {
            // An IPv6 literal's colons are inside brackets.
            Some(colon) => !authority[colon..].contains(']'),
            None => false,
        };
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(BaseUrl {
            authority,
            prefix: prefix.to_owned(),
        })
    }
}

/// Sends one request and reads the answer, all within `timeout`.
pub(crate) async fn send(
    base: &BaseUrl,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Answer, String> {
    tokio::time::timeout(timeout, exchange(base, method, path, headers, body))
        .await
        .map_err(|_| format!("no answer from {} within {timeout:?}", base.authority))?
}

async fn exchange(
    base: &BaseUrl,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Vec<u8>>,
) -> Result<Answer, String> {
    let stream = TcpStream::connect(&base.authority)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", base.authority))?;
    let _ = stream.set_nodelay(true);
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
        assert_eq!(
            BaseUrl::parse("http://127.0.0.1:17080").unwrap(),
            BaseUrl {
                authority: "127.0.0.1:17080".into(),
                prefix: String::new()
            }
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
        assert!(BaseUrl::parse("https://x").unwrap_err().contains("https"));
        assert!(BaseUrl::parse("ftp://x").is_err());
    }
}
