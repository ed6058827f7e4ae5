//! HTTP `CONNECT`: dial a tunnel through an upstream proxy first (so a failure is still a
//! proper 502/503), answer 200, then relay the upgraded connection.

use super::connection::ConnectionState;
use crate::access::Exchange;
use crate::inbound::admission;
use crate::io::ActivityIo;
use crate::outbound::dial::{DialTimeouts, TunnelDialer};
use crate::outbound::forward::body::ProxyBody;
use crate::outbound::relay::{ClientSide, TunnelAccount, run_tunnel};
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::route::{RouteTarget, SESSION_HEADER, name_the_proxy};
use crate::snapshot::SnapshotView;
use crate::state::Shared;
use http::header::{HeaderName, HeaderValue};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use proxypool_proto::TargetAddr;
use std::sync::Arc;

/// Handles one `CONNECT host:port`.
pub(super) async fn connect(
    shared: &Arc<Shared>,
    view: &SnapshotView,
    auth: &Authenticated,
    request: Request<Incoming>,
    state: &ConnectionState,
    exchange: &mut Exchange,
) -> Result<Response<ProxyBody>, Refusal> {
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| Refusal::BadRequest("CONNECT needs host:port".into()))?;
    let target: TargetAddr = authority
        .parse()
        .map_err(|error| Refusal::BadRequest(format!("bad CONNECT target: {error}")))?;
    exchange.target(&target);
    admission::admit(shared, &auth.client, &target)?;
    let permit = super::fleet_auth::connection_permit(state, &auth.client)?;
    // An inspected tunnel ends here, nothing routed for it (`crate::inspection`).
    let inspection = shared.inspection.load_full();
    if let Some(authority) = crate::inspection::wanted(inspection, &shared.config(), auth, &target)
    {
        let handover = crate::inspection::Handover {
            shared: Arc::clone(shared),
            // On a fleet hop, the client the entry saw (its allowlist and limits apply to
            // the requests inside as at the entry), never the relaying member.
            peer: super::fleet_auth::client_address(state, request.headers()),
            shield: state.shield.as_ref().map(|(shield, _)| Arc::clone(shield)),
            slots: state.take_permit(),
            permit,
            admit: admission::admit,
            refuse: super::response::refusal,
        };
        return Ok(crate::inspection::intercept(
            handover, authority, auth, target, request, exchange,
        ));
    }
    let timeouts = DialTimeouts::of(&shared.config());
    let dialer = TunnelDialer {
        target,
        timeouts,
        addresses: &shared.addresses,
    };
    let domain = crate::proxies::cooldowns::TargetDomain::new(&dialer.target);
    let route_target = RouteTarget {
        domain: Some(&domain),
        avoid: &[],
    };
    let routed = shared
        .router
        .route(view, auth, route_target, &dialer)
        .await?;
    let proxy = &view.proxies[routed.index as usize];
    exchange.routed(&proxy.upstream, &proxy.id, &proxy.address, routed.attempts);
    // The 200 goes out with the response below; the tunnel's account goes with the tunnel.
    exchange.answered(200);
    let mut exchange = exchange.hand_over();
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
        // Unwrap back to the raw socket so the relay can wait without buffers. A client
        // of the TLS listener cannot be: its upgraded stream (TLS inside, and whatever
        // hyper read ahead) is relayed with buffers.
        let (client, leftover) = match upgraded.downcast::<TokioIo<ActivityIo>>() {
            // Copy what the client sent early: the slice would pin hyper's whole read
            // buffer for the life of the tunnel (8 KiB per idle tunnel).
            Ok(parts) => (
                ClientSide::Socket(parts.io.into_inner().into_inner()),
                parts.read_buf.to_vec(),
            ),
            Err(upgraded) => (
                ClientSide::Stream(Box::new(TokioIo::new(upgraded))),
                Vec::new(),
            ),
        };
        let account = TunnelAccount {
            client_id: &client_id,
            usage: &usage,
            lease: &lease,
            exchange: &mut exchange,
        };
        run_tunnel(&shared_for_tunnel, account, client, upstream, &leftover).await;
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
    name_the_proxy(
        response.headers_mut(),
        view,
        proxy,
        &auth.client.id,
        shared.clock.now(),
        routed.attempts,
    );
    Ok(response)
}
