//! A tunnel's life after its upstream is up (HTTP `CONNECT` and SOCKS5 alike): the bytes
//! relayed both ways ([`crate::outbound::tunnel`]) until either side ends, it idles, the
//! gateway stops, a reload removes its client (after a shutdown grace), or the gateway no
//! longer holds the proxy's lease; then its bytes are counted.

use crate::access::Exchange;
use crate::context::{GatewayContext, Phase};
use crate::outbound::{stream_tunnel, tunnel};
use crate::proxies::capacity::Lease;
use crate::proxies::cutoff::CutReason;
use crate::usage::UsageCell;
use proxypool_edge::Conn;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The client's side of a tunnel: a bare socket (relayed without buffers when the
/// upstream is one too), or any other stream (a client of the TLS listener), relayed with
/// buffers by [`stream_tunnel`].
pub(crate) enum ClientSide {
    Socket(TcpStream),
    Stream(Box<dyn ClientStream>),
}

/// A client stream other than a bare socket.
pub(crate) trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> ClientStream for T {}

/// Why a tunnel was ended from outside.
enum Ended {
    Stopped,
    ClientRemoved,
    Cut(CutReason),
}

/// Whose tunnel it is and where it is accounted: the client, its usage cell, the lease on
/// the proxy it goes through, and the request's account.
pub(crate) struct TunnelAccount<'a> {
    pub client_id: &'a str,
    pub usage: &'a UsageCell,
    pub lease: &'a Lease,
    pub exchange: &'a mut Exchange,
}

/// Relays a tunnel of `client_id` through the proxy of `lease`, sending bytes the client
/// sent early (with its CONNECT) first. The tunnel ends when either side does, when it
/// idles, when the gateway stops, a shutdown grace after a configuration reload removed its
/// client, or as soon as the gateway no longer holds the proxy's lease ([`crate::proxies::cutoff`]).
/// The tunnel's life and bytes go to `exchange`.
pub(crate) async fn run_tunnel(
    shared: &GatewayContext,
    account: TunnelAccount<'_>,
    client: ClientSide,
    mut upstream: Conn,
    early: &[u8],
) {
    let TunnelAccount {
        client_id,
        usage,
        lease,
        exchange,
    } = account;
    // Watch from before the first byte: a cut from now on closes the tunnel.
    let cut = lease.slot().cutoff.watch(&*shared.clock);
    exchange.tunnel_started();
    shared.metrics.tunnels_open.increment(1.0);
    if !early.is_empty() && upstream.write_all(early).await.is_err() {
        shared.metrics.tunnels_open.decrement(1.0);
        return;
    }
    let mut phase = shared.phase.clone();
    let ended = async {
        tokio::select! {
            _ = phase.wait_for(|p| *p == Phase::Stopped) => Ended::Stopped,
            () = client_removed(shared, client_id) => Ended::ClientRemoved,
            reason = cut.closed() => Ended::Cut(reason),
        }
    };
    let idle = shared.tunnel_idle();
    let (relayed, ended) = match (client, upstream) {
        (ClientSide::Socket(client), Conn::Plain(upstream)) => {
            tunnel::relay(client, upstream, idle, ended).await
        }
        (ClientSide::Socket(client), tls) => stream_tunnel::relay(client, tls, idle, ended).await,
        (ClientSide::Stream(client), upstream) => {
            stream_tunnel::relay(client, upstream, idle, ended).await
        }
    };
    match ended {
        Some(Ended::ClientRemoved) => {
            tracing::info!(
                client = client_id,
                "closing a tunnel of a client the configuration no longer has"
            );
        }
        Some(Ended::Cut(reason)) => {
            // The keeper or the control loop logged the proxy once; count each tunnel.
            tracing::debug!(
                client = client_id,
                reason = reason.label(),
                "tunnel closed: the proxy's lease is gone"
            );
            shared.metrics.tunnel_closed(reason);
        }
        Some(Ended::Stopped) | None => {}
    }
    // The usage counters feed the gateway's byte metrics too.
    usage.bytes_up.increment(relayed.up + early.len() as u64);
    usage.bytes_down.increment(relayed.down);
    exchange.bytes(relayed.up + early.len() as u64, relayed.down);
    shared.metrics.tunnels_open.decrement(1.0);
}

/// Completes a shutdown grace after the snapshot in force stops listing `client_id` (a
/// reload removed the client): its open tunnels get the same grace as on a shutdown.
async fn client_removed(shared: &GatewayContext, client_id: &str) {
    let mut swaps = shared.store.swaps();
    loop {
        let listed = shared
            .store
            .view()
            .is_none_or(|view| view.client(client_id).is_some());
        if !listed {
            break;
        }
        if swaps.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
    tokio::time::sleep(shared.config().shutdown_grace).await;
}
