//! One HTTP proxy request: shield (the first request of a connection takes the verdict
//! charged at accept) → snapshot (fail closed when stale) → authenticate (credentials, or
//! on the TLS listener a client certificate) →
//! client policy → CONNECT tunnel or plain forward. Every refusal becomes a response with
//! `X-Proxypool-Error`. A fleet member's hop request ([`fleet_auth`]) skips what its entry
//! charged (shield, client rate limit and connection cap) and is never relayed again.

use super::connection::{CachedAuth, ConnectionState};
use super::{canonical, connect, fleet_auth, response};
use crate::access::{Exchange, Kind};
use crate::inbound::admission;
use crate::inbound::auth::authenticate;
use crate::inbound::client_cert;
use crate::inbound::relay;
use crate::outbound::forward::{self, body::ProxyBody};
use crate::policy::limits::ClientPolicy;
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::snapshot::SnapshotView;
use crate::state::Shared;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response};
use hyper::body::Incoming;
use proxypool_core::LockExt;
use std::sync::Arc;

/// One request in flight on its connection (the count the idle watchdog and the global
/// cap read), ended when the handler returns however it returns.
struct InFlight<'a>(&'a ConnectionState);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// Serves one request; never fails (refusals are responses). Its account ends with the
/// response: here for a gateway's own answer, with the streamed body or the tunnel else.
pub(super) async fn handle(
    shared: &Arc<Shared>,
    state: &ConnectionState,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    state.request_started();
    let _in_flight = InFlight(state);
    let kind = if request.method() == Method::CONNECT {
        Kind::Connect
    } else {
        Kind::Http
    };
    let mut exchange = Exchange::start(&shared.access, kind, state.peer);
    // As the client wrote it, for a refusal before the target is parsed and checked (which
    // then puts the canonical form in its place).
    exchange.request(&request);
    match admit_and_route(shared, state, request, &mut exchange).await {
        Ok(mut response) => {
            exchange.answered(response.status().as_u16());
            exchange.response_headers(response.headers());
            if let ProxyBody::Upstream(body) = response.body_mut() {
                body.account(exchange.hand_over());
            }
            response
        }
        Err(refusal) => {
            shared.metrics.refusal(refusal.code());
            tracing::debug!(peer = %state.peer, code = refusal.code(), %refusal, "http request refused");
            exchange.refused(&refusal);
            response::refusal(&refusal)
        }
    }
}

async fn admit_and_route(
    shared: &Arc<Shared>,
    state: &ConnectionState,
    mut request: Request<Incoming>,
    exchange: &mut Exchange,
) -> Result<Response<ProxyBody>, Refusal> {
    // A fleet member's hop: the entry charged the shield and the client's limits.
    if let Some(member) = &state.fleet_peer {
        let view = shared.store.current()?;
        let auth = fleet_auth::authenticate(shared, member, &view, &request, exchange)?;
        return route(shared, state, &view, &auth, request, exchange).await;
    }
    // The first request was charged at accept; each later one is charged here.
    let prepaid = state.prepaid.lock_or_recover().take();
    if let Some(verdict) = prepaid {
        verdict?;
    } else if let Some((shield, scopes)) = &state.shield {
        let mut scopes = scopes.lock_or_recover();
        shield.check(&mut scopes).inspect_err(|_| {
            shared.metrics.shield_denials.increment(1);
        })?;
    }
    let view = shared.store.current()?;
    let mut auth = authenticate_request(shared, state, &view, request.headers())?;
    exchange.client(&auth.client.id);
    if let ClientPolicy::Limited(handle) = auth.client.policy {
        view.limiter
            .check(handle, state.peer.ip())
            .inspect_err(|_| shared.metrics.client_denials.increment(1))?;
    }
    // A keyed request another fleet member owns goes there (without a fleet: one load).
    if let Some(target) = relay::decide(shared, &mut auth) {
        let client = relay::http::Client {
            peer: state.peer,
            take_slots: || state.take_permit(),
        };
        match relay::http::relay(shared, target, &mut auth, request, client, exchange).await {
            relay::http::Relayed::Answer(answer) => return answer,
            relay::http::Relayed::Here(back) => request = back,
        }
    }
    route(shared, state, &view, &auth, request, exchange).await
}

/// An admitted request routed here: a `CONNECT` tunnel or a plain forward.
async fn route(
    shared: &Arc<Shared>,
    state: &ConnectionState,
    view: &SnapshotView,
    auth: &Authenticated,
    mut request: Request<Incoming>,
    exchange: &mut Exchange,
) -> Result<Response<ProxyBody>, Refusal> {
    if request.method() == Method::CONNECT {
        shared.metrics.connect_requests.increment(1);
        connect::connect(shared, view, auth, request, state, exchange).await
    } else {
        shared.metrics.http_requests.increment(1);
        let target = forward::target_of(request.uri())?;
        exchange.target(&target);
        // Before the router: a pooled connection to an HTTP proxy would carry any target.
        admission::admit(shared, &auth.client, &target)?;
        canonical::canonical_host(&mut request, &target);
        let permit = fleet_auth::connection_permit(state, &auth.client)?;
        let admitted = forward::Admitted {
            target,
            permit,
            scheme: forward::Scheme::Http,
        };
        forward::forward(shared, view, auth, admitted, request, exchange).await
    }
}

/// The request's client: by `Proxy-Authorization`, or on the TLS listener with mutual TLS
/// by a client certificate named in a client's `tls_names` ([`client_cert`]). Both given,
/// they must name the same client (the header's password checked as always).
fn authenticate_request(
    shared: &Shared,
    state: &ConnectionState,
    view: &SnapshotView,
    headers: &HeaderMap,
) -> Result<Authenticated, Refusal> {
    let by_certificate = state
        .certificate
        .as_ref()
        .and_then(|certificate| certificate.client(view));
    let Some(header) = headers.get(header::PROXY_AUTHORIZATION) else {
        return match by_certificate {
            Some(client) => client_cert::by_certificate(client, state.peer.ip()),
            None => Err(Refusal::AuthRequired),
        };
    };
    let auth = authenticate_header(shared, state, view, header)?;
    if let Some(client) = by_certificate
        && client.id != auth.client.id
    {
        tracing::debug!(
            peer = %state.peer,
            certificate = %client.id,
            "Proxy-Authorization names another client than the client certificate"
        );
        return Err(Refusal::AuthRequired);
    }
    Ok(auth)
}

/// The client of a `Proxy-Authorization` header, from the connection's cache when the
/// same header was verified in the same view.
fn authenticate_header(
    shared: &Shared,
    state: &ConnectionState,
    view: &SnapshotView,
    header: &HeaderValue,
) -> Result<Authenticated, Refusal> {
    {
        let cached = state.auth.lock_or_recover();
        if let Some(cached) = cached.as_ref()
            && cached.generation == view.generation
            && cached.header == header
        {
            return Ok(cached.auth.clone());
        }
    }
    let text = header.to_str().map_err(|_| Refusal::AuthRequired)?;
    let (username, password) =
        proxypool_proto::http_connect::parse_basic_auth(text).ok_or(Refusal::AuthRequired)?;
    let auth = authenticate(
        view,
        &username,
        &password,
        state.peer.ip(),
        shared.config().sessions.max_minutes,
    )?;
    *state.auth.lock_or_recover() = Some(CachedAuth {
        generation: view.generation,
        header: header.clone(),
        auth: auth.clone(),
    });
    Ok(auth)
}
