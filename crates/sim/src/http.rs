//! hyper plumbing shared by the HTTP servers here: one body type, small response
//! builders, a chunked body, and the accept loop.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::shutdown::{ShutdownSignal, spawn_until};

/// The one response body type: fixed bytes, a chunked stream or a relayed body.
pub(crate) type Body = BoxBody<Bytes, hyper::Error>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A body sent with `Transfer-Encoding: chunked` (no length known up front), so a client
/// must enforce its size cap while reading rather than from `Content-Length`.
pub(crate) fn chunked(chunks: Vec<Bytes>) -> Body {
    Chunks(chunks.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

struct Chunks(VecDeque<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

pub(crate) fn respond(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
}

/// Accepts connections until shutdown and serves each with HTTP/1.1 (keep-alive and
/// upgrades on). `on_accept` sees every accepted stream first and may keep it (`None`),
/// which is how a dead upstream proxy drops connections without speaking HTTP.
pub(crate) async fn serve<H, F, A>(
    listener: TcpListener,
    signal: ShutdownSignal,
    on_accept: A,
    handler: H,
) where
    A: Fn(TcpStream) -> Option<TcpStream> + Send + 'static,
    H: Fn(Request<Incoming>, std::net::SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    serve_connections(listener, signal, None, on_accept, handler).await;
}

/// As [`serve`], over TLS with `config`. A failed handshake closes that connection only.
pub(crate) async fn serve_tls<H, F>(
    listener: TcpListener,
    signal: ShutdownSignal,
    config: std::sync::Arc<rustls::ServerConfig>,
    handler: H,
) where
    H: Fn(Request<Incoming>, std::net::SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    serve_connections(listener, signal, Some(config), Some, handler).await;
}

/// [`serve`], each connection first through TLS when `tls` is set (an HTTPS proxy, an
/// https list endpoint).
pub(crate) async fn serve_connections<H, F, A>(
    listener: TcpListener,
    mut signal: ShutdownSignal,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    on_accept: A,
    handler: H,
) where
    A: Fn(TcpStream) -> Option<TcpStream> + Send + 'static,
    H: Fn(Request<Incoming>, std::net::SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    while let Some((stream, peer)) = accept_next(&listener, &mut signal).await {
        let Some(stream) = on_accept(stream) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (handler, acceptor) = (handler.clone(), acceptor.clone());
        spawn_until(&signal, async move {
            let service = service_fn(move |req| {
                let response = handler(req, peer);
                async move { Ok::<_, Infallible>(response.await) }
            });
            let builder = http1::Builder::new();
            let _ = match acceptor {
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await
                }
                Some(acceptor) => {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await
                }
            };
        });
    }
}

/// The next accepted connection and its peer, or `None` once shutdown is signalled. A
/// failed accept (out of file descriptors and friends) backs off briefly instead of
/// spinning, then tries again.
pub(crate) async fn accept_next(
    listener: &TcpListener,
    signal: &mut ShutdownSignal,
) -> Option<(TcpStream, std::net::SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            () = signal.wait() => return None,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok(pair) => return Some(pair),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}
