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

use crate::access::Exchange;
use crate::fleet::Fleet;
use crate::fleet::hop_client::{HopError, HopTimeouts, TunnelAnswer};
use crate::fleet::metrics::{RelayKind, RelayOutcome};
use crate::fleet::owner::Choice;
use crate::fleet::view::Member;
use crate::outbound::forward::{FLEET_HEADER_PREFIX, retain_in_order};
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
    let defaults;
    let fleet = match &config.fleet {
        Some(fleet) => fleet,
        None => {
            defaults = crate::config::FleetConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
            &defaults
        }
    };
    (
        HopTimeouts::of(fleet, &config),
        fleet.unreachable_for.as_ms(),
    )
}

/// Removes every `Proxypool-Fleet-*` header, keeping the order of the rest: a client's
/// own (so it cannot speak for another client), and the hop's before anything goes
/// upstream.
pub(crate) fn strip_fleet_headers(headers: &mut HeaderMap) {
    retain_in_order(headers, |name| {
        !name.as_str().starts_with(FLEET_HEADER_PREFIX)
    });
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

/// What a client asked to tunnel to, and as whom.
pub(crate) struct TunnelAsk<'a> {
    /// `host:port`.
    pub authority: &'a str,
    /// The username the client sent (the owner parses its selectors again).
    pub username: &'a str,
    /// The client's address as this gateway saw it.
    pub peer: SocketAddr,
}

/// A tunnel through the key's owner, for `CONNECT` and SOCKS5 alike: the owner's answer
/// (open or refused; counted, and this gateway's access line dropped, since the owner
/// writes it), `None` when the tunnel is to be routed here after all (this gateway is the
/// next owner), `FleetUnavailable` once the next owner failed too.
async fn tunnel(
    shared: &Shared,
    mut target: Target,
    kind: RelayKind,
    auth: &mut Authenticated,
    ask: TunnelAsk<'_>,
    exchange: &mut Exchange,
) -> Result<Option<TunnelAnswer>, Refusal> {
    let mut retried = false;
    loop {
        let mut headers = HeaderMap::new();
        fleet_headers(&mut headers, auth, ask.username, ask.peer, target.moved)?;
        let started = Instant::now();
        let timeouts = target.timeouts(shared);
        let answer = target
            .fleet
            .hops
            .open_tunnel(&target.member, timeouts, ask.authority, headers)
            .await;
        match answer {
            Ok(answer) => {
                let open = matches!(answer, TunnelAnswer::Open { .. });
                target.answered(kind, open, started);
                exchange.hand_over().forget();
                return Ok(Some(answer));
            }
            Err(error) => match target.failed(shared, kind, auth, &error) {
                Some(next) if !retried => {
                    retried = true;
                    target = next;
                }
                None if !retried => return Ok(None),
                _ => return Err(Refusal::FleetUnavailable),
            },
        }
    }
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
/// entry's server frames the body itself), keeping the order of the rest as the owner
/// sent it.
fn strip_answer_hop_headers(headers: &mut HeaderMap) {
    retain_in_order(headers, |name| {
        !matches!(
            name.as_str(),
            "connection" | "transfer-encoding" | "keep-alive"
        )
    });
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

    #[test]
    fn an_owners_answer_keeps_its_header_order_without_its_framing() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-first", "1"),
            ("transfer-encoding", "chunked"),
            ("x-second", "2"),
            ("connection", "keep-alive"),
            ("x-third", "3"),
            ("x-fourth", "4"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        strip_answer_hop_headers(&mut headers);
        let names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["x-first", "x-second", "x-third", "x-fourth"]);
    }
}
