//! Forwarding requests the gateway reads (absolute-form plain HTTP, and the inner requests
//! of an inspected `CONNECT`): route the request to a proxy, reuse a kept-alive upstream
//! connection when one is idle, and stream the response back.
//!
//! [`Scheme::Http`]: through an HTTP proxy the request stays in absolute form with the
//! proxy's Basic credentials; through a SOCKS5 proxy it goes in origin form over a tunnel
//! to the target. [`Scheme::Https`] (an inspected `CONNECT`'s inner request): whatever the
//! proxy's protocol, a tunnel to the target through it (HTTP `CONNECT` or SOCKS5), then
//! TLS to the origin made by the gateway (server name the target's host, or its address
//! for a numeric target; ALPN `http/1.1`), verified by [`crate::origin_tls`]
//! (`[gateway.inspection] origin_ca`, else the public roots); the request goes in origin
//! form with the client's `Host` and header case, never with the proxy's credentials, and
//! the connection is pooled per (proxy, `https://host:port`). The scheme costs plain http
//! one branch and nothing else.
//!
//! Failures before the request is sent retry on another proxy (the router's bound);
//! failures after it are a 502 (a 504 when the answer does not come in time), since the
//! request body may be gone. Once the proxy took the request, waiting for the answer is
//! waiting for the origin, and a tunnel that fails was open to the origin: those
//! are the target's failures and never count against the proxy
//! ([`crate::failure`]). For https the same holds of the TLS handshake: a tunnel that cannot
//! be set up is the proxy's (retried elsewhere, as for a `CONNECT`), a handshake that
//! fails or times out once the tunnel is up is the target's (`target_tls_error`,
//! `target_timeout`). An origin certificate that fails verification is answered 502
//! `origin_certificate_invalid` saying why (unknown issuer, expired, another name): never
//! a silent downgrade, not counted against the proxy, and not retried through another,
//! since every exit reaches the same origin and would be shown the same certificate. A
//! proxy that intercepts TLS would cause the same refusal; it is not told apart per request
//! (blaming the proxy would let one tenant's origin take a shared proxy out of rotation),
//! but every refusal is logged with the proxy's id, so such a proxy shows as refusals
//! through it alone, across origins.
//!
//! A bodyless GET, HEAD
//! or OPTIONS is also sent again through another proxy when the origin answers with a ban
//! status (the proxy then cools down for the target's domain, `crate::routing::bans`) or the
//! upstream with its own 502/504, at most `bans.max_retries` times, for either scheme.
//! Every response says
//! which proxy carried it and how many were tried (`X-Proxypool-Proxy`,
//! `X-Proxypool-Attempts`); any `X-Proxypool-*` header from the upstream or the origin is
//! dropped first, so the client reads only the gateway's own.
//!
//! A WebSocket handshake inside an inspected `CONNECT` keeps its `Upgrade` and takes a
//! connection of its own; on `101` both upgraded streams are relayed like a tunnel
//! ([`upgrade`]). Plain http never upgrades: `Upgrade` is stripped with the other
//! hop-by-hop headers.
//!
//! Every upstream connection closes when its proxy's lease goes ([`crate::proxies::cutoff`]): kept
//! alive in the pool or busy with a response (which then ends short), it is never used
//! past the lease.

pub(crate) mod body;
mod headers;
mod scheme;
mod upgrade;
mod upstream;

pub(crate) use headers::{FLEET_HEADER_PREFIX, retain_in_order, strip_hop_by_hop, target_of};
pub(crate) use scheme::Scheme;

use crate::access::Exchange;
use crate::context::GatewayContext;
use crate::failure::Fault;
use crate::outbound::dial::DialTimeouts;
use crate::policy::ban_statuses::BanStatuses;
use crate::policy::limits::ConnectionPermit;
use crate::proxies::capacity::Lease;
use crate::proxies::cooldowns::TargetDomain;
use crate::proxies::idle_pool::PoolKey;
use crate::proxies::request_body::CountingBody;
use crate::refusal::{Refusal, TARGET_TIMEOUT};
use crate::routing::dialer::DialFailure;
use crate::routing::request::Authenticated;
use crate::routing::route::{self, RouteTarget, SESSION_HEADER};
use crate::snapshot::{SnapshotView, ViewProxy};
use crate::usage::UsageCell;
use body::{ProxyBody, Release};
use headers::{prepare, strip_request_hop_by_hop, strip_response_headers};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use proxypool_core::Protocol;
use proxypool_proto::TargetAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use upgrade::{ClientUpgrade, Held, OriginUpgrade};
use upstream::{ForwardDialer, HttpsLink, OpenFailure, Upstream, open};

/// A request the inbound side admitted: its target (checked against the destination
/// policy), the client's place under its connection cap, held until the response ends,
/// and how it reaches the origin.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub target: TargetAddr,
    pub permit: ConnectionPermit,
    pub scheme: Scheme,
}

/// Forwards one request (an absolute-form `http://` request, or with [`Scheme::Https`]
/// an inner request of an inspected `CONNECT`), again through another proxy when the
/// origin bans the first one or its upstream fails on its own (`[gateway.bans]`).
pub(crate) async fn forward(
    shared: &GatewayContext,
    view: &SnapshotView,
    auth: &Authenticated,
    admitted: Admitted,
    mut request: Request<Incoming>,
    exchange: &mut Exchange,
) -> Result<Response<ProxyBody>, Refusal> {
    let Admitted {
        target,
        permit,
        scheme,
    } = admitted;
    let upload_meter = exchange.upload_meter();
    // The one branch plain http pays: only an inspected request may upgrade.
    let (https, upgrade) = match scheme {
        Scheme::Http => (None, None),
        Scheme::Https => {
            let upgrade = ClientUpgrade::take(&mut request);
            let link = HttpsLink {
                origin: shared.origin_tls.load_full(),
                pooled: upgrade.is_none(),
            };
            (Some(link), upgrade)
        }
    };
    strip_request_hop_by_hop(request.headers_mut());
    if let Some(upgrade) = &upgrade {
        upgrade.restore(request.headers_mut());
    }
    let domain = TargetDomain::new(&target);
    let (ban_statuses, max_retries) = {
        let config = shared.config();
        let statuses = auth
            .client
            .ban_statuses
            .unwrap_or_else(|| BanStatuses::of(&config.bans.statuses));
        (statuses, config.bans.max_retries)
    };
    // Sent again only when nothing of it can be lost or done twice: no body, and a method
    // that is safe to repeat.
    // The copy is made only when a retry may use it.
    let replay = (max_retries > 0).then(|| Replay::of(&request)).flatten();
    let max_retries = if replay.is_some() { max_retries } else { 0 };
    let mut avoid: Vec<u32> = Vec::new();
    let mut attempts = 0u32;
    let mut first = Some(request);
    // The answer a retry would replace: the client gets it when no other proxy can try.
    let mut previous: Option<Sent> = None;
    loop {
        let request = match (first.take(), &replay) {
            (Some(request), _) => Outgoing::Client(request),
            (None, Some(replay)) => Outgoing::Again(replay.rebuild()),
            (None, None) => unreachable!("only a replayable request is sent twice"),
        };
        let target_of_route = RouteTarget {
            domain: Some(&domain),
            avoid: &avoid,
        };
        let meter = upload_meter.clone();
        let link = https.as_ref();
        let sent = match send_once(
            shared,
            view,
            auth,
            (&target, link),
            target_of_route,
            request,
            meter,
        )
        .await
        {
            Ok(sent) => sent,
            Err(refusal) => match previous {
                Some(previous) => {
                    let proxy = &view.proxies[previous.index as usize];
                    exchange.routed(&proxy.upstream, &proxy.id, &proxy.address, attempts);
                    let answer = Answer {
                        proxy,
                        attempts,
                        permit,
                    };
                    return Ok(previous.into_response(shared, view, auth, answer, None, exchange));
                }
                None => return Err(refusal),
            },
        };
        attempts += sent.attempts;
        let proxy = &view.proxies[sent.index as usize];
        let status = sent.response.status().as_u16();
        let banned = ban_statuses.contains(status);
        if banned && let Some(domain) = domain.get() {
            shared
                .bans
                .ban(view, proxy, domain, shared.clock.now(), &shared.metrics);
        }
        let upstream_error = matches!(status, 502 | 504);
        if upstream_error {
            // The upstream could not reach the target (or not in time): the target's
            // failure, as a CONNECT answered 502/504 is, never the proxy's.
            shared.metrics.target_failure(if status == 504 {
                TARGET_TIMEOUT
            } else {
                "target_unreachable"
            });
        }
        if (banned || upstream_error) && (avoid.len() as u32) < max_retries {
            if banned {
                shared.metrics.ban_retries.increment(1);
            } else {
                shared.metrics.status_retries.increment(1);
            }
            tracing::debug!(proxy = %proxy.id, status, "sending the request again through another proxy");
            avoid.push(sent.index);
            previous = Some(sent);
            continue;
        }
        exchange.routed(&proxy.upstream, &proxy.id, &proxy.address, attempts);
        let answer = Answer {
            proxy,
            attempts,
            permit,
        };
        return Ok(sent.into_response(shared, view, auth, answer, upgrade, exchange));
    }
}

/// What is needed to send a bodyless, idempotent request again.
#[derive(Debug)]
struct Replay {
    method: Method,
    uri: Uri,
    version: http::Version,
    headers: HeaderMap,
    /// Carries how the client spelled each header name, so a retry spells them alike.
    extensions: http::Extensions,
}

impl Replay {
    /// `Some` for a GET, HEAD or OPTIONS without a body.
    fn of(request: &Request<Incoming>) -> Option<Replay> {
        let idempotent = matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
        (idempotent && request.body().is_end_stream()).then(|| Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
            extensions: request.extensions().clone(),
        })
    }

    fn rebuild(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        *request.extensions_mut() = self.extensions.clone();
        request
    }
}

/// The request as the client sent it, or a bodyless copy sent again.
enum Outgoing {
    Client(Request<Incoming>),
    Again(Request<()>),
}

/// One request sent through one routed proxy, its response head received.
struct Sent {
    response: Response<Incoming>,
    index: u32,
    attempts: u32,
    session: crate::routing::rotation::SessionOutcome,
    release: (PoolKey, SendRequest<CountingBody>, Lease),
    usage: Arc<UsageCell>,
}

/// The answer's proxy, how many were tried, and the client's place to hold till its end.
struct Answer<'v> {
    proxy: &'v ViewProxy,
    attempts: u32,
    permit: ConnectionPermit,
}

impl Sent {
    /// The client's response: the upstream's, streamed, with what the gateway adds. An
    /// origin's `101` to the upgrade the client asked for starts the relay of both
    /// upgraded streams (its account goes with it).
    fn into_response(
        self,
        shared: &GatewayContext,
        view: &SnapshotView,
        auth: &Authenticated,
        answer: Answer<'_>,
        upgrade: Option<ClientUpgrade>,
        exchange: &mut Exchange,
    ) -> Response<ProxyBody> {
        let Answer {
            proxy,
            attempts,
            permit,
        } = answer;
        let mut response = self.response;
        let switched = match upgrade {
            Some(client) if response.status() == http::StatusCode::SWITCHING_PROTOCOLS => {
                Some((client, OriginUpgrade::take(&mut response)))
            }
            _ => None,
        };
        let (mut parts, body) = response.into_parts();
        strip_response_headers(&mut parts.headers);
        if let Some((client, origin)) = &switched {
            origin.restore(&mut parts.headers, client);
        }
        if let Some(value) = self.session.header_value() {
            parts.headers.insert(
                HeaderName::from_static(SESSION_HEADER),
                HeaderValue::from_static(value),
            );
        }
        route::name_the_proxy(
            &mut parts.headers,
            view,
            proxy,
            &auth.client.id,
            shared.clock.now(),
            attempts,
        );
        let (key, sender, lease) = self.release;
        if let Some((client, origin)) = switched {
            // The connection is the upgrade's now: never back to the pool.
            drop((body, sender));
            exchange.answered(parts.status.as_u16());
            let held = Held {
                lease,
                permit,
                usage: self.usage,
                exchange: exchange.hand_over(),
                client_id: auth.client.id.to_string(),
            };
            upgrade::relay(shared, client, origin, held);
            return Response::from_parts(parts, ProxyBody::empty());
        }
        let release = Release {
            key,
            sender,
            pool_cap: shared.config().dial.pool_idle_per_proxy,
            guards: (lease, permit),
        };
        Response::from_parts(
            parts,
            ProxyBody::upstream(body, self.usage.bytes_down.clone(), release),
        )
    }
}

/// Routes `request` to a proxy and waits for the response head; `https` (with its
/// target) when the request goes over TLS to the origin.
async fn send_once(
    shared: &GatewayContext,
    view: &SnapshotView,
    auth: &Authenticated,
    (target, https): (&TargetAddr, Option<&HttpsLink>),
    route_target: RouteTarget<'_>,
    request: Outgoing,
    upload_meter: Option<Arc<AtomicU64>>,
) -> Result<Sent, Refusal> {
    let timeouts = DialTimeouts::of(&shared.config());
    let scheme = match https {
        None => Scheme::Http,
        Some(_) => Scheme::Https,
    };
    let dialer = ForwardDialer {
        target,
        timeouts,
        addresses: &shared.addresses,
        pool_idle: shared.pool_idle(),
        clock: &*shared.clock,
        https,
    };
    let routed = shared
        .router
        .route(view, auth, route_target, &dialer)
        .await?;
    let proxy = &view.proxies[routed.index as usize];
    // The proxy reached the origin and the origin's certificate failed verification:
    // the lease goes with `routed`, nothing is counted against the proxy.
    let Upstream {
        mut sender,
        key,
        reused,
    } = routed.value?;
    let usage = shared.usage.cell(&auth.client.id, &proxy.upstream);
    usage.routed();
    // A proxy's failure from here on is charged to this pair; a target's to nobody.
    let fail = |failure: DialFailure| {
        if failure.fault == Fault::Proxy {
            usage.failed();
        }
        fail(shared, proxy, failure)
    };
    // Over a tunnel (SOCKS5, or any for https) the proxy's part is done: the connection
    // reaches the origin.
    let through_tunnel = https.is_some() || proxy.protocol == Protocol::Socks5;
    let mut request = match request {
        Outgoing::Client(request) => {
            request.map(|b| CountingBody::new(b, usage.bytes_up.clone(), upload_meter))
        }
        Outgoing::Again(request) => request.map(|()| CountingBody::empty(usage.bytes_up.clone())),
    };
    prepare(proxy, &mut request, target, scheme);

    let mut attempt_fresh = reused;
    let response = loop {
        let sent = tokio::time::timeout(timeouts.handshake, sender.try_send_request(request)).await;
        match sent {
            Ok(Ok(response)) => break response,
            Ok(Err(mut error)) => match error.take_message() {
                // Never written: the pooled connection had just closed. One fresh try.
                Some(unsent) if attempt_fresh => {
                    attempt_fresh = false;
                    request = unsent;
                    let opened = open(
                        proxy,
                        target,
                        https,
                        timeouts,
                        &shared.addresses,
                        &*shared.clock,
                    );
                    sender = match opened.await {
                        Ok(sender) => sender,
                        Err(OpenFailure::Dial(failure)) => return Err(fail(failure)),
                        Err(OpenFailure::Refused(refusal)) => return Err(refusal),
                    };
                }
                // An HTTP proxy answers a failed origin itself: closing on us is its fault.
                _ if !through_tunnel => {
                    return Err(fail(DialFailure::proxy("upstream_request_failed")));
                }
                _ => return Err(fail(DialFailure::target_closed())),
            },
            // The proxy took the request and waits for the origin (or relays to it).
            Err(_) => return Err(fail(DialFailure::target_timeout())),
        }
    };
    // Over a tunnel a 407 is the origin's own answer.
    if response.status() == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED && !through_tunnel {
        // The upstream refused our credentials: never pass its 407 on (the client would
        // think the gateway wants other credentials).
        return Err(fail(DialFailure::proxy("proxy_auth_rejected")));
    }
    Ok(Sent {
        response,
        index: routed.index,
        attempts: routed.attempts,
        session: routed.session,
        release: (key, sender, routed.lease),
        usage,
    })
}

/// Counts `failure` against the proxy when it is the proxy's (see [`Fault`]).
fn fail(shared: &GatewayContext, proxy: &ViewProxy, failure: DialFailure) -> Refusal {
    match failure.fault {
        Fault::Proxy => {
            shared.metrics.upstream_failure(failure.reason);
            proxy.slot.record_failure(shared.clock.monotonic_ms());
        }
        Fault::Target => shared.metrics.target_failure(failure.reason),
    }
    Refusal::UpstreamFailed {
        reason: failure.reason,
        socks: failure.socks,
    }
}
