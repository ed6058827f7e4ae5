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
use proxypool_throttle::{Clock, Decision, PolicyLimiter, Reason, Sweeper};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// What the shield needs from a limiter: one global per-IP check.
trait IpCheck: Send + Sync {
    fn check_ip(&self, ip: IpAddr) -> Decision;
}

impl<C: Clock + 'static> IpCheck for PolicyLimiter<C> {
    fn check_ip(&self, ip: IpAddr) -> Decision {
        self.check_global(ip)
    }
}

/// The shield: a limiter and, when the API built it, the thread that keeps its memory
/// bounded by evicting idle addresses.
#[derive(Clone)]
pub struct Shield {
    check: Arc<dyn IpCheck>,
    _sweeper: Option<Arc<Sweeper>>,
}

impl fmt::Debug for Shield {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shield")
            .field("sweeper", &self._sweeper.is_some())
            .finish()
    }
}

impl Shield {
    /// Builds the limiter from settings and starts its sweeper thread.
    pub fn from_settings(
        settings: &crate::config::ShieldSettings,
    ) -> Result<Shield, crate::config::ApiConfigError> {
        let limiter = Arc::new(
            PolicyLimiter::builder(settings.engine.clone(), settings.policy.clone()).build()?,
        );
        let sweeper = Sweeper::spawn(limiter.clone(), settings.sweep_interval, 1024)
            .map_err(|error| crate::config::ApiConfigError::Sweeper(error.to_string()))?;
        Ok(Shield {
            check: limiter,
            _sweeper: Some(Arc::new(sweeper)),
        })
    }

    /// Uses a limiter the caller built (and sweeps), e.g. one on a manual clock in tests.
    pub fn from_limiter<C: Clock + 'static>(limiter: Arc<PolicyLimiter<C>>) -> Shield {
        Shield {
            check: limiter,
            _sweeper: None,
        }
    }

    pub(crate) fn check(&self, ip: IpAddr) -> Decision {
        self.check.check_ip(ip)
    }
}

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
    // Health and readiness probes come from a few addresses, often: they are cheap, bounded
    // by the concurrency cap, and must not be throttled into reporting a healthy server down.
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
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
