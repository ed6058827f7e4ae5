//! Serving the router: the edge's one server scaffold ([`proxypool_edge::serve`]) with the
//! `[api.limits]` that concern connections: a per-IP and a global cap taken at accept
//! (over either the socket is closed at once), the header-read and keep-alive timeouts,
//! and the head size cap (431 in the API's error shape). Every request carries its peer
//! address as a [`proxypool_edge::Peer`], which the shield keys on.

use crate::config::ApiLimits;
use axum::Router;
use proxypool_edge::{ServeLimits, TowerToHyperService};
use std::future::Future;
use std::io;
use tokio::net::TcpListener;

/// The scaffold's settings from `[api.limits]`.
pub fn serve_limits(limits: &ApiLimits) -> ServeLimits {
    ServeLimits {
        max_connections: limits.max_connections,
        max_connections_per_ip: limits.max_connections_per_ip,
        ipv6_prefix: limits.ipv6_prefix,
        first_byte_timeout: limits.first_byte_deadline().as_duration(),
        header_read_timeout: limits.header_read_timeout.as_duration(),
        keepalive_idle: limits.keepalive_idle.as_duration(),
        max_header_bytes: limits.max_header_bytes,
        proxy_protocol_from: Vec::new(),
        uncounted_per_ip: Vec::new(),
        tls: None,
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes (then
/// in-flight requests finish). The future owns what it needs, so it can be spawned.
pub fn serve(
    listener: TcpListener,
    router: Router,
    limits: &ApiLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    serve_with(listener, router, serve_limits(limits), shutdown)
}

/// [`serve`] with the scaffold's settings as given (e.g. with the load balancers that
/// speak the PROXY protocol).
pub fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    proxypool_edge::serve(listener, TowerToHyperService::new(router), limits, shutdown)
}
