//! [`HeadGuard`]: the connection's IO, which records activity (and tells the gate that a
//! kept-alive connection began its next head, so it is not closed to make room) and writes
//! the JSON 431 in place of hyper's own empty one, then closes with a bounded linger (see
//! the `serve` module docs for why).

use super::activity::Activity;
use crate::gate::ConnectionMark;
use crate::request_id::RequestId;
use crate::tls::Conn;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The connection's IO: records activity, and puts the JSON error body in place of
/// hyper's own empty 431 (see the module docs).
#[derive(Debug)]
pub(super) struct HeadGuard {
    stream: Conn,
    activity: Arc<Activity>,
    /// Told of every byte read: between requests the first one starts a head.
    mark: Arc<ConnectionMark>,
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
    pub(super) fn new(
        stream: Conn,
        activity: Arc<Activity>,
        mark: Arc<ConnectionMark>,
        max_header_bytes: usize,
    ) -> Self {
        activity.touch();
        HeadGuard {
            stream,
            activity,
            mark,
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
            this.mark.busy();
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
