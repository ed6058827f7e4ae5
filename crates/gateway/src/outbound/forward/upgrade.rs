//! WebSocket upgrades of `https` requests (inside an inspected `CONNECT`): the request
//! keeps its `Upgrade` and `Connection` headers (every other hop-by-hop header goes, as
//! for any request), goes on a connection of its own that is never pooled, and when the
//! origin answers `101 Switching Protocols` the client's upgraded stream and the origin's
//! are relayed both ways ([`crate::outbound::stream_tunnel`]) like a tunnel: its bytes
//! counted in the client's usage and the access log, ended when either side ends, it
//! idles, the gateway stops, a reload removes the client (a shutdown grace later), or the
//! gateway no longer holds the proxy's lease. Plain-http forwarding never upgrades: it
//! keeps stripping `Upgrade`.

use crate::access::Exchange;
use crate::context::{GatewayContext, Phase};
use crate::outbound::stream_tunnel;
use crate::policy::limits::ConnectionPermit;
use crate::proxies::capacity::Lease;
use crate::proxies::cutoff::CutReason;
use crate::snapshot::SnapshotStore;
use crate::usage::UsageCell;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;

/// The client's side of an upgrade it asked for.
#[derive(Debug)]
pub(super) struct ClientUpgrade {
    /// Resolves to the client's stream once the `101` has gone out to it.
    on: OnUpgrade,
    /// The protocol asked for (`websocket`).
    protocol: HeaderValue,
}

impl ClientUpgrade {
    /// Takes the upgrade out of a WebSocket handshake request (`Upgrade: websocket` with
    /// `Connection: upgrade`) before the request is consumed; `None` (and the request
    /// left alone) for any other request.
    pub(super) fn take<B>(request: &mut Request<B>) -> Option<ClientUpgrade> {
        let headers = request.headers();
        let protocol = headers.get(header::UPGRADE)?;
        let websocket = protocol.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("websocket"))
        });
        if !websocket || !asks_to_upgrade(headers) {
            return None;
        }
        let protocol = protocol.clone();
        Some(ClientUpgrade {
            on: hyper::upgrade::on(request),
            protocol,
        })
    }

    /// Puts back the two hop-by-hop headers the upgrade needs, after the strip.
    pub(super) fn restore(&self, headers: &mut HeaderMap) {
        restore(headers, self.protocol.clone());
    }
}

/// Whether `Connection` names `upgrade`.
fn asks_to_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

fn restore(headers: &mut HeaderMap, protocol: HeaderValue) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, protocol);
}

/// The origin's side of a `101`: its stream to come and the protocol it switched to.
pub(super) struct OriginUpgrade {
    on: OnUpgrade,
    protocol: Option<HeaderValue>,
}

impl OriginUpgrade {
    /// Takes the upgrade out of the origin's `101`, before its head is rewritten.
    pub(super) fn take<B>(response: &mut Response<B>) -> OriginUpgrade {
        OriginUpgrade {
            protocol: response.headers().get(header::UPGRADE).cloned(),
            on: hyper::upgrade::on(response),
        }
    }

    /// Puts back the upgrade headers of the `101` for the client, after the strip.
    pub(super) fn restore(&self, headers: &mut HeaderMap, client: &ClientUpgrade) {
        let protocol = self
            .protocol
            .clone()
            .unwrap_or_else(|| client.protocol.clone());
        restore(headers, protocol);
    }
}

/// What an upgraded exchange holds until it ends: the proxy's lease, the client's place,
/// where its bytes are counted and its account.
pub(super) struct Held {
    pub(super) lease: Lease,
    pub(super) permit: ConnectionPermit,
    pub(super) usage: Arc<UsageCell>,
    pub(super) exchange: Exchange,
    pub(super) client_id: String,
}

/// Why an upgraded exchange was ended from outside.
enum Ended {
    Stopped,
    ClientRemoved,
    Cut(CutReason),
}

/// Relays the two upgraded streams once both are there, in a task of its own.
pub(super) fn relay(
    shared: &GatewayContext,
    client: ClientUpgrade,
    origin: OriginUpgrade,
    held: Held,
) {
    // Watched from now: a cut while the 101 is on its way ends it too.
    let cut = held.lease.slot().cutoff.watch(&*shared.clock);
    let mut phase = shared.phase.clone();
    let store = Arc::clone(&shared.store);
    let grace = shared.config().shutdown_grace;
    let idle = shared.tunnel_idle();
    let metrics = Arc::clone(&shared.metrics);
    tokio::spawn(async move {
        let Held {
            lease,
            permit,
            usage,
            mut exchange,
            client_id,
        } = held;
        exchange.tunnel_started();
        let ended = async {
            tokio::select! {
                _ = phase.wait_for(|p| *p == Phase::Stopped) => Ended::Stopped,
                () = client_removed(&store, &client_id, grace) => Ended::ClientRemoved,
                reason = cut.closed() => Ended::Cut(reason),
            }
        };
        tokio::pin!(ended);
        let streams = tokio::select! {
            streams = async { tokio::join!(client.on, origin.on) } => streams,
            _ = &mut ended => return,
        };
        let (Ok(client_stream), Ok(origin_stream)) = streams else {
            return;
        };
        metrics.tunnels_open.increment(1.0);
        let (relayed, ended) = stream_tunnel::relay(
            TokioIo::new(client_stream),
            TokioIo::new(origin_stream),
            idle,
            &mut ended,
        )
        .await;
        match ended {
            Some(Ended::ClientRemoved) => tracing::info!(
                client = client_id,
                "closing a WebSocket of a client the configuration no longer has"
            ),
            Some(Ended::Cut(reason)) => {
                tracing::debug!(
                    client = client_id,
                    reason = reason.label(),
                    "WebSocket closed: the proxy's lease is gone"
                );
                metrics.tunnel_closed(reason);
            }
            Some(Ended::Stopped) | None => {}
        }
        usage.bytes_up.increment(relayed.up);
        usage.bytes_down.increment(relayed.down);
        exchange.bytes(relayed.up, relayed.down);
        metrics.tunnels_open.decrement(1.0);
        drop((lease, permit));
    });
}

/// Completes a shutdown grace after the snapshot in force stops listing `client_id`, as
/// for a tunnel (`crate::outbound::relay`).
async fn client_removed(store: &SnapshotStore, client_id: &str, grace: Duration) {
    let mut swaps = store.swaps();
    loop {
        let listed = store
            .view()
            .is_none_or(|view| view.client(client_id).is_some());
        if !listed {
            break;
        }
        if swaps.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
    tokio::time::sleep(grace).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(upgrade: Option<&str>, connection: Option<&str>) -> Request<()> {
        let mut builder = Request::get("/chat");
        if let Some(upgrade) = upgrade {
            builder = builder.header(header::UPGRADE, upgrade);
        }
        if let Some(connection) = connection {
            builder = builder.header(header::CONNECTION, connection);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn only_a_websocket_handshake_is_taken_as_an_upgrade() {
        let mut handshake = request(Some("WebSocket"), Some("keep-alive, Upgrade"));
        let upgrade = ClientUpgrade::take(&mut handshake).expect("a WebSocket handshake");
        assert_eq!(upgrade.protocol, "WebSocket");
        // The request keeps its headers; what the strip takes, `restore` puts back alone.
        let mut headers = HeaderMap::new();
        headers.insert("sec-websocket-key", HeaderValue::from_static("abc"));
        upgrade.restore(&mut headers);
        assert_eq!(headers[header::CONNECTION], "upgrade");
        assert_eq!(headers[header::UPGRADE], "WebSocket");
        assert_eq!(headers.len(), 3);
        for (upgrade, connection) in [
            (Some("h2c"), Some("Upgrade")),
            (Some("websocket"), None),
            (Some("websocket"), Some("keep-alive")),
            (None, Some("Upgrade")),
        ] {
            let mut other = request(upgrade, connection);
            assert!(
                ClientUpgrade::take(&mut other).is_none(),
                "{upgrade:?} {connection:?}"
            );
        }
    }

    #[test]
    fn the_101_names_the_origins_protocol_or_else_the_clients() {
        let mut handshake = request(Some("websocket"), Some("Upgrade"));
        let client = ClientUpgrade::take(&mut handshake).unwrap();
        let mut switched = Response::builder()
            .status(101)
            .header(header::UPGRADE, "websocket")
            .body(())
            .unwrap();
        let origin = OriginUpgrade::take(&mut switched);
        let mut headers = HeaderMap::new();
        origin.restore(&mut headers, &client);
        assert_eq!(headers[header::UPGRADE], "websocket");
        let mut bare = Response::builder().status(101).body(()).unwrap();
        let origin = OriginUpgrade::take(&mut bare);
        let mut headers = HeaderMap::new();
        origin.restore(&mut headers, &client);
        assert_eq!(headers[header::UPGRADE], "websocket");
        assert_eq!(headers[header::CONNECTION], "upgrade");
    }
}
