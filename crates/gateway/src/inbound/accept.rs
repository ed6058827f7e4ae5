//! The one accept loop of the client listeners (HTTP and SOCKS5): admission at accept,
//! before a byte is read.
//!
//! Order per accepted socket: the per-IP cap (`limits.max_connections_per_ip`, over all
//! client listeners; IPv6 per `limits.ipv6_prefix` network) → the per-IP shield's verdict
//! for the connection → the global connection cap (`limits.max_connections`). Over the
//! per-IP cap the socket is closed at once. At the global cap the oldest connection that
//! has sent nothing yet (else the one idle longest between complete HTTP requests, no
//! byte of a next head read) is closed to admit the new one, so idle sockets from many
//! addresses cannot lock out a client that sends a request. A connection that has begun
//! to speak (a SOCKS5 handshake or an HTTP head under way, the first or a kept-alive
//! one's next), has a request in flight or a tunnel is never chosen, so a flood from a
//! few addresses cannot reset a slow legitimate handshake (the header timeout bounds it);
//! only when every one is busy is the newcomer refused. The per-IP cap comes
//! first, so an address at its cap never touches the global count and one address cannot
//! hold every global slot. Then the connection must send its first byte within
//! `limits.first_byte_timeout`. The shield's verdict is charged
//! here (one token per connection) and handed to the listener, which delivers a denial in
//! its protocol: a 429 to the connection's first HTTP request (later requests are charged
//! one by one), the SOCKS5 reply after the request is read.
//!
//! A connection from a trusted load balancer (`trusted_proxies`) first reads its PROXY
//! protocol header (within the header-read timeout, on its own task so a slow balancer
//! holds up nobody) and is then admitted as the client the header names; without a valid
//! header it is closed. From anyone else a PROXY header is just bytes the listener
//! refuses as malformed.

use crate::context::Phase;
use crate::metrics::Listener;
use crate::policy::limits::Shield;
use crate::refusal::Refusal;
use crate::state::Shared;
use proxypool_edge::Admitted;
use proxypool_proto::proxy_protocol::ProxiedFrom;
use proxypool_throttle::ConnectionScopes;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// The shield as it was when the connection was accepted.
#[derive(Debug)]
pub(crate) struct ShieldAtAccept {
    /// The shield and the connection's scopes in it; `None` when the shield is off.
    pub shield: Option<(Arc<Shield>, ConnectionScopes)>,
    /// The verdict charged at accept for the connection (its first request).
    pub verdict: Result<(), Refusal>,
}

/// An accepted connection, admitted.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// Its per-IP and global slots; a CONNECT or SOCKS5 tunnel takes them along, so a
    /// tunnel counts against its address too.
    pub admitted: Admitted,
    pub shield: ShieldAtAccept,
}

/// Accepts on `listener` until the gateway starts draining; each admitted connection is
/// served by `serve` on its own task.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    shared: Arc<Shared>,
    kind: Listener,
    serve: F,
) where
    F: Fn(Arc<Shared>, Accepted) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let phase = shared.phase.clone();
    accept_sockets(listener, phase, &kind, |stream, peer| {
        if trusted(&shared, peer) {
            let shared = Arc::clone(&shared);
            let serve = serve.clone();
            tokio::spawn(async move {
                let Some((stream, client)) = unwrap_proxy_header(&shared, stream, peer).await
                else {
                    return;
                };
                if let Some(accepted) = admit(&shared, stream, client) {
                    run(shared, accepted, kind, serve).await;
                }
            });
            return;
        }
        let Some(accepted) = admit(&shared, stream, peer) else {
            return;
        };
        tokio::spawn(run(Arc::clone(&shared), accepted, kind, serve.clone()));
    })
    .await;
}

/// Accepts sockets on `listener` until the gateway leaves [`Phase::Running`], handing each
/// to `take` (which admits it and spawns its task, or drops it, which closes it). Shared by
/// the client listeners and the fleet listener.
pub(crate) async fn accept_sockets(
    listener: TcpListener,
    mut phase: tokio::sync::watch::Receiver<Phase>,
    label: &(dyn std::fmt::Debug + Sync),
    mut take: impl FnMut(TcpStream, SocketAddr),
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = phase.wait_for(|p| *p != Phase::Running) => break,
        };
        match accepted {
            Ok((stream, peer)) => take(stream, peer),
            Err(error) => {
                // Out of descriptors and similar: back off instead of spinning.
                tracing::warn!(%error, listener = ?label, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Whether an admitted connection sent its first byte within the first-byte deadline
/// (never longer than the head's), and was not chosen to make room nor met a drain
/// meanwhile. When it did, it is marked busy: its handshake or head is never cut to make
/// room from here on (the header timeout bounds it).
pub(crate) async fn first_byte(shared: &Shared, stream: &TcpStream, admitted: &Admitted) -> bool {
    let limits = &shared.config().limits;
    // Never longer than the whole head's deadline, whatever a hand-built setting says.
    let deadline = limits
        .first_byte_deadline()
        .as_duration()
        .min(limits.header_read_timeout.as_duration());
    let mut first = [0u8; 1];
    let mut phase = shared.phase.clone();
    let spoke = tokio::select! {
        peeked = tokio::time::timeout(deadline, stream.peek(&mut first)) => {
            matches!(peeked, Ok(Ok(1)))
        }
        () = admitted.mark().evicted() => false,
        // Nothing in flight yet: a drain closes it at once.
        _ = phase.wait_for(|p| *p != Phase::Running) => false,
    };
    if spoke {
        admitted.mark().busy();
    }
    spoke
}

/// One admitted connection: its first byte within the deadline (cut short if the cap
/// chooses the silent connection to make room), then the listener's `serve`.
async fn run<F, Fut>(shared: Arc<Shared>, accepted: Accepted, kind: Listener, serve: F)
where
    F: Fn(Arc<Shared>, Accepted) -> Fut,
    Fut: Future<Output = ()>,
{
    if !first_byte(&shared, &accepted.stream, &accepted.admitted).await {
        tracing::debug!(peer = %accepted.peer, "no first byte in time, closed to make room, or draining");
        return;
    }
    shared.metrics.connection_opened(kind);
    serve(Arc::clone(&shared), accepted).await;
    shared.metrics.connection_closed(kind);
}

/// Whether `peer` is one of the load balancers that speak the PROXY protocol.
fn trusted(shared: &Shared, peer: SocketAddr) -> bool {
    proxypool_core::in_any_block(peer.ip(), &shared.config().trusted_proxies)
}

/// Reads a trusted balancer's PROXY header; the stream (at the client's first byte) and
/// the client's address, or `None` when the header is missing, malformed or late.
async fn unwrap_proxy_header(
    shared: &Shared,
    mut stream: TcpStream,
    peer: SocketAddr,
) -> Option<(TcpStream, SocketAddr)> {
    let read = proxypool_proto::proxy_protocol::read_header(&mut stream);
    match proxypool_proto::with_timeout(shared.header_timeout(), read).await {
        Ok(ProxiedFrom::Client(client)) => Some((stream, client)),
        // The balancer's own connection (a health check): it is the client.
        Ok(ProxiedFrom::Local) => Some((stream, peer)),
        Err(error) => {
            tracing::debug!(%peer, %error, "no valid PROXY header from a trusted balancer");
            shared.metrics.rejected_proxy_header.increment(1);
            None
        }
    }
}

/// Per-IP cap, shield, global cap; `None` = refused (the socket is dropped, so closed).
fn admit(shared: &Shared, stream: TcpStream, peer: SocketAddr) -> Option<Accepted> {
    let Some(ticket) = shared.per_ip.try_open(peer.ip()) else {
        shared.metrics.rejected_per_ip_cap.increment(1);
        return None;
    };
    let shield = match shared.shield.load_full() {
        Some(shield) => {
            let mut scopes = shield.connection(peer.ip());
            let verdict = shield.check(&mut scopes).inspect_err(|_| {
                shared.metrics.shield_denials.increment(1);
            });
            ShieldAtAccept {
                shield: Some((shield, scopes)),
                verdict,
            }
        }
        None => ShieldAtAccept {
            shield: None,
            verdict: Ok(()),
        },
    };
    let Some(connection) = shared.connections.admit() else {
        shared.metrics.rejected_connection_cap.increment(1);
        return None;
    };
    let admitted = Admitted::new(Some(ticket), connection);
    if admitted.made_room() {
        shared.metrics.connections_evicted.increment(1);
    }
    Some(Accepted {
        stream,
        peer,
        admitted,
        shield,
    })
}
