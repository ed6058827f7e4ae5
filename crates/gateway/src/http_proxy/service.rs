//! One HTTP proxy request: shield (the first request of a connection takes the verdict
//! charged at accept) → snapshot (fail closed when stale) → authenticate →
//! client policy → CONNECT tunnel or plain forward. Every refusal becomes a response with
//! `X-Proxypool-Error`.

use super::{connect, response};
use crate::accept::{Admitted, ShieldAtAccept};
use crate::admission::{ClientPolicy, Shield};
use crate::auth::{Authenticated, authenticate};
use crate::forward::{self, body::ProxyBody};
use crate::refusal::Refusal;
use crate::snapshot::SnapshotView;
use crate::state::Shared;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response};
use hyper::body::Incoming;
use proxypool_core::LockExt;
use proxypool_throttle::ConnectionScopes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Per-connection state shared by the connection's requests.
#[derive(Debug)]
pub(super) struct ConnectionState {
    peer: SocketAddr,
    /// The shield this connection was admitted by, and its scopes in it.
    shield: Option<(Arc<Shield>, Mutex<ConnectionScopes>)>,
    /// The shield's verdict charged at accept, for the connection's first request.
    prepaid: Mutex<Option<Result<(), Refusal>>>,
    /// The last credentials verified on this connection, for the view they were checked in.
    auth: Mutex<Option<CachedAuth>>,
    in_flight: AtomicUsize,
    /// The connection's per-IP and global slots; a CONNECT tunnel takes them along.
    permit: Mutex<Option<Admitted>>,
}

#[derive(Debug)]
struct CachedAuth {
    generation: u64,
    header: HeaderValue,
    auth: Authenticated,
}

impl ConnectionState {
    pub(super) fn new(peer: SocketAddr, permit: Admitted, shield: ShieldAtAccept) -> Self {
        Self {
            peer,
            shield: shield
                .shield
                .map(|(shield, scopes)| (shield, Mutex::new(scopes))),
            prepaid: Mutex::new(Some(shield.verdict)),
            auth: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            permit: Mutex::new(Some(permit)),
        }
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub(super) fn take_permit(&self) -> Option<Admitted> {
        self.permit.lock_or_recover().take()
    }
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one request; never fails (refusals are responses).
pub(super) async fn handle(
    shared: &Arc<Shared>,
    state: &ConnectionState,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    state.in_flight.fetch_add(1, Ordering::Relaxed);
    let _in_flight = InFlight(&state.in_flight);
    match admit_and_route(shared, state, request).await {
        Ok(response) => response,
        Err(refusal) => {
            shared.metrics.refusal(refusal.code());
            tracing::debug!(peer = %state.peer, code = refusal.code(), %refusal, "http request refused");
            response::refusal(&refusal)
        }
    }
}

async fn admit_and_route(
    shared: &Arc<Shared>,
    state: &ConnectionState,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Refusal> {
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
    let auth = authenticate_request(shared, state, &view, request.headers())?;
    if let ClientPolicy::Limited(handle) = auth.client.policy {
        view.limiter
            .check(handle, state.peer.ip())
            .inspect_err(|_| shared.metrics.client_denials.increment(1))?;
    }
    if request.method() == Method::CONNECT {
        shared.metrics.connect_requests.increment(1);
        connect::connect(shared, &view, &auth, request, state).await
    } else {
        shared.metrics.http_requests.increment(1);
        forward::forward(shared, &view, &auth, request).await
    }
}

fn authenticate_request(
    shared: &Shared,
    state: &ConnectionState,
    view: &SnapshotView,
    headers: &HeaderMap,
) -> Result<Authenticated, Refusal> {
    let header = headers
        .get(header::PROXY_AUTHORIZATION)
        .ok_or(Refusal::AuthRequired)?;
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
