//! [`serve`]: the one server scaffold of every HTTP listener of proxypool that is not the
//! gateway's proxy listener (the client API, the worker control API, the gateway's admin
//! listener).
//!
//! Per connection, in this order:
//!
//! 1. **Admission at accept**, before a byte is read ([`ConnectionGate`]): the peer's
//!    address must be under `max_connections_per_ip`, then the listener under
//!    `max_connections`. Over either cap the socket is closed at once.
//! 2. **TLS**, when the listener has a [`ServerTls`]: the handshake runs after admission
//!    (so a slow handshake holds a capped slot, never an uncapped one) and must finish
//!    within `header_read_timeout`, so a client cannot hold its slot by trickling a
//!    handshake. A client that speaks plain HTTP to a TLS listener gets a plain `400` in
//!    the JSON error shape (`tls_required`) and is closed, instead of a handshake error it
//!    cannot read. Each handshake takes the configuration current at that moment, so a
//!    certificate replaced on disk (the files are polled while the listener serves) is
//!    served to new connections and open ones keep theirs.
//! 3. **hyper HTTP/1.1 with a timer**: the request head must arrive within
//!    `header_read_timeout` (hyper's timer runs from the moment the connection waits for a
//!    head, so it also bounds a kept-alive connection's wait for its next request and cuts
//!    off a client that trickles its head a byte at a time); a kept-alive connection with
//!    no traffic and no request in flight is closed after `keepalive_idle` (so in effect a
//!    kept-alive connection waits at most the smaller of the two for its next request).
//! 4. **Head size**: hyper refuses a head over `max_header_bytes` (its read buffer is
//!    capped at that size, at least hyper's minimum of 8192) and answers 431 itself, with
//!    an empty body. hyper offers no hook for that answer, so the connection's IO writes
//!    the JSON error body in its place: [`HeadGuard`] recognises hyper's own empty 431 (the
//!    only 431 these servers send; the services never answer 431) as it is written and
//!    sends `{"error":{"code":"headers_too_large",...},"request_id":"..."}` with
//!    `Connection: close` instead, then closes with a short, bounded linger (it reads and
//!    drops what the peer is still sending), so the kernel does not reset the connection
//!    under the answer. Rejected alternatives: counting head bytes in a
//!    pre-read layer needs an HTTP/1 parser of its own to find where the next head starts
//!    after a body, and checking the size in the service only works below hyper's cap.
//! 5. **Graceful shutdown**: when `shutdown` completes the listener stops accepting, every
//!    connection finishes the request in flight and closes, and `serve` returns when the
//!    last one is gone (the caller bounds that wait).
//!
//! Every request carries its connection's peer address as a [`Peer`] extension.

use crate::gate::{ConnectionGate, Refused};
use crate::request_id::RequestId;
use crate::tls::{Conn, ServerTls};
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use proxypool_proto::proxy_protocol::ProxiedFrom;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// hyper's smallest read buffer; a head cap below it cannot be enforced. Defined in the
/// core crate so the configuration checks the same number.
pub use proxypool_core::MIN_HEADER_BYTES;

/// The limits of one listener, as a plain struct (the binary fills it from the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeLimits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Open connections at once from one address; more are closed on accept.
    pub max_connections_per_ip: usize,
    /// Time to send a complete request head (and to start the next one on a kept-alive
    /// connection).
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no traffic for this long is closed.
    pub keepalive_idle: Duration,
    /// Largest request head; over it the answer is 431 (at least [`MIN_HEADER_BYTES`]).
    pub max_header_bytes: usize,
    /// Load balancers (address, prefix length) whose connections start with a PROXY
    /// protocol header: read within `header_read_timeout`, its client is the connection's
    /// [`Peer`] and what the per-IP cap counts; without a valid one the connection is
    /// closed. Empty = nobody's PROXY header is read.
    pub proxy_protocol_from: Vec<(IpAddr, u8)>,
    /// TLS on this listener (`None` = plain HTTP).
    pub tls: Option<ServerTls>,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: 1024,
            max_connections_per_ip: 128,
            header_read_timeout: Duration::from_secs(10),
            keepalive_idle: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            proxy_protocol_from: Vec::new(),
            tls: None,
        }
    }
}

/// The peer address of the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Serves `service` on `listener` under `limits` until `shutdown` completes, then lets
/// open connections finish their request in flight and returns.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let gate = Arc::new(ConnectionGate::new(
        limits.max_connections,
        limits.max_connections_per_ip,
    ));
    let limits = Arc::new(limits);
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each connection holds a sender; when all are dropped the drain is over.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    if let Some(tls) = limits.tls.clone() {
        tokio::spawn(tls.watch(stop_rx.clone()));
    }
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors and similar: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if speaks_proxy_protocol(&limits.proxy_protocol_from, peer.ip()) {
            let (gate, service, limits) = (Arc::clone(&gate), service.clone(), Arc::clone(&limits));
            let (stop, open) = (stop_rx.clone(), open_tx.clone());
            tokio::spawn(async move {
                let Some((stream, client)) = unwrap_proxy_header(stream, peer, &limits).await
                else {
                    return;
                };
                let Ok(admitted) = gate.admit(client.ip()) else {
                    tracing::debug!(%client, "connection refused at accept (behind a balancer)");
                    return;
                };
                if let Some(stream) = secure(stream, client, &limits).await {
                    serve_connection(stream, client, service, &limits, stop).await;
                }
                drop((admitted, open));
            });
            continue;
        }
        let admitted = match gate.admit(peer.ip()) {
            Ok(admitted) => admitted,
            Err(refused) => {
                tracing::debug!(%peer, cap = match refused {
                    Refused::PerIp => "per_ip",
                    Refused::Global => "global",
                }, "connection refused at accept");
                drop(stream);
                continue;
            }
        };
        let service = service.clone();
        let limits = Arc::clone(&limits);
        let stop = stop_rx.clone();
        let open = open_tx.clone();
        tokio::spawn(async move {
            if let Some(stream) = secure(stream, peer, &limits).await {
                serve_connection(stream, peer, service, &limits, stop).await;
            }
            drop((admitted, open));
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_tx);
    let _ = open_rx.recv().await;
    Ok(())
}

/// Whether `peer` is a balancer that starts its connections with a PROXY header.
fn speaks_proxy_protocol(from: &[(IpAddr, u8)], peer: IpAddr) -> bool {
    from.iter()
        .any(|(net, prefix)| proxypool_core::in_block(peer, *net, *prefix))
}

/// Reads a balancer's PROXY header: the stream at the client's first byte and the
/// client's address (the balancer's own for a `LOCAL`/`UNKNOWN` header), or `None`.
async fn unwrap_proxy_header(
    mut stream: TcpStream,
    peer: SocketAddr,
    limits: &ServeLimits,
) -> Option<(TcpStream, SocketAddr)> {
    let read = proxypool_proto::proxy_protocol::read_header(&mut stream);
    match proxypool_proto::with_timeout(limits.header_read_timeout, read).await {
        Ok(ProxiedFrom::Client(client)) => Some((stream, client)),
        Ok(ProxiedFrom::Local) => Some((stream, peer)),
        Err(error) => {
            tracing::debug!(%peer, %error, "no valid PROXY header from a trusted balancer");
            None
        }
    }
}

/// The TLS record type of a handshake: the first byte of every TLS client's first flight.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Runs the TLS handshake when the listener has TLS, under `header_read_timeout`; `None`
/// when the connection is to be closed (timeout, failed handshake, plain HTTP).
async fn secure(stream: TcpStream, peer: SocketAddr, limits: &ServeLimits) -> Option<Conn> {
    // Best effort: a socket that refuses the option still works, just with Nagle.
    let _ = stream.set_nodelay(true);
    let Some(tls) = &limits.tls else {
        return Some(Conn::Plain(stream));
    };
    let deadline = tokio::time::Instant::now() + limits.header_read_timeout;
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
        Ok(Ok(1)) => {
            tokio::time::timeout_at(deadline, refuse_plaintext(stream))
                .await
                .ok();
            tracing::debug!(%peer, "plain HTTP on a TLS listener: refused");
            return None;
        }
        _ => return None,
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
    match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(Conn::Server(Box::new(stream))),
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// Answers a plain-HTTP client of a TLS listener with a readable 400 and closes.
async fn refuse_plaintext(mut stream: TcpStream) {
    // Read what the client sent first, so closing does not reset the answer away.
    let mut scratch = [0u8; 8192];
    let _ = stream.read(&mut scratch).await;
    let request_id = RequestId::generate();
    let body = crate::error::error_body(
        "tls_required",
        "this listener speaks HTTPS only: use an https:// URL".to_owned(),
        request_id.as_str(),
    );
    let mut answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
         cache-control: no-store\r\nx-request-id: {request_id}\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    if stream.write_all(&answer).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

async fn serve_connection<S, B>(
    stream: Conn,
    peer: SocketAddr,
    service: S,
    limits: &ServeLimits,
    mut stop: watch::Receiver<bool>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(HeadGuard::new(
        stream,
        Arc::clone(&activity),
        limits.max_header_bytes,
    ));
    let service = Tracked {
        inner: service,
        peer,
        activity: Arc::clone(&activity),
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .max_header_size(limits.max_header_bytes)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let idle = limits.keepalive_idle;
    let check_every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut closing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended");
                }
                break;
            }
            () = tokio::time::sleep(check_every), if !closing => {
                if activity.in_flight() == 0 && activity.quiet() >= idle {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
            _ = stop.wait_for(|stop| *stop), if !closing => {
                // Finish the request in flight, then close instead of keeping alive.
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When the connection last moved a byte, and how many requests it has in flight.
#[derive(Debug)]
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    fn quiet(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// The service of one connection: adds the [`Peer`] and counts requests in flight.
#[derive(Debug)]
struct Tracked<S> {
    inner: S,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.touch();
    }
}

impl<S> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(Peer(self.peer));
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        let guard = InFlight(Arc::clone(&self.activity));
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await;
            drop(guard);
            response
        })
    }
}

/// The connection's IO: records activity, and puts the JSON error body in place of
/// hyper's own empty 431 (see the module docs).
#[derive(Debug)]
struct HeadGuard {
    stream: Conn,
    activity: Arc<Activity>,
    max_header_bytes: usize,
    /// The replacement answer being written, and how much of it is out.
    replacing: Option<(Vec<u8>, usize, usize)>,
    /// After the replacement: the rest of the oversize head being read and dropped.
    linger: Option<Linger>,
}

/// A lingering close after the 431: the peer is usually still sending its head, and
/// closing a socket with unread data makes the kernel reset the connection, which can
/// destroy the answer before the peer reads it. So the write side is shut, and what the
/// peer still sends is read and dropped, up to [`LINGER_BYTES`] or [`LINGER_FOR`].
#[derive(Debug)]
struct Linger {
    until: Pin<Box<tokio::time::Sleep>>,
    drained: usize,
    write_shut: bool,
}

const LINGER_BYTES: usize = 2 * 1024 * 1024;
const LINGER_FOR: Duration = Duration::from_secs(1);

impl HeadGuard {
    fn new(stream: Conn, activity: Arc<Activity>, max_header_bytes: usize) -> Self {
        activity.touch();
        HeadGuard {
            stream,
            activity,
            max_header_bytes,
            replacing: None,
            linger: None,
        }
    }

    /// Whether the replacement 431 is out in full.
    fn replaced(&self) -> bool {
        self.replacing
            .as_ref()
            .is_some_and(|(answer, written, _)| *written >= answer.len())
    }

    /// Flushes, shuts the write side and drains the peer (see [`Linger`]).
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let linger = self.linger.get_or_insert_with(|| Linger {
            until: Box::pin(tokio::time::sleep(LINGER_FOR)),
            drained: 0,
            write_shut: false,
        });
        if !linger.write_shut {
            match Pin::new(&mut self.stream).poll_shutdown(cx) {
                Poll::Ready(_) => linger.write_shut = true,
                Poll::Pending => return Poll::Pending,
            }
        }
        let mut scratch = [0u8; 8192];
        loop {
            if linger.drained >= LINGER_BYTES || linger.until.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    linger.drained += buf.filled().len();
                }
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Whether `buf` is hyper's automatic, empty 431.
    fn is_automatic_431(buf: &[u8]) -> bool {
        let head = &buf[..buf.len().min(512)];
        let starts = head.starts_with(b"HTTP/1.1 431 ") || head.starts_with(b"HTTP/1.0 431 ");
        starts
            && head
                .windows(b"content-length: 0\r\n".len())
                .any(|w| w.eq_ignore_ascii_case(b"content-length: 0\r\n"))
    }

    fn json_431(&self) -> Vec<u8> {
        let request_id = RequestId::generate();
        let body = crate::error::error_body(
            crate::Code::HEADERS_TOO_LARGE.name,
            format!(
                "the request head is over the {}-byte limit",
                self.max_header_bytes
            ),
            request_id.as_str(),
        );
        let mut out = format!(
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n\
             cache-control: no-store\r\nx-request-id: {request_id}\r\nconnection: close\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    }
}

impl AsyncRead for HeadGuard {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for HeadGuard {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacing.is_none() && Self::is_automatic_431(buf) {
            this.replacing = Some((this.json_431(), 0, buf.len()));
        }
        if let Some((answer, written, claimed)) = &mut this.replacing {
            while *written < answer.len() {
                match Pin::new(&mut this.stream).poll_write(cx, &answer[*written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *written += n,
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            // hyper's answer counts as written; anything after it goes nowhere (hyper
            // closes the connection after this answer).
            let claimed = std::mem::take(claimed);
            return Poll::Ready(Ok(if claimed > 0 { claimed } else { buf.len() }));
        }
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replaced() {
            return this.poll_linger(cx);
        }
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replaced() {
            return this.poll_linger(cx);
        }
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }

    // Not vectored, so hyper flattens each answer's head into one buffer and the 431 is
    // seen whole by `poll_write`.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_431_is_replaced() {
        let automatic =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert!(HeadGuard::is_automatic_431(automatic));
        assert!(!HeadGuard::is_automatic_431(
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(!HeadGuard::is_automatic_431(
            b"HTTP/1.1 431 X\r\ncontent-length: 10\r\n\r\n0123456789"
        ));
    }
}
