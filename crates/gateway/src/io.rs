//! [`ActivityIo`]: a client stream that remembers when it last moved a byte, so the
//! connection's watchdog can close kept-alive connections that sit idle, and tells the
//! connection cap of every byte read (between requests the first one starts a head, and a
//! connection reading a head is not closed to make room).
//!
//! Generic over the stream (a socket on the plain listener, a TLS stream on the TLS one):
//! each listener gets its own monomorphic copy, so the plain path pays no indirection.

use proxypool_core::SharedClock;
use proxypool_edge::ConnectionMark;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A stream that stamps the monotonic time of its last read or write.
#[derive(Debug)]
pub(crate) struct ActivityIo<S = TcpStream> {
    stream: S,
    last: Arc<AtomicU64>,
    clock: SharedClock,
    mark: Arc<ConnectionMark>,
}

impl<S> ActivityIo<S> {
    /// Stamps `last` with `clock`'s monotonic milliseconds and tells `mark` of reads.
    pub(crate) fn new(
        stream: S,
        last: Arc<AtomicU64>,
        clock: SharedClock,
        mark: Arc<ConnectionMark>,
    ) -> Self {
        last.store(clock.monotonic_ms(), Ordering::Relaxed);
        Self {
            stream,
            last,
            clock,
            mark,
        }
    }

    pub(crate) fn into_inner(self) -> S {
        self.stream
    }

    fn touch(&self) {
        self.last
            .store(self.clock.monotonic_ms(), Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ActivityIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.touch();
            this.mark.busy();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ActivityIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        result
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
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
