//! [`Heard`]: a stream to an upstream proxy that notes whether the proxy sent any byte,
//! so a handshake timeout can tell a silent proxy (its fault) from one that answered and
//! is still reaching the target (the target's; [`crate::failure`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Passes everything through; sets `answered` once a read brings a byte.
#[derive(Debug)]
pub(crate) struct Heard<'s, S> {
    stream: &'s mut S,
    answered: &'s mut bool,
}

impl<'s, S> Heard<'s, S> {
    pub(crate) fn new(stream: &'s mut S, answered: &'s mut bool) -> Self {
        Self { stream, answered }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Heard<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut *this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            *this.answered = true;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Heard<'_, S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().stream).poll_shutdown(cx)
    }
}
