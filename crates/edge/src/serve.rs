//! [`serve`]: the one server scaffold of every HTTP listener of proxypool that is not the
//! gateway's proxy listener (the client API, the worker control API, the gateway's admin
//! listener).
//!
//! Per connection, in this order:
//!
//! 1. **Admission at accept**, before a byte is read ([`ConnectionGate`]): the peer's
//!    address (IPv6: its `ipv6_prefix` network) must be under `max_connections_per_ip`,
//!    then the listener under `max_connections`. At the global cap the oldest connection
//!    that has sent nothing yet (else the one idle longest between complete requests, no
//!    byte of a next head read) is closed to make room, so idle sockets from many
//!    addresses cannot lock out a client that sends a request. A connection that has
//!    begun to speak (its TLS handshake or a head under way, a request in flight) is never
//!    chosen, so a flood cannot reset a slow legitimate handshake; only when every
//!    connection is speaking or busy is the newcomer refused.
//!    Over the per-address cap the socket is closed at once. Balancers listed in
//!    `uncounted_per_ip` carry many clients, so they count against the global cap only.
//! 2. **First byte** within `first_byte_timeout`, much shorter than the head's deadline:
//!    a socket opened and left silent is closed.
//! 3. **TLS**, when the listener has a [`ServerTls`](crate::ServerTls): the handshake
//!    runs after admission (so a slow handshake holds a capped slot, never an uncapped
//!    one) and must finish within `header_read_timeout`, so a client cannot hold its slot
//!    by trickling a handshake. A client that speaks plain HTTP to a TLS listener gets a
//!    plain `400` in the JSON error shape (`tls_required`) and is closed, instead of a
//!    handshake error it cannot read. Each handshake takes the configuration current at
//!    that moment, so a certificate replaced on disk (the files are polled while the
//!    listener serves) is served to new connections and open ones keep theirs.
//! 4. **hyper HTTP/1.1 with a timer**: the request head must arrive within
//!    `header_read_timeout` (hyper's timer runs from the moment the connection waits for a
//!    head, so it also bounds a kept-alive connection's wait for its next request and cuts
//!    off a client that trickles its head a byte at a time); a kept-alive connection with
//!    no traffic and no request in flight is closed after `keepalive_idle` (so in effect a
//!    kept-alive connection waits at most the smaller of the two for its next request).
//! 5. **Head size**: hyper refuses a head over `max_header_bytes` (its read buffer is
//!    capped at that size, at least hyper's minimum of 8192) and answers 431 itself, with
//!    an empty body. hyper offers no hook for that answer, so the connection's IO writes
//!    the JSON error body in its place: `HeadGuard` (`head_guard`) recognises hyper's own empty 431 (the
//!    only 431 these servers send; the services never answer 431) as it is written and
//!    sends `{"error":{"code":"headers_too_large",...},"request_id":"..."}` with
//!    `Connection: close` instead, then closes with a short, bounded linger (it reads and
//!    drops what the peer is still sending), so the kernel does not reset the connection
//!    under the answer. Rejected alternatives: counting head bytes in a
//!    pre-read layer needs an HTTP/1 parser of its own to find where the next head starts
//!    after a body, and checking the size in the service only works below hyper's cap.
//! 6. **Graceful shutdown**: when `shutdown` completes the listener stops accepting, every
//!    connection finishes the request in flight and closes, and `serve` returns when the
//!    last one is gone (the caller bounds that wait).
//!
//! Every request carries its connection's peer address as a [`Peer`] extension.
//!
//! Module map: this file is the accept loop (admission at accept, graceful drain);
//! `limits` ([`ServeLimits`], [`MIN_HEADER_BYTES`]), `handshake` (the first byte, the PROXY
//! header and the TLS handshake between accept and HTTP), `connection` (hyper on one connection, the
//! idle watchdog, [`Peer`] on every request), `activity` (a connection's last byte and
//! requests in flight), `head_guard` (the JSON 431 in place of hyper's empty one).

mod activity;
mod connection;
mod handshake;
mod head_guard;
mod limits;

pub use connection::Peer;
pub use limits::{MIN_HEADER_BYTES, ServeLimits};

use crate::gate::{Admitted, ConnectionGate, Refused};
use bytes::Bytes;
use connection::serve_connection;
use handshake::{first_byte, secure, unwrap_proxy_header};
use http::{Request, Response};
use hyper::body::Incoming;
use proxypool_core::in_any_block;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

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
        limits.ipv6_prefix,
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
        let (service, limits) = (service.clone(), Arc::clone(&limits));
        let (stop, open) = (stop_rx.clone(), open_tx.clone());
        if in_any_block(peer.ip(), &limits.proxy_protocol_from) {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                if !first_byte(&stream, &limits).await {
                    return;
                }
                let Some((stream, client)) = unwrap_proxy_header(stream, peer, &limits).await
                else {
                    return;
                };
                let Ok(admitted) = gate.admit(client.ip()) else {
                    tracing::debug!(%client, "connection refused at accept (behind a balancer)");
                    return;
                };
                run_connection(stream, client, admitted, service, &limits, stop).await;
                drop(open);
            });
            continue;
        }
        let admitted = if in_any_block(peer.ip(), &limits.uncounted_per_ip) {
            gate.admit_uncounted()
        } else {
            gate.admit(peer.ip())
        };
        let admitted = match admitted {
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
        tokio::spawn(async move {
            run_connection(stream, peer, admitted, service, &limits, stop).await;
            drop(open);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_tx);
    let _ = open_rx.recv().await;
    Ok(())
}

/// One admitted connection from its first byte to its close: the first-byte deadline (cut
/// short if the gate chooses the silent connection to make room) and the TLS handshake,
/// then HTTP. The connection's slots are freed when it returns.
async fn run_connection<S, B>(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    admitted: Admitted,
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
    let mark = Arc::clone(admitted.mark());
    let opening = async {
        if !first_byte(&stream, limits).await {
            tracing::debug!(%peer, "no first byte in time: closed");
            return None;
        }
        // It began to speak: from here its TLS handshake and its head are never cut to
        // make room (the head deadline bounds them).
        mark.busy();
        secure(stream, peer, limits).await
    };
    let stream = tokio::select! {
        stream = opening => stream,
        () = mark.evicted() => {
            tracing::debug!(%peer, "closed to make room for a new connection");
            None
        }
        // Nothing in flight yet: shutting down closes it at once.
        _ = stop.wait_for(|stop| *stop) => None,
    };
    if let Some(stream) = stream {
        serve_connection(stream, peer, service, limits, stop, mark).await;
    }
    drop(admitted);
}
