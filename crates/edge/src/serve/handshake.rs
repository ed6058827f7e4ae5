//! Between accept and HTTP: the first byte within its deadline, a trusted balancer's PROXY
//! header, then the TLS handshake (or a readable refusal for plain HTTP on a TLS listener),
//! both under the head timeout.

use super::limits::ServeLimits;
use crate::request_id::RequestId;
use crate::tls::Conn;
use proxypool_proto::proxy_protocol::ProxiedFrom;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Whether the peer sent a byte within `limits.first_byte_timeout`: a socket opened and
/// left silent holds a slot for no request, so it gets a deadline much shorter than the
/// whole head's.
pub(super) async fn first_byte(stream: &TcpStream, limits: &ServeLimits) -> bool {
    let mut first = [0u8; 1];
    matches!(
        tokio::time::timeout(
            // Never longer than the whole head's deadline, whatever the caller set.
            limits.first_byte_timeout.min(limits.header_read_timeout),
            stream.peek(&mut first)
        )
        .await,
        Ok(Ok(1))
    )
}

/// Reads a balancer's PROXY header: the stream at the client's first byte and the
/// client's address (the balancer's own for a `LOCAL`/`UNKNOWN` header), or `None`.
pub(super) async fn unwrap_proxy_header(
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
pub(super) async fn secure(
    stream: TcpStream,
    peer: SocketAddr,
    limits: &ServeLimits,
) -> Option<Conn> {
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
