//! The SOCKS5 listener (RFC 1928 `CONNECT`, RFC 1929 username/password; IPv4, IPv6 and
//! domain targets), on tokio with the `proxypool-proto` server steps.
//!
//! Order per connection: admission at accept (per-IP cap → per-IP shield → connection
//! cap: [`crate::inbound::accept`]) → handshake (under the header
//! timeout) with the credentials checked between method negotiation and the request →
//! client policy → destination policy → connection cap → route and dial → reply → relay. Refusals after
//! authentication get the fitting reply code; bad credentials or selectors fail the
//! RFC 1929 step (which has no room for a message) and the connection closes.

use crate::access::{Exchange, Kind};
use crate::inbound::accept::{Accepted, accept_loop};
use crate::inbound::admission;
use crate::inbound::auth::authenticate;
use crate::inbound::relay;
use crate::metrics::Listener;
use crate::outbound::dial::{DialTimeouts, TunnelDialer};
use crate::outbound::relay::{ClientSide, TunnelAccount, run_tunnel};
use crate::policy::limits::{ClientPolicy, ConnectionPermit};
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::state::Shared;
use crate::usage::UsageCell;
use proxypool_edge::Conn;
use proxypool_proto::socks5::{self, Reply};
use proxypool_proto::{ProtoError, TargetAddr, with_timeout};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// The bound address of every reply (`0.0.0.0:0`, ATYP IPv4).
const UNSPECIFIED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// Accepts SOCKS5 connections until the gateway starts draining (admission at accept:
/// [`crate::inbound::accept`]).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    accept_loop(
        listener,
        shared,
        Listener::Socks5,
        |shared, accepted| async move {
            shared.metrics.socks_requests.increment(1);
            serve_connection(&shared, accepted).await;
        },
    )
    .await;
}

/// What the handshake produced.
enum Handshake {
    /// Authenticated and the request read; `Err` = refuse with a reply. Boxed (once per
    /// connection) so the rarer variants do not carry the selectors' size. With the
    /// username as the client sent it (a relay to the fleet passes it on).
    Request(TargetAddr, Result<Box<Authenticated>, Refusal>, String),
    /// Refused at the credentials step (which has no reply code): the connection is done.
    Refused(Refusal),
    /// The connection is done before it asked for anything (no method we offer).
    Closed,
}

async fn serve_connection(shared: &Arc<Shared>, accepted: Accepted) {
    let Accepted {
        mut stream,
        peer,
        admitted: permit,
        shield,
    } = accepted;
    let _ = stream.set_nodelay(true);
    // The shield's verdict for this connection was charged at accept.
    let shielded = shield.verdict;
    let mark = Arc::clone(permit.mark());
    let mut exchange = Exchange::start(&shared.access, Kind::Socks5, peer);
    let handshake = tokio::select! {
        handshake = with_timeout(
            shared.header_timeout(),
            handshake(shared, &mut stream, peer, shielded),
        ) => handshake,
        // Chosen to make room the moment its first byte came (it is never chosen once it
        // is seen speaking).
        () = mark.evicted() => return exchange.forget(),
    };
    let (target, auth, username) = match handshake {
        Ok(Handshake::Request(target, auth, username)) => {
            (target, auth.map(|auth| *auth), username)
        }
        Ok(Handshake::Refused(refusal)) => return exchange.refused_at_credentials(&refusal),
        Ok(Handshake::Closed) => return exchange.forget(),
        Err(error) => {
            tracing::debug!(%peer, %error, "socks5 handshake failed");
            return exchange.forget();
        }
    };
    exchange.target(&target);
    // Busy since its first byte; a request read keeps it so until the close.
    mark.busy();
    let (outcome, client) = match auth {
        Ok(mut auth) => {
            exchange.client(&auth.client.id);
            let asked = Asked {
                target,
                username: &username,
                peer,
            };
            (
                route(shared, &mut auth, asked, &mut exchange).await,
                auth.client.id.to_string(),
            )
        }
        Err(refusal) => (Err(refusal), String::new()),
    };
    match outcome {
        Ok(Routed::Relayed(relayed)) => {
            relay::socks::finish(shared, stream, relayed).await;
            drop(permit);
        }
        Ok(Routed::Here(upstream, lease, client_permit, usage)) => {
            exchange.replied(Reply::Succeeded.code());
            // The reply's bound address stays unspecified: the upstream-facing local
            // address and port are the gateway's internals, not the client's business.
            if socks5::send_reply(&mut stream, Reply::Succeeded, UNSPECIFIED)
                .await
                .is_ok()
            {
                let account = TunnelAccount {
                    client_id: &client,
                    usage: &usage,
                    lease: &lease,
                    exchange: &mut exchange,
                };
                run_tunnel(shared, account, ClientSide::Socket(stream), upstream, &[]).await;
            }
            drop((lease, client_permit, permit));
        }
        Err(refusal) => {
            shared.metrics.refusal(refusal.code());
            tracing::debug!(%peer, code = refusal.code(), %refusal, "socks5 request refused");
            exchange.refused(&refusal);
            let reply = Reply::from_code(refusal.socks_reply());
            let _ = socks5::send_reply(&mut stream, reply, UNSPECIFIED).await;
        }
    }
}

/// Negotiation, credentials, request. The shield verdict is applied after the request is
/// read so the client gets a reply code rather than a bare close.
async fn handshake(
    shared: &Shared,
    stream: &mut TcpStream,
    peer: SocketAddr,
    shielded: Result<(), Refusal>,
) -> Result<Handshake, ProtoError> {
    let Some(credentials) = socks5::negotiate(stream, true).await? else {
        return Ok(Handshake::Closed);
    };
    if let Err(refusal) = shielded {
        // Do not spend a password hash on a client the shield refuses.
        socks5::send_auth_result(stream, true).await?;
        let target = socks5::read_request(stream).await?;
        return Ok(Handshake::Request(target, Err(refusal), String::new()));
    }
    // A stale view still authenticates (so the client learns "general failure", not
    // "bad password"); the refusal comes after the request.
    let (view, stale) = match shared.store.current() {
        Ok(view) => (view, None),
        Err(refusal) => match shared.store.view() {
            Some(view) => (view, Some(refusal)),
            None => {
                socks5::send_auth_result(stream, false).await?;
                return Ok(Handshake::Refused(refusal));
            }
        },
    };
    let authenticated = authenticate(
        &view,
        &credentials.username,
        &credentials.password,
        peer.ip(),
        shared.config().sessions.max_minutes,
    );
    if let Err(refusal @ (Refusal::AuthRequired | Refusal::BadSelector(_))) = &authenticated {
        shared.metrics.refusal(refusal.code());
        tracing::debug!(%peer, code = refusal.code(), %refusal, "socks5 authentication failed");
        socks5::send_auth_result(stream, false).await?;
        return Ok(Handshake::Refused(refusal.clone()));
    }
    socks5::send_auth_result(stream, true).await?;
    let target = socks5::read_request(stream).await?;
    let authenticated = match stale {
        Some(refusal) => Err(refusal),
        None => authenticated,
    };
    Ok(Handshake::Request(
        target,
        authenticated.map(Box::new),
        credentials.username,
    ))
}

/// What the client asked for: where to, under which username, from where.
struct Asked<'a> {
    target: TargetAddr,
    username: &'a str,
    peer: SocketAddr,
}

/// Where a request went: through a proxy of this gateway, or to the fleet member that
/// owns its key.
enum Routed {
    Here(
        Conn,
        crate::proxies::capacity::Lease,
        ConnectionPermit,
        Arc<UsageCell>,
    ),
    Relayed(relay::socks::Relayed),
}

async fn route(
    shared: &Shared,
    auth: &mut Authenticated,
    asked: Asked<'_>,
    exchange: &mut Exchange,
) -> Result<Routed, Refusal> {
    let Asked {
        target,
        username,
        peer,
    } = asked;
    // Re-read the view: the handshake may have spanned a snapshot swap.
    let view = shared.store.current()?;
    if let ClientPolicy::Limited(handle) = auth.client.policy {
        view.limiter
            .check(handle, peer.ip())
            .inspect_err(|_| shared.metrics.client_denials.increment(1))?;
    }
    // A keyed request another fleet member owns goes there (without a fleet: one load).
    if let Some(owner) = relay::decide(shared, auth) {
        let relayed =
            relay::socks::relay(shared, owner, auth, username, &target, peer, exchange).await?;
        if let Some(relayed) = relayed {
            return Ok(Routed::Relayed(relayed));
        }
    }
    admission::admit(shared, &auth.client, &target)?;
    let permit =
        ConnectionPermit::try_acquire(&auth.client.connections, auth.client.max_connections)?;
    let dialer = TunnelDialer {
        target,
        timeouts: DialTimeouts::of(&shared.config()),
        addresses: &shared.addresses,
    };
    let domain = crate::proxies::cooldowns::TargetDomain::new(&dialer.target);
    let route_target = crate::routing::route::RouteTarget {
        domain: Some(&domain),
        avoid: &[],
    };
    let routed = shared
        .router
        .route(&view, auth, route_target, &dialer)
        .await?;
    let proxy = &view.proxies[routed.index as usize];
    exchange.routed(&proxy.upstream, &proxy.id, &proxy.address, routed.attempts);
    let usage = shared.usage.cell(&auth.client.id, &proxy.upstream);
    usage.routed();
    Ok(Routed::Here(routed.value, routed.lease, permit, usage))
}
