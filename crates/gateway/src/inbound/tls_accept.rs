//! The TLS client listener (`listeners.https`): the HTTP proxy protocol of
//! [`crate::inbound::http`] inside TLS, so credentials and targets do not cross the
//! network in clear (`curl --proxy https://...`).
//!
//! Admission is the plain listener's ([`crate::inbound::accept`]: per-IP cap, shield,
//! global cap, first-byte deadline, PROXY protocol from trusted balancers). After the
//! first byte the handshake must complete within the header-read timeout, so a client
//! that stalls it holds its per-IP and global slots no longer than one that stalls a
//! request head; a handshake that fails, times out or turns out to be plain HTTP is
//! closed and counted (`tls_handshake_failures_total{reason}`). A plain-HTTP client gets a
//! readable 400 first. ALPN offers `http/1.1` only.
//!
//! The certificate comes from `[gateway.tls]` and is polled: a renewed file is served to
//! new connections, open ones keep theirs. With `client_ca` the handshake requires a
//! client certificate chaining to it, and its names may identify a client
//! ([`crate::inbound::client_cert`]).

use crate::config::{ConfigError, GatewayConfig};
use crate::context::Phase;
use crate::inbound::accept::{Accepted, accept_loop};
use crate::inbound::client_cert::ClientCertificate;
use crate::inbound::http;
use crate::metrics::{HandshakeFailure, Listener};
use crate::state::Shared;
use proxypool_edge::{ServerTls, ServerTlsFiles};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The first byte of a TLS handshake record.
const HANDSHAKE_RECORD: u8 = 0x16;

/// Loads the listener's certificate files (`None` without `[gateway.tls]`).
pub(crate) fn load(config: &GatewayConfig) -> Result<Option<ServerTls>, ConfigError> {
    let Some(tls) = &config.tls else {
        return Ok(None);
    };
    let files = ServerTlsFiles {
        cert: tls.cert.clone(),
        key: tls.key.clone(),
        client_ca: tls.client_ca.clone(),
    };
    ServerTls::load_polling(files, tls.poll_interval.as_duration())
        .map(Some)
        .map_err(|error| ConfigError(format!("tls: {error}")))
}

/// Looks at the certificate files every poll interval while the gateway runs; a changed
/// set that loads is served to new connections, one that does not is logged and the
/// running certificate stays.
pub(crate) async fn watch_files(shared: Arc<Shared>) {
    let Some(tls) = shared.client_tls.clone() else {
        return;
    };
    let every = shared
        .config()
        .tls
        .as_ref()
        .map_or(proxypool_edge::tls::DEFAULT_POLL, |t| {
            t.poll_interval.as_duration()
        });
    let mut phase = shared.phase.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = phase.wait_for(|p| *p == Phase::Stopped) => return,
        }
        match tls.reload_if_changed() {
            Ok(true) => tracing::info!(
                cert = %tls.files().cert.display(),
                "the TLS listener's certificate files changed: new connections get the new ones"
            ),
            Ok(false) => {}
            Err(error) => tracing::warn!(
                %error,
                "the TLS listener's certificate files changed but cannot be loaded; still serving the previous ones"
            ),
        }
    }
}

/// Accepts TLS proxy connections until the gateway starts draining.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    accept_loop(
        listener,
        shared,
        Listener::Https,
        |shared, accepted| async move {
            let Accepted {
                stream,
                peer,
                admitted,
                shield,
            } = accepted;
            let _ = stream.set_nodelay(true);
            let Some((stream, certificate)) = handshake(&shared, stream, peer).await else {
                return;
            };
            http::serve_connection(&shared, stream, peer, admitted, shield, certificate, None)
                .await;
        },
    )
    .await;
}

/// The handshake under the header-read timeout; the TLS stream and the client
/// certificate's identity, or `None` (closed, counted).
async fn handshake(
    shared: &Shared,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, Option<ClientCertificate>)> {
    let tls = shared.client_tls.as_ref()?;
    let deadline = tokio::time::Instant::now() + shared.header_timeout();
    let mut first = [0u8; 1];
    // The accept loop saw a first byte: this peek returns at once.
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == HANDSHAKE_RECORD => {}
        Ok(Ok(1)) => {
            shared
                .metrics
                .tls_handshake_failed(HandshakeFailure::Plaintext);
            tracing::debug!(%peer, "plain HTTP on the TLS listener: refused");
            let _ = tokio::time::timeout_at(deadline, refuse_plaintext(stream)).await;
            return None;
        }
        _ => return None,
    }
    let acceptor = TlsAcceptor::from(tls.current());
    match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => {
            let certificate = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(ClientCertificate::of);
            Some((stream, certificate))
        }
        Ok(Err(error)) => {
            shared.metrics.tls_handshake_failed(HandshakeFailure::Error);
            tracing::debug!(%peer, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            shared
                .metrics
                .tls_handshake_failed(HandshakeFailure::Timeout);
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// Answers a plain-HTTP client of the TLS listener with a readable 400 and closes.
async fn refuse_plaintext(mut stream: TcpStream) {
    // Read what the client sent first, so closing does not reset the answer away.
    let mut scratch = [0u8; 4096];
    let _ = stream.read(&mut scratch).await;
    let body = "this listener speaks TLS only: use an https:// proxy URL\n";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\n{}: tls_required\r\ncontent-type: text/plain; charset=utf-8\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        crate::refusal::ERROR_HEADER,
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}
