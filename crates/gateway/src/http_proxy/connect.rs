//! HTTP `CONNECT`: dial a tunnel through an upstream proxy first (so a failure is still a
//! proper 502/503), answer 200, then relay the upgraded connection.

use super::service::ConnectionState;
use crate::admission::ConnectionPermit;
use crate::auth::Authenticated;
use crate::capacity::Lease;
use crate::cutoff::CutReason;
use crate::destination;
use crate::dial::TunnelDialer;
use crate::forward::body::ProxyBody;
use crate::io::ActivityIo;
use crate::refusal::Refusal;
use crate::route::{RouteTarget, SESSION_HEADER, name_the_proxy};
use crate::snapshot::SnapshotView;
use crate::state::{Phase, Shared};
use crate::tunnel;
use crate::usage::UsageCell;
use http::header::{HeaderName, HeaderValue};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use proxypool_proto::TargetAddr;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Handles one `CONNECT host:port`.
pub(super) async fn connect(
    shared: &Arc<Shared>,
    view: &SnapshotView,
    auth: &Authenticated,
    request: Request<Incoming>,
    state: &ConnectionState,
) -> Result<Response<ProxyBody>, Refusal> {
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| Refusal::BadRequest("CONNECT needs host:port".into()))?;
    let target: TargetAddr = authority
        .parse()
        .map_err(|error| Refusal::BadRequest(format!("bad CONNECT target: {error}")))?;
    destination::admit(shared, &auth.client, &target)?;
    let permit =
        ConnectionPermit::try_acquire(&auth.client.connections, auth.client.max_connections)?;
    let timeouts = shared.timeouts();
    let dialer = TunnelDialer { target, timeouts };
    let domain = crate::bans::TargetDomain::new(&dialer.target);
    let route_target = RouteTarget {
        domain: Some(&domain),
        avoid: &[],
    };
    let routed = shared
        .router
        .route(view, auth, route_target, &dialer)
        .await?;
    let proxy = &view.proxies[routed.index as usize];
    let usage = shared.usage.cell(&auth.client.id, &proxy.upstream);
    usage.routed();
    let upstream = routed.value;
    let lease = routed.lease;
    // The tunnel outlives the HTTP connection task: it carries the connection's place.
    let connection_permit = state.take_permit();
    let shared_for_tunnel = Arc::clone(shared);
    let client_id = auth.client.id.to_string();
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        // Unwrap back to the raw socket so the relay can wait without buffers.
        let (client, leftover) = match upgraded.downcast::<TokioIo<ActivityIo>>() {
            // Copy what the client sent early: the slice would pin hyper's whole read
            // buffer for the life of the tunnel (8 KiB per idle tunnel).
            Ok(parts) => (parts.io.into_inner().into_inner(), parts.read_buf.to_vec()),
            Err(_) => return,
        };
        run_tunnel(
            &shared_for_tunnel,
            &client_id,
            &usage,
            &lease,
            client,
            upstream,
            &leftover,
        )
        .await;
        drop((lease, permit, connection_permit));
    });
    let mut response = Response::new(ProxyBody::empty());
    if let Some(value) = routed.session.header_value() {
        response.headers_mut().insert(
            HeaderName::from_static(SESSION_HEADER),
            HeaderValue::from_static(value),
        );
    }
    // Inside the tunnel the gateway sees no status: the client reports bans by this id.
    name_the_proxy(response.headers_mut(), proxy, routed.attempts);
    Ok(response)
}

/// Why a tunnel was ended from outside.
enum Ended {
    Stopped,
    ClientRemoved,
    Cut(CutReason),
}

/// Relays a tunnel of `client_id` through the proxy of `lease`, sending bytes the client
/// sent early (with its CONNECT) first. The tunnel ends when either side does, when it
/// idles, when the gateway stops, a shutdown grace after a configuration reload removed its
/// client, or as soon as the gateway no longer holds the proxy's lease ([`crate::cutoff`]).
pub(crate) async fn run_tunnel(
    shared: &Shared,
    client_id: &str,
    usage: &UsageCell,
    lease: &Lease,
    client: TcpStream,
    mut upstream: TcpStream,
    early: &[u8],
) {
    // Watch from before the first byte: a cut from now on closes the tunnel.
    let cut = lease.slot().cutoff.watch(&*shared.clock);
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
    let (relayed, ended) = tunnel::relay(client, upstream, shared.tunnel_idle(), ended).await;
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
    shared.metrics.tunnels_open.decrement(1.0);
}

/// Completes a shutdown grace after the snapshot in force stops listing `client_id` (a
/// reload removed the client): its open tunnels get the same grace as on a shutdown.
async fn client_removed(shared: &Shared, client_id: &str) {
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
