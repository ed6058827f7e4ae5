//! An HTTP upstream's `CONNECT` answer read in two system calls instead of one per few
//! bytes.
//!
//! The head reader of `proxypool-proto` must not read past the blank line (the tunnel's
//! first bytes may arrive in the same segment), so from a plain stream it reads at most
//! the four bytes a terminator could still need: about ten reads for a typical 40-byte
//! `200 Connection established`, each a `recvfrom` and a trip through the runtime. Over
//! [`PeekedHead`] the first read peeks at what the socket holds, then takes exactly the
//! bytes up to and including the blank line (or everything peeked, when the head is not
//! complete yet) and serves the reader from memory; only what is still missing comes from
//! the socket, in the reader's careful steps. The stream ends positioned exactly as before.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The end of an HTTP head.
const TERMINATOR: &[u8] = b"\r\n\r\n";

/// A response head of a `CONNECT` fits here many times over; a longer one is still read,
/// in the careful steps.
const PEEK_BYTES: usize = 1024;

/// A stream to an upstream proxy whose first read takes the response head at once.
#[derive(Debug)]
pub(crate) struct PeekedHead<'s> {
    stream: &'s mut TcpStream,
    /// Bytes taken off the socket and not yet handed to the reader (`taken[served..]`).
    taken: Vec<u8>,
    served: usize,
    peeked: bool,
}

impl<'s> PeekedHead<'s> {
    pub(crate) fn new(stream: &'s mut TcpStream) -> Self {
        Self {
            stream,
            taken: Vec::new(),
            served: 0,
            peeked: false,
        }
    }

    /// Peeks once, then takes off the socket the head if it is all there (never a byte
    /// past it), else everything seen (none of which can be past the head).
    fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut seen = [0u8; PEEK_BYTES];
        let mut peek = ReadBuf::new(&mut seen);
        ready!(self.stream.poll_peek(cx, &mut peek))?;
        self.peeked = true;
        let seen = peek.filled();
        let take = seen
            .windows(TERMINATOR.len())
            .position(|window| window == TERMINATOR)
            .map_or(seen.len(), |at| at + TERMINATOR.len());
        if take > 0 {
            self.taken = vec![0; take];
            // The bytes were just peeked, so they are there to take.
            let read = self.stream.try_read(&mut self.taken)?;
            self.taken.truncate(read);
            self.served = 0;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for PeekedHead<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.peeked {
            ready!(this.poll_take(cx))?;
        }
        let left = &this.taken[this.served..];
        if !left.is_empty() {
            let give = left.len().min(buf.remaining());
            buf.put_slice(&left[..give]);
            this.served += give;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut *this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeekedHead<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_proto::http_connect;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A proxy that answers the CONNECT in the given pieces (with a pause between them),
    /// then closes; what the client got and what it could read after the head.
    async fn connect_through(pieces: &'static [&'static [u8]]) -> (Result<(), String>, Vec<u8>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 512];
            let _ = socket.read(&mut request).await.unwrap();
            for piece in pieces {
                socket.write_all(piece).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        });
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let result =
            http_connect::connect(&mut PeekedHead::new(&mut stream), "example.com:443", None)
                .await
                .map_err(|error| error.to_string());
        proxy.await.unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        (result, rest)
    }

    #[tokio::test]
    async fn stops_at_the_blank_line_when_the_tunnel_speaks_in_the_same_segment() {
        let (result, rest) =
            connect_through(&[b"HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-x\r\n"]).await;
        assert_eq!(result, Ok(()));
        assert_eq!(rest, b"SSH-2.0-x\r\n");
    }

    #[tokio::test]
    async fn a_head_in_pieces_is_read_to_its_end_and_no_further() {
        let (result, rest) = connect_through(&[
            b"HTTP/1.1 200 Connection",
            b" established\r\n\r",
            b"\nfirst tunnel bytes",
        ])
        .await;
        assert_eq!(result, Ok(()));
        assert_eq!(rest, b"first tunnel bytes");
    }

    #[tokio::test]
    async fn a_refusal_and_a_closed_connection_are_errors() {
        let (result, _) =
            connect_through(&[b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"]).await;
        assert!(result.unwrap_err().contains("407"));
        let (result, _) = connect_through(&[b"HTTP/1.1 200 OK\r\n"]).await;
        assert!(result.is_err());
    }
}
