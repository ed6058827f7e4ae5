//! The owner's side of a fleet hop request: its client from the `Proxypool-Fleet-*`
//! headers the relaying member set, instead of `Proxy-Authorization`.
//!
//! The member proved itself by its pin at the handshake (`crate::inbound::fleet_accept`),
//! and it checked the client's password, allowlist, shield, rate limit and connection cap
//! once: none of them is charged again here. What is redone is what costs nothing and
//! must hold in this gateway's own view: the client exists here, its username's selectors
//! parse with the same parser and bounds (the `inspect` rule, allowed upstreams and
//! regions). The destination policy, proxy capacity, bans, usage and the access line are
//! the ordinary path's, with the client's address from `Proxypool-Fleet-Peer`. A hop
//! request is never relayed again, so a hop cannot loop.

use super::connection::ConnectionState;
use crate::access::Exchange;
use crate::fleet::metrics::{HopRefusal, RelayKind};
use crate::inbound::auth::authorize;
use crate::inbound::relay::{CLIENT_HEADER, MOVED_HEADER, PEER_HEADER, USERNAME_HEADER};
use crate::policy::limits::ConnectionPermit;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::selector::{MAX_USERNAME, split_client};
use crate::snapshot::{ClientEntry, SnapshotView};
use crate::state::Shared;
use http::{HeaderMap, Method, Request};
use proxypool_core::WorkerId;
use std::net::SocketAddr;

/// The client of a hop request from `member`, and the client's address for the access
/// line; counted as served (`proxypool_gateway_fleet_served_total{kind}`) when it names
/// a client of this view.
pub(super) fn authenticate<B>(
    shared: &Shared,
    member: &WorkerId,
    view: &SnapshotView,
    request: &Request<B>,
    exchange: &mut Exchange,
) -> Result<Authenticated, Refusal> {
    let headers = request.headers();
    if let Some(peer) = relayed_peer(headers) {
        exchange.source(peer);
    }
    let auth = client_of(shared, view, headers).inspect_err(|refusal| {
        tracing::debug!(%member, %refusal, "fleet hop request refused");
    })?;
    exchange.client(&auth.client.id);
    if let Some(fleet) = &shared.fleet {
        let kind = if request.method() == Method::CONNECT {
            RelayKind::Connect
        } else {
            RelayKind::Http
        };
        fleet.metrics.served(kind);
    }
    Ok(auth)
}

/// The client's address: the connection's peer, or on a fleet hop the address the
/// relaying member saw (`Proxypool-Fleet-Peer`; the member's own when it is unreadable).
pub(super) fn client_address(state: &ConnectionState, headers: &HeaderMap) -> SocketAddr {
    if state.fleet_peer.is_none() {
        return state.peer;
    }
    relayed_peer(headers).unwrap_or(state.peer)
}

/// The client's address a relaying member names (`Proxypool-Fleet-Peer`), if readable.
fn relayed_peer(headers: &HeaderMap) -> Option<SocketAddr> {
    header(headers, &PEER_HEADER).and_then(|text| text.parse().ok())
}

/// The client's place for one request or tunnel: counted against its cap, or on a fleet
/// hop not at all (the relaying member holds the client's place).
pub(super) fn connection_permit(
    state: &ConnectionState,
    client: &ClientEntry,
) -> Result<ConnectionPermit, Refusal> {
    if state.fleet_peer.is_some() {
        return Ok(ConnectionPermit::uncounted());
    }
    ConnectionPermit::try_acquire(&client.connections, client.max_connections)
}

/// The client and selectors the fleet headers name. Headers missing or unreadable are a
/// bad request (counted `hop_refusals_total{reason="bad_request"}`: a member never sends
/// that); a client this view does not know is refused like missing credentials.
fn client_of(
    shared: &Shared,
    view: &SnapshotView,
    headers: &HeaderMap,
) -> Result<Authenticated, Refusal> {
    let bad_request = |what: &str| {
        if let Some(fleet) = &shared.fleet {
            fleet.metrics.hop_refused(HopRefusal::BadRequest);
        }
        Refusal::BadRequest(format!("a fleet hop request needs {what}"))
    };
    let id =
        header(headers, &CLIENT_HEADER).ok_or_else(|| bad_request("Proxypool-Fleet-Client"))?;
    let username = header(headers, &USERNAME_HEADER)
        .filter(|username| username.len() <= MAX_USERNAME)
        .ok_or_else(|| bad_request("Proxypool-Fleet-Username"))?;
    let client = view.client(id).ok_or(Refusal::AuthRequired)?;
    let rest = match split_client(username, |candidate| view.has_client(candidate)) {
        Some((named, rest)) if named == id => rest,
        // The username names another client than the header: the entry would never.
        _ => return Err(bad_request("a username of the named client")),
    };
    let mut auth = authorize(client, rest, None, shared.config().sessions.max_minutes)?;
    auth.fleet_moved = header(headers, &MOVED_HEADER) == Some("1");
    Ok(auth)
}

/// A header's value as text, when present and readable.
fn header<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}
