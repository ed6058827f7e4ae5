//! Serving the router with a cap on open connections.
//!
//! axum's `serve` accepts every connection it is offered. [`serve`] wraps the listener so
//! that an accept first takes a permit (held by the connection until it closes): at the cap
//! the server simply stops accepting and further peers wait in the kernel's backlog, which
//! costs the server nothing. Accepted sockets get `TCP_NODELAY` (small JSON answers on
//! kept-alive connections must not wait for Nagle), and the peer address is passed on as
//! `ConnectInfo<SocketAddr>`, which the shield keys on.

use axum::Router;
use axum::serve::{Listener, ListenerExt};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Serves `router` on `listener` with at most `max_connections` open connections until
/// `shutdown` completes (then in-flight requests finish).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let listener = CappedListener {
        inner: listener,
        permits: Arc::new(Semaphore::new(max_connections.max(1))),
    }
    .tap_io(|stream| {
        // Best effort: a socket that refuses the option still works, just with Nagle.
        let _ = stream.stream.set_nodelay(true);
    });
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// A TCP listener that accepts only while it has connection permits.
#[derive(Debug)]
struct CappedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl Listener for CappedListener {
    type Io = CappedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // The semaphore is never closed, so acquiring only waits.
        let permit = loop {
            if let Ok(permit) = self.permits.clone().acquire_owned().await {
                break permit;
            }
        };
        let (stream, addr) = Listener::accept(&mut self.inner).await;
        (
            CappedStream {
                stream,
                _permit: permit,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection holding its permit until it is dropped.
#[derive(Debug)]
struct CappedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for CappedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CappedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
