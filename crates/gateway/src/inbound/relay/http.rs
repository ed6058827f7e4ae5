//! The HTTP listener's relays: a plain request goes over a pooled hop connection, its body
//! streamed up and the owner's answer streamed back; a `CONNECT` takes a hop connection
//! of its own, the client gets the owner's status and headers, and on `200` the bytes are
//! spliced both ways (the tunnel idle timeout applies; the tunnel keeps the client
//! connection's places, as a tunnel routed here does). An inspected `CONNECT` goes the
//! same way, before anything looks at inspection: the owner ends it with its leaf and
//! routes the requests inside with its sessions, this gateway only splices the bytes.

use super::{
    Target, TunnelAsk, fleet_headers, splice, strip_answer_hop_headers, strip_fleet_headers, tunnel,
};
use crate::access::Exchange;
use crate::fleet::hop_client::{SendFailure, TunnelAnswer};
use crate::fleet::metrics::RelayKind;
use crate::inbound::admission;
use crate::outbound::forward::{self, body::ProxyBody};
use crate::policy::limits::ConnectionPermit;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::state::Shared;
use http::header;
use http::{Method, Request, Response};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use proxypool_edge::Admitted;
use proxypool_proto::TargetAddr;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// How a relay ended.
#[derive(Debug)]
pub(crate) enum Relayed {
    /// The owner's answer, or this gateway's refusal.
    Answer(Result<Response<ProxyBody>, Refusal>),
    /// Route it here after all (this gateway is the next owner), the request as it
    /// came (but for its fleet headers).
    Here(Request<Incoming>),
}

/// What the relay needs of the client's connection.
pub(crate) struct Client<F> {
    pub peer: SocketAddr,
    /// Takes the connection's per-IP and global places along into a tunnel.
    pub take_slots: F,
}

/// Relays a request of the HTTP listener to `target`'s member.
pub(crate) async fn relay<F>(
    shared: &Arc<Shared>,
    target: Target,
    auth: &mut Authenticated,
    request: Request<Incoming>,
    client: Client<F>,
    exchange: &mut Exchange,
) -> Relayed
where
    F: FnOnce() -> Option<Admitted>,
{
    if request.method() == Method::CONNECT {
        connect(shared, target, auth, request, client, exchange).await
    } else {
        plain(shared, target, auth, request, client.peer, exchange).await
    }
}

/// The username the client sent (its client id alone when a certificate named it).
fn username_of<B>(request: &Request<B>, auth: &Authenticated) -> String {
    request
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(proxypool_proto::http_connect::parse_basic_auth)
        .map_or_else(|| auth.client.id.to_string(), |(username, _)| username)
}

async fn plain(
    shared: &Arc<Shared>,
    mut target: Target,
    auth: &mut Authenticated,
    mut request: Request<Incoming>,
    peer: SocketAddr,
    exchange: &mut Exchange,
) -> Relayed {
    let admitted = forward::target_of(request.uri()).and_then(|destination| {
        exchange.target(&destination);
        admission::admit(shared, &auth.client, &destination)?;
        ConnectionPermit::try_acquire(&auth.client.connections, auth.client.max_connections)
    });
    let permit = match admitted {
        Ok(permit) => permit,
        Err(refusal) => return Relayed::Answer(Err(refusal)),
    };
    let username = username_of(&request, auth);
    forward::strip_hop_by_hop(request.headers_mut());
    let mut retried = false;
    loop {
        let headers = request.headers_mut();
        if let Err(refusal) = fleet_headers(headers, auth, &username, peer, target.moved) {
            return Relayed::Answer(Err(refusal));
        }
        let started = Instant::now();
        let timeouts = target.timeouts(shared);
        match target
            .fleet
            .hops
            .send(&target.member, timeouts, request)
            .await
        {
            Ok(response) => {
                target.answered(RelayKind::Http, response.status().is_success(), started);
                // The owner writes the access line.
                exchange.hand_over().forget();
                let mut response = response.map(|body| {
                    // The client's place is held until the answer's last byte.
                    let held = body.map_frame(move |frame| {
                        let _ = &permit;
                        frame
                    });
                    ProxyBody::Relayed(held.boxed_unsync())
                });
                strip_answer_hop_headers(response.headers_mut());
                return Relayed::Answer(Ok(response));
            }
            Err(SendFailure { error, unsent }) => {
                let next = target.failed(shared, RelayKind::Http, auth, &error);
                match (unsent, next) {
                    (Some(back), Some(next)) if !retried => {
                        retried = true;
                        request = back;
                        target = next;
                    }
                    (Some(mut back), None) if !retried => {
                        strip_fleet_headers(back.headers_mut());
                        return Relayed::Here(back);
                    }
                    // Sent (its body may be gone) or failed twice.
                    _ => return Relayed::Answer(Err(Refusal::FleetUnavailable)),
                }
            }
        }
    }
}

async fn connect<F>(
    shared: &Arc<Shared>,
    target: Target,
    auth: &mut Authenticated,
    request: Request<Incoming>,
    client: Client<F>,
    exchange: &mut Exchange,
) -> Relayed
where
    F: FnOnce() -> Option<Admitted>,
{
    let checked = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| Refusal::BadRequest("CONNECT needs host:port".into()))
        .and_then(|authority| {
            let destination: TargetAddr = authority
                .parse()
                .map_err(|error| Refusal::BadRequest(format!("bad CONNECT target: {error}")))?;
            exchange.target(&destination);
            admission::admit(shared, &auth.client, &destination)?;
            Ok((authority, destination))
        });
    let authority = match checked {
        Ok((authority, _)) => authority,
        Err(refusal) => return Relayed::Answer(Err(refusal)),
    };
    let permit = match ConnectionPermit::try_acquire(
        &auth.client.connections,
        auth.client.max_connections,
    ) {
        Ok(permit) => permit,
        Err(refusal) => return Relayed::Answer(Err(refusal)),
    };
    let username = username_of(&request, auth);
    let ask = TunnelAsk {
        authority: &authority,
        username: &username,
        peer: client.peer,
    };
    let answer = match tunnel(shared, target, RelayKind::Connect, auth, ask, exchange).await {
        Ok(Some(answer)) => answer,
        Ok(None) => return Relayed::Here(request),
        Err(refusal) => return Relayed::Answer(Err(refusal)),
    };
    match answer {
        TunnelAnswer::Open { head, stream } => {
            // The tunnel outlives the HTTP connection task: it carries the connection's
            // places.
            let slots = (client.take_slots)();
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let Ok(upgraded) = hyper::upgrade::on(request).await else {
                    return;
                };
                splice(&shared, TokioIo::new(upgraded), stream).await;
                drop((permit, slots));
            });
            let mut response = Response::from_parts(head, ProxyBody::empty());
            strip_answer_hop_headers(response.headers_mut());
            response.headers_mut().remove(header::CONTENT_LENGTH);
            Relayed::Answer(Ok(response))
        }
        TunnelAnswer::Refused(response) => {
            let mut response = response.map(|body| ProxyBody::Relayed(body.boxed_unsync()));
            strip_answer_hop_headers(response.headers_mut());
            Relayed::Answer(Ok(response))
        }
    }
}
