//! Relaying a tunnel whose upstream side is not a bare socket (TLS to an `https` proxy).
//!
//! [`crate::outbound::tunnel`] waits on socket readiness with no buffer, which needs the
//! socket itself; a TLS stream decrypts into buffers of its own, so here each direction
//! is a plain copy with a buffer (`copy_bidirectional`: half-close passed on, both
//! directions at once in one task). The same ends apply: both directions done, an error,
//! `idle` with no byte moved either way, or `stop` completing, with the bytes moved so
//! far counted. A peer that stopped reading shows as no progress, so it ends the tunnel
//! after `idle` unless the other direction keeps moving.

use crate::outbound::tunnel::Relayed;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Buffer of each direction.
const BUFFER: usize = 16 * 1024;

/// What both sides' meters share: bytes read from each side, and when a byte last moved
/// (milliseconds since the relay started).
#[derive(Debug, Default)]
struct Progress {
    from_client: AtomicU64,
    from_upstream: AtomicU64,
    moved_at_ms: AtomicU64,
}

/// Relays until both directions ended, an error, `idle` without a byte moved, or `stop`
/// completing (its output is returned then).
pub(crate) async fn relay<C, U, S>(
    client: C,
    upstream: U,
    idle: Duration,
    stop: S,
) -> (Relayed, Option<S::Output>)
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
    S: Future,
{
    let started = Instant::now();
    let progress = Arc::new(Progress::default());
    let mut client = Metered::new(client, started, &progress, Side::Client);
    let mut upstream = Metered::new(upstream, started, &progress, Side::Upstream);
    let copying =
        tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, BUFFER, BUFFER);
    let idled = async {
        loop {
            let moved_at =
                started + Duration::from_millis(progress.moved_at_ms.load(Ordering::Relaxed));
            let deadline = moved_at + idle;
            if deadline <= Instant::now() {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    let stopped = tokio::select! {
        output = stop => Some(output),
        _ = copying => None,
        () = idled => None,
    };
    let relayed = Relayed {
        up: progress.from_client.load(Ordering::Relaxed),
        down: progress.from_upstream.load(Ordering::Relaxed),
    };
    (relayed, stopped)
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Client,
    Upstream,
}

/// A side of the tunnel that counts what is read from it and notes when bytes move.
struct Metered<S> {
    inner: S,
    started: Instant,
    progress: Arc<Progress>,
    side: Side,
}

impl<S> Metered<S> {
    fn new(inner: S, started: Instant, progress: &Arc<Progress>, side: Side) -> Self {
        Metered {
            inner,
            started,
            progress: Arc::clone(progress),
            side,
        }
    }

    fn moved(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.progress.moved_at_ms.fetch_max(ms, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        if read > 0 {
            let count = match this.side {
                Side::Client => &this.progress.from_client,
                Side::Upstream => &this.progress.from_upstream,
            };
            count.fetch_add(read, Ordering::Relaxed);
            this.moved();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.moved();
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    #[tokio::test(start_paused = true)]
    async fn relays_both_ways_counts_and_ends_when_idle() {
        let (client, mut client_peer) = duplex(1024);
        let (upstream, mut upstream_peer) = duplex(1024);
        let relaying = tokio::spawn(relay(
            client,
            upstream,
            Duration::from_secs(5),
            std::future::pending::<()>(),
        ));
        client_peer.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 5];
        upstream_peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello");
        upstream_peer.write_all(b"hi").await.unwrap();
        let mut got = [0u8; 2];
        client_peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hi");
        // Nothing moves from here: the relay ends after the idle limit, not before.
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(!relaying.is_finished());
        let (relayed, stopped) = relaying.await.unwrap();
        assert_eq!((relayed.up, relayed.down), (5, 2));
        assert!(stopped.is_none());
    }

    #[tokio::test]
    async fn stop_ends_it_with_the_bytes_so_far() {
        let (client, mut client_peer) = duplex(1024);
        let (upstream, mut upstream_peer) = duplex(1024);
        let (tell, stop) = tokio::sync::oneshot::channel::<&str>();
        let relaying = tokio::spawn(relay(client, upstream, Duration::from_secs(60), stop));
        client_peer.write_all(b"abc").await.unwrap();
        let mut got = [0u8; 3];
        upstream_peer.read_exact(&mut got).await.unwrap();
        tell.send("cut").unwrap();
        let (relayed, stopped) = relaying.await.unwrap();
        assert_eq!(relayed.up, 3);
        assert_eq!(stopped, Some(Ok("cut")));
    }
}
