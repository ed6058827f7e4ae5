//! The per-IP token-bucket shield (`proxypool-throttle`), the first admission layer.
//!
//! It runs before authentication, keyed by the peer address only (never a forwarded-for
//! header, which the client controls), so an anonymous flood costs one shard lookup per
//! request and never reaches token verification, the quota store or the pool.

use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use proxypool_edge::Peer;
use proxypool_throttle::Reason;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The peer address of the connection. Servers started with [`crate::serve`] provide it
/// (as a [`Peer`]; axum's `into_make_service_with_connect_info::<SocketAddr>` as a
/// `ConnectInfo`); without it every request shares one bucket, which fails closed rather
/// than open.
pub(crate) fn peer_ip(request: &Request) -> IpAddr {
    peer_of(request.extensions()).map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |peer| peer.ip())
}

/// The client's address as the request carries it (see [`peer_ip`]); behind a trusted
/// load balancer, the one its `X-Forwarded-For` names (`admission::forwarded`).
pub(crate) fn peer_of(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions.get::<Peer>().map(|peer| peer.0).or_else(|| {
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| info.0)
    })
}

/// Middleware: deny with 429 `rate_limited` and `Retry-After` when the peer's bucket is empty.
pub(crate) async fn shield(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    // Liveness probes come from a few addresses, often, cost nothing and must not be
    // throttled into reporting a healthy server down. `/readyz` reaches the stores (if
    // only once a second, `crate::readiness`), so it is charged like any request: a probe
    // every few seconds stays far below the bucket, a flood from one address does not.
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let decision = state.shield().check(peer_ip(&request));
    if decision.allowed {
        return next.run(request).await;
    }
    let reason = match decision.reason {
        Reason::HardLockout => "hard_lockout",
        _ => "soft_throttle",
    };
    crate::metrics::shield_denied(reason);
    ApiError::new(
        ErrorCode::RateLimited,
        "too many requests from this address",
    )
    .retry_after(decision.retry_after_secs_ceil())
    .into_response()
}
