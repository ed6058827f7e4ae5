//! The entry side of the fleet (`crate::fleet`): a keyed request (a sticky session or a
//! rotation key: [`crate::routing::rotation::fleet_key`]) whose owner is another member
//! goes there over the hop, and the owner's answer comes back as if this gateway had
//! routed it.
//!
//! The entry has charged the shield, the client's rate limit and its connection cap, and
//! checked the destination policy; it holds the client's connection place until the
//! answer or the tunnel ends. The owner charges none of them again, routes, accounts the
//! usage and writes the access line; the entry writes no line for a relayed request (it
//! counts `proxypool_gateway_fleet_relayed_total` instead), so every limit and count is
//! charged once. Its own refusals (a bad request, `fleet_unavailable`) it logs as always.
//!
//! The request goes without `Proxy-Authorization`, with the client in `Proxypool-Fleet-*`
//! headers ([`fleet_headers`]); a client's own such headers are dropped first, so nobody
//! speaks for another client. An owner that does not answer (connect, TLS, no answer head
//! within `hop_timeout`) is marked unreachable here, a fresh member list is asked for (not
//! waited for), and the request goes once to the next owner in rendezvous order, which
//! may be this gateway (then it is routed here, its session answering `reassigned`); a
//! second failure is a 503 `fleet_unavailable`.
//!
//! | module | what it relays |
//! | --- | --- |
//! | [`http`] | the HTTP listener's requests: plain HTTP, and `CONNECT` tunnels |
//! | [`socks`] | SOCKS5 `CONNECT`s, as a `CONNECT` over the hop |

pub(crate) mod http;
pub(crate) mod socks;

use crate::fleet::Fleet;
use crate::fleet::hop_client::{HopError, HopTimeouts};
use crate::fleet::metrics::{RelayKind, RelayOutcome};
use crate::fleet::owner::Choice;
use crate::fleet::view::Member;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::rotation::fleet_key;
use crate::state::Shared;
use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The client a hop request is for (its id).
pub(crate) const CLIENT_HEADER: HeaderName = HeaderName::from_static("proxypool-fleet-client");
/// The username as the client sent it (client id and selectors), re-parsed by the owner.
pub(crate) const USERNAME_HEADER: HeaderName = HeaderName::from_static("proxypool-fleet-username");
/// The client's `ip:port` as the entry saw it (the owner's access line).
pub(crate) const PEER_HEADER: HeaderName = HeaderName::from_static("proxypool-fleet-peer");
/// `1`: the key's owner changed since it was last used (its session answers `reassigned`
/// where it has no pin).
pub(crate) const MOVED_HEADER: HeaderName = HeaderName::from_static("proxypool-fleet-moved");

/// What every fleet header's name starts with.
const FLEET_PREFIX: &str = "proxypool-fleet-";

/// A keyed request's owner elsewhere in the fleet.
#[derive(Debug)]
pub(crate) struct Target {
    fleet: Arc<Fleet>,
    pub member: Member,
    /// The key's owner in a remembered member list was another member.
    pub moved: bool,
    /// The fleet key (for the next owner after a failure).
    key: String,
}

/// Whether the request goes to another member: `Some` when it has a fleet key whose
/// owner is another member. Otherwise it is routed here, and `auth` says whether its
/// key moved here from another member.
pub(crate) fn decide(shared: &Shared, auth: &mut Authenticated) -> Option<Target> {
    let fleet = shared.fleet.as_ref()?;
    let key = fleet_key(auth)?;
    // A list replaced longer ago than a session can live holds no pin to miss (the
    // setting applies on reload, so it is read here).
    let session_ms = u64::from(shared.config().sessions.max_minutes) * 60_000;
    fleet.owners.remember_lists_for(session_ms);
    let choice = fleet.owners.choose(
        &fleet.view,
        &auth.client.id,
        &key,
        shared.clock.monotonic_ms(),
        || held_here(shared, auth, &key),
    );
    match choice {
        Choice::Local { moved } => {
            auth.fleet_moved |= moved;
            None
        }
        Choice::Remote { member, moved } => {
            let key = key.into_owned();
            Some(Target {
                fleet: Arc::clone(fleet),
                member,
                moved,
                key,
            })
        }
    }
}

impl Target {
    /// The hop's bounds in force.
    fn timeouts(&self, shared: &Shared) -> HopTimeouts {
        hop_settings(shared).0
    }

    /// The owner answered a head (`ok`: a 2xx) after a hop that started at `started`.
    fn answered(&self, kind: RelayKind, ok: bool, started: Instant) {
        let metrics = &self.fleet.metrics;
        metrics.hop_seconds.record(started.elapsed().as_secs_f64());
        let outcome = if ok {
            RelayOutcome::Ok
        } else {
            RelayOutcome::Refused
        };
        metrics.relayed(kind, outcome);
    }

    /// The owner did not answer: it is marked unreachable here, a fresh member list is
    /// asked for in the background, and the next owner is returned (`None`: this gateway,
    /// and `auth` then says the key moved).
    fn failed(
        self,
        shared: &Shared,
        kind: RelayKind,
        auth: &mut Authenticated,
        error: &HopError,
    ) -> Option<Target> {
        let fleet = &self.fleet;
        tracing::debug!(member = %self.member.worker, %error, "fleet hop failed; trying the next owner");
        fleet.metrics.relayed(kind, RelayOutcome::Unreachable);
        fleet.metrics.unreachable.increment(1);
        let now = shared.clock.monotonic_ms();
        let unreachable_for = hop_settings(shared).1;
        fleet
            .owners
            .mark_unreachable(&self.member.worker, now.saturating_add(unreachable_for));
        let view = Arc::clone(&fleet.view);
        // Asked now; the answer is not waited for (the next owner is tried at once).
        tokio::spawn(async move { view.refresh_now(std::time::Duration::ZERO).await });
        let next = fleet.owners.next_after(
            &fleet.view,
            &auth.client.id,
            &self.key,
            &self.member.worker,
            now,
            || held_here(shared, auth, &self.key),
        );
        match next {
            Choice::Local { .. } => {
                // The key had an owner that is not the one serving it now.
                auth.fleet_moved = true;
                None
            }
            Choice::Remote { member, moved } => Some(Target {
                member,
                moved,
                ..self
            }),
        }
    }
}

/// Whether this gateway's sticky table keeps a live pin under the key.
fn held_here(shared: &Shared, auth: &Authenticated, key: &str) -> bool {
    shared
        .router
        .sticky()
        .holds(auth.client.id.as_str(), key, shared.clock.now())
}

/// The hop's bounds and `unreachable_for` (ms) in force (the defaults should a reload
/// have dropped `[gateway.fleet]`, which takes a restart to apply).
fn hop_settings(shared: &Shared) -> (HopTimeouts, u64) {
    let config = shared.config();
    match &config.fleet {
        Some(fleet) => (
            HopTimeouts::of(fleet, &config),
            fleet.unreachable_for.as_ms(),
        ),
        None => {
            let defaults = crate::config::FleetConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
            (
                HopTimeouts::of(&defaults, &config),
                defaults.unreachable_for.as_ms(),
            )
        }
    }
}

/// Removes every `Proxypool-Fleet-*` header: a client's own (so it cannot speak for
/// another client), and the hop's before anything goes upstream.
pub(crate) fn strip_fleet_headers(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with(FLEET_PREFIX))
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

/// Replaces any fleet header in `headers` with the entry's own: the client, the username
/// it sent, its address, and whether the key moved. A username no header can carry (a
/// SOCKS5 username with control characters) is a bad selector.
pub(crate) fn fleet_headers(
    headers: &mut HeaderMap,
    auth: &Authenticated,
    username: &str,
    peer: SocketAddr,
    moved: bool,
) -> Result<(), Refusal> {
    strip_fleet_headers(headers);
    let username = HeaderValue::from_str(username).map_err(|_| {
        Refusal::BadSelector("the username has characters a header cannot carry".into())
    })?;
    let client = HeaderValue::from_str(auth.client.id.as_str())
        .map_err(|_| Refusal::BadSelector("the client id cannot be carried".into()))?;
    headers.insert(CLIENT_HEADER, client);
    headers.insert(USERNAME_HEADER, username);
    headers.insert(
        PEER_HEADER,
        HeaderValue::from_str(&peer.to_string()).expect("an address is a valid header value"),
    );
    if moved {
        headers.insert(MOVED_HEADER, HeaderValue::from_static("1"));
    }
    Ok(())
}

/// Splices a relayed tunnel: the client's stream and the owner's, both ways, until either
/// side ends, it idles (`limits.tunnel_idle`) or the gateway stops. The owner accounts its
/// bytes.
async fn splice<C, O>(shared: &Shared, client: C, owner: O)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    O: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut phase = shared.phase.clone();
    let stopped = async move {
        let _ = phase
            .wait_for(|phase| *phase == crate::context::Phase::Stopped)
            .await;
    };
    let _ =
        crate::outbound::stream_tunnel::relay(client, owner, shared.tunnel_idle(), stopped).await;
}

/// Drops the owner's answer's connection-level headers before it goes to the client (the
/// entry's server frames the body itself).
fn strip_answer_hop_headers(headers: &mut HeaderMap) {
    for name in [
        ::http::header::CONNECTION,
        ::http::header::TRANSFER_ENCODING,
        HeaderName::from_static("keep-alive"),
    ] {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_fleet_headers_are_replaced_by_the_entrys() {
        let mut headers = HeaderMap::new();
        headers.insert("proxypool-fleet-client", HeaderValue::from_static("other"));
        headers.insert(
            "Proxypool-Fleet-Peer",
            HeaderValue::from_static("1.2.3.4:5"),
        );
        headers.insert("proxypool-fleet-moved", HeaderValue::from_static("1"));
        headers.insert("proxypool-fleet-whatever", HeaderValue::from_static("x"));
        headers.insert("x-kept", HeaderValue::from_static("y"));
        strip_fleet_headers(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert_eq!(headers["x-kept"], "y");
    }
}
