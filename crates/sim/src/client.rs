//! Tiny HTTP/1.1 GET helpers for tests: direct, through an HTTP proxy (absolute-form or
//! `CONNECT`) and through SOCKS5. One request per connection; no timeouts (wrap them in
//! `tokio::time::timeout` where a test needs one).

use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use proxypool_proto::http_connect::{self, basic_auth_value};
use proxypool_proto::{ProtoError, TargetAddr, socks5};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::origin::Echo;

/// A response, read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// Status code.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Fetched {
    /// The body parsed as the origin's [`Echo`], if it is one.
    pub fn echo(&self) -> Option<Echo> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `GET path` straight to `addr`.
pub async fn get(addr: SocketAddr, path: &str) -> Result<Fetched, ProtoError> {
    let stream = TcpStream::connect(addr).await?;
    request(stream, path, &addr.to_string(), None).await
}

/// `GET http://target{path}` sent in absolute form to the HTTP proxy at `proxy`.
pub async fn get_via_http_proxy(
    proxy: SocketAddr,
    auth: Option<(&str, &str)>,
    target: SocketAddr,
    path: &str,
) -> Result<Fetched, ProtoError> {
    let stream = TcpStream::connect(proxy).await?;
    let uri = format!("http://{target}{path}");
    let auth = auth.map(|(u, p)| basic_auth_value(u, p));
    request(stream, &uri, &target.to_string(), auth.as_deref()).await
}

/// `GET http://authority{path}` in absolute form to the HTTP proxy at `proxy`, for a
/// named target (`shop-a.test:PORT`) the proxy resolves.
pub async fn get_named_via_http_proxy(
    proxy: SocketAddr,
    auth: Option<(&str, &str)>,
    authority: &str,
    path: &str,
) -> Result<Fetched, ProtoError> {
    let stream = TcpStream::connect(proxy).await?;
    let uri = format!("http://{authority}{path}");
    let auth = auth.map(|(u, p)| basic_auth_value(u, p));
    request(stream, &uri, authority, auth.as_deref()).await
}

/// `GET path` on a named target through a `CONNECT` tunnel of the HTTP proxy at `proxy`.
pub async fn get_named_via_connect(
    proxy: SocketAddr,
    auth: Option<(&str, &str)>,
    authority: &str,
    path: &str,
) -> Result<Fetched, ProtoError> {
    let mut stream = TcpStream::connect(proxy).await?;
    http_connect::connect(&mut stream, authority, auth).await?;
    request(stream, path, authority, None).await
}

/// `GET path` on `target`, through a `CONNECT` tunnel of the HTTP proxy at `proxy`.
pub async fn get_via_connect(
    proxy: SocketAddr,
    auth: Option<(&str, &str)>,
    target: SocketAddr,
    path: &str,
) -> Result<Fetched, ProtoError> {
    get_named_via_connect(proxy, auth, &target.to_string(), path).await
}

/// `GET path` on `target`, through the SOCKS5 proxy at `proxy`.
pub async fn get_via_socks5(
    proxy: SocketAddr,
    auth: Option<(&str, &str)>,
    target: &TargetAddr,
    path: &str,
) -> Result<Fetched, ProtoError> {
    let mut stream = TcpStream::connect(proxy).await?;
    socks5::connect(&mut stream, target, auth).await?;
    request(stream, path, &target.to_string(), None).await
}

async fn request<S>(
    stream: S,
    uri: &str,
    host: &str,
    proxy_authorization: Option<&str>,
) -> Result<Fetched, ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(hyper_error)?;
    let driver = tokio::spawn(connection);
    let mut req = Request::get(uri)
        .header(header::HOST, host)
        .body(Empty::<Bytes>::new())
        .map_err(|e| ProtoError::Io(std::io::Error::other(e)))?;
    if let Some(value) = proxy_authorization {
        let value =
            HeaderValue::from_str(value).map_err(|e| ProtoError::Io(std::io::Error::other(e)))?;
        req.headers_mut().insert(header::PROXY_AUTHORIZATION, value);
    }
    let response = sender.send_request(req).await.map_err(hyper_error)?;
    let status: StatusCode = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(hyper_error)?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok(Fetched {
        status: status.as_u16(),
        body,
    })
}

fn hyper_error(err: hyper::Error) -> ProtoError {
    ProtoError::Io(std::io::Error::other(err))
}
