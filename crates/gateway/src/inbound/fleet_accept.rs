//! The fleet listener (`[gateway.fleet] listen`): where the other members of the fleet
//! relay the keyed requests and tunnels this gateway owns (`crate::fleet`).
//!
//! Its admission is the client listeners' ([`crate::inbound::accept`]) with caps of its
//! own: a per-address cap and a global cap, both `fleet.max_connections` (members relay
//! many clients over few addresses), taken at accept, then the first byte within the
//! first-byte deadline. There is no shield and no PROXY protocol: peers are gateways, and
//! they prove it by TLS. A stranger gets the TLS handshake only, under the header-read
//! timeout, and is closed when it shows no client certificate (counted
//! `hop_refusals_total{reason="handshake"}`) or one whose pin no member has, after one
//! refresh of the member list of at most [`UNKNOWN_PEER_WAIT`] (a member that has just
//! joined), counted `reason="unknown_peer"`.
//!
//! A member's connection is then served as the HTTP proxy protocol
//! ([`crate::inbound::http::serve_connection`]) with the member as its fleet peer: its
//! requests name their client in `Proxypool-Fleet-*` headers
//! (`crate::inbound::http::fleet_auth`). It drains and stops with the other listeners.

use crate::config::GatewayConfig;
use crate::fleet::Fleet;
use crate::fleet::metrics::HopRefusal;
use crate::fleet::pins;
use crate::inbound::accept::{ShieldAtAccept, accept_sockets, first_byte};
use crate::inbound::http;
use crate::state::Shared;
use proxypool_core::WorkerId;
use proxypool_edge::{Admitted, ConnectionCap, PerIpLimit};
use rustls::ServerConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long an unknown peer's pin waits for a fresh member list.
pub(crate) const UNKNOWN_PEER_WAIT: Duration = Duration::from_secs(1);

/// IPv6 peers are counted per address: members are few, and each has its own.
const IPV6_PREFIX: u8 = 128;

/// The fleet listener's TLS and connection caps, built at bind.
#[derive(Debug)]
pub(crate) struct FleetListener {
    fleet: Arc<Fleet>,
    /// The listener's TLS ([`pins::server_config`]).
    tls: Arc<ServerConfig>,
    /// Open connections (`fleet.max_connections`).
    connections: Arc<ConnectionCap>,
    /// Open connections per address (the same number).
    per_ip: Arc<PerIpLimit>,
}

impl FleetListener {
    /// The listener of `fleet`, with at most `max_connections` connections.
    pub(crate) fn new(fleet: Arc<Fleet>, max_connections: usize) -> Result<Self, String> {
        let tls = pins::server_config(&fleet.identity)?;
        Ok(FleetListener {
            fleet,
            tls,
            connections: ConnectionCap::new(max_connections),
            per_ip: PerIpLimit::new(max_connections, IPV6_PREFIX),
        })
    }

    /// Completes when no fleet connection is open.
    async fn all_closed(&self) {
        self.connections.all_closed().await;
    }

    /// Follows a reloaded `fleet.max_connections` (open connections over it stay).
    fn follow_cap(&self, shared: &Shared) {
        let Some(max) = shared.config().fleet.as_ref().map(|f| f.max_connections) else {
            return;
        };
        if self.connections.cap() != max {
            self.connections.set_cap(max);
            self.per_ip.set_cap(max);
        }
    }

    /// Both caps; `None` = refused (the socket is dropped, so closed).
    fn admit(&self, shared: &Shared, peer: SocketAddr) -> Option<Admitted> {
        self.follow_cap(shared);
        let Some(ticket) = self.per_ip.try_open(peer.ip()) else {
            tracing::debug!(%peer, "fleet listener: the address holds its cap of connections");
            return None;
        };
        let Some(connection) = self.connections.admit() else {
            tracing::debug!(%peer, "fleet listener: at its connection cap, every one busy");
            return None;
        };
        Some(Admitted::new(Some(ticket), connection))
    }
}

/// Accepts fleet hops until the gateway starts draining.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, fleet: Arc<FleetListener>) {
    let phase = shared.phase.clone();
    accept_sockets(listener, phase, &"fleet", |stream, peer| {
        let Some(admitted) = fleet.admit(&shared, peer) else {
            return;
        };
        tokio::spawn(run(
            Arc::clone(&shared),
            Arc::clone(&fleet),
            stream,
            peer,
            admitted,
        ));
    })
    .await;
}

/// One admitted connection: its first byte in time, the handshake, the pin, then the
/// HTTP proxy protocol with the member as its peer.
async fn run(
    shared: Arc<Shared>,
    listener: Arc<FleetListener>,
    stream: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
) {
    if !first_byte(&shared, &stream, &admitted).await {
        tracing::debug!(%peer, "fleet listener: no first byte in time, closed to make room, or draining");
        return;
    }
    let _ = stream.set_nodelay(true);
    let Some((stream, member)) = handshake(&shared, &listener, stream, peer).await else {
        return;
    };
    let shield = ShieldAtAccept {
        shield: None,
        verdict: Ok(()),
    };
    http::serve_connection(&shared, stream, peer, admitted, shield, None, Some(member)).await;
}

/// The handshake under the header-read timeout, then the peer's pin looked up among the
/// members (once more after a refresh when unknown); the stream and the member, or `None`
/// (closed, counted).
async fn handshake(
    shared: &Shared,
    listener: &FleetListener,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, WorkerId)> {
    let metrics = &listener.fleet.metrics;
    let stream = match tokio::time::timeout(
        shared.header_timeout(),
        TlsAcceptor::from(Arc::clone(&listener.tls)).accept(stream),
    )
    .await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            metrics.hop_refused(HopRefusal::Handshake);
            tracing::debug!(%peer, %error, "fleet hop: TLS handshake failed");
            return None;
        }
        Err(_) => {
            metrics.hop_refused(HopRefusal::Handshake);
            tracing::debug!(%peer, "fleet hop: TLS handshake timed out");
            return None;
        }
    };
    // The verifier required a certificate: no pin means none that parses.
    let Some(pin) = pins::peer_pin(stream.get_ref().1) else {
        metrics.hop_refused(HopRefusal::Handshake);
        tracing::debug!(%peer, "fleet hop: no client certificate");
        return None;
    };
    let view = &listener.fleet.view;
    let member = match view.member_by_pin(&pin) {
        Some(member) => member,
        None => {
            // Perhaps a member that joined after our last list: ask once, briefly.
            view.refresh_now(UNKNOWN_PEER_WAIT).await;
            let Some(member) = view.member_by_pin(&pin) else {
                metrics.hop_refused(HopRefusal::UnknownPeer);
                tracing::debug!(
                    %peer,
                    pin = %proxypool_core::hex::encode(&pin),
                    "fleet hop: the client certificate is no member's: closed"
                );
                return None;
            };
            member
        }
    };
    Some((stream, member.worker))
}

/// The fleet listener bound at start, until [`BoundFleet::serve`] runs it.
#[derive(Debug)]
pub(crate) struct BoundFleet {
    listener: TcpListener,
    accept: Arc<FleetListener>,
    addr: SocketAddr,
}

/// With `[gateway.fleet]`: this gateway's fleet membership (a fresh hop identity) and its
/// bound fleet listener; `None` without. The error says what failed, in words.
pub(crate) async fn start(
    config: &GatewayConfig,
) -> Result<Option<(Arc<Fleet>, BoundFleet)>, String> {
    let Some(settings) = &config.fleet else {
        return Ok(None);
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|error| format!("cannot bind {}: {error}", settings.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|error| format!("the address bound at {}: {error}", settings.listen))?;
    // `advertise` left to default to a `listen` on port 0 (tests, ad-hoc runs): peers
    // must dial the port the system chose.
    let advertise = match settings.advertise.rsplit_once(':') {
        Some((host, "0")) => format!("{host}:{}", addr.port()),
        _ => settings.advertise.clone(),
    };
    let fleet = Arc::new(Fleet::new(config.worker_id.clone(), advertise)?);
    let accept = FleetListener::new(Arc::clone(&fleet), settings.max_connections)?;
    let bound = BoundFleet {
        listener,
        accept: Arc::new(accept),
        addr,
    };
    Ok(Some((fleet, bound)))
}

impl BoundFleet {
    /// The address the listener is bound at.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accepts hops on a task of `tasks`; the listener, for the drain to wait on.
    pub(crate) fn serve(
        self,
        tasks: &mut tokio::task::JoinSet<()>,
        shared: &Arc<Shared>,
    ) -> Arc<FleetListener> {
        tasks.spawn(serve(
            self.listener,
            Arc::clone(shared),
            Arc::clone(&self.accept),
        ));
        self.accept
    }
}

/// Completes when no client connection (all client listeners) and no fleet connection is
/// open: what a drain waits for.
pub(crate) async fn all_closed(shared: &Shared, fleet: Option<&FleetListener>) {
    shared.connections.all_closed().await;
    if let Some(fleet) = fleet {
        fleet.all_closed().await;
    }
}
