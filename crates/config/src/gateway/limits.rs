//! `[gateway.limits]`: protection of the gateway itself against clients (connection caps,
//! head size and timeouts, tracked-proxy and sticky-session bounds, capacity waits), and
//! their checks.

use crate::check::Check;
use crate::duration::Millis;
use crate::floors;
use serde::{Deserialize, Serialize};

/// Protection of the gateway itself against clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Client connections open at once over all listeners; more are closed on accept.
    pub max_connections: usize,
    /// Client connections open at once from one address over all listeners; more are
    /// closed on accept, before the global cap is touched (so one address cannot hold
    /// every connection). At most a quarter of `max_connections`; a balancer in
    /// `trusted_proxies` (which speaks the PROXY protocol) is counted as the clients it
    /// names. Applies live to the next accept.
    pub max_connections_per_ip: usize,
    /// IPv6 peers are counted per network of this prefix length by the per-address
    /// connection cap (64: one count per /64). Applies live to the next accept.
    pub ipv6_prefix: u8,
    /// Time a new client connection has to send its first byte (at most
    /// `header_read_timeout`; unset: 3 s, or `header_read_timeout` if that is shorter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_byte_timeout: Option<Millis>,
    /// Connections open at once on the admin listener (each address gets at most
    /// `max_connections_per_ip` of them). Bound to the listener: needs a restart.
    pub admin_max_connections: usize,
    /// Time a client has to send a complete request head (HTTP) or handshake (SOCKS5).
    pub header_read_timeout: Millis,
    /// Largest request head accepted (HTTP); at least
    /// [`proxypool_core::MIN_HEADER_BYTES`] (hyper's minimum buffer).
    pub max_header_bytes: usize,
    /// A kept-alive HTTP connection with no traffic for this long is closed.
    pub keepalive_idle: Millis,
    /// A tunnel (CONNECT or SOCKS5) with no traffic either way for this long is closed, and
    /// so is one whose write to a side that takes no bytes makes no progress for this long.
    pub tunnel_idle: Millis,
    /// Most proxies whose local counters are tracked (current snapshot plus draining ones).
    /// A snapshot that would exceed it is rejected and the old view kept (bounded memory).
    pub max_tracked_proxies: usize,
    /// Most sticky sessions remembered at once.
    pub max_sticky_sessions: usize,
    /// Most sticky sessions one client holds at once: a new session past it replaces the
    /// client's own oldest, so one client cannot fill the table. Applies live.
    pub max_sticky_sessions_per_client: usize,
    /// When every eligible proxy is at its `max_sessions`, how long a request waits for a
    /// slot to free before it is refused (`no_eligible_proxy`). `"0s"` refuses at once.
    /// At most 30 s. Applies live.
    pub capacity_wait: Millis,
    /// Requests of one client waiting for capacity at once; more are refused at once, so a
    /// waiting queue cannot be used to hold the gateway's memory. Applies live.
    pub max_capacity_waiters_per_client: usize,
    /// Requests waiting for capacity at once over all clients. Applies live.
    pub max_capacity_waiters: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            ipv6_prefix: 64,
            first_byte_timeout: None,
            admin_max_connections: 64,
            header_read_timeout: Millis::from_secs(10),
            max_header_bytes: 16 * 1024,
            keepalive_idle: Millis::from_secs(60),
            tunnel_idle: Millis::from_secs(300),
            max_tracked_proxies: 100_000,
            max_sticky_sessions: 100_000,
            max_sticky_sessions_per_client: 10_000,
            capacity_wait: Millis(300),
            max_capacity_waiters_per_client: 256,
            max_capacity_waiters: 4_096,
        }
    }
}

impl Limits {
    /// The first-byte deadline the client listeners apply.
    pub fn first_byte_deadline(&self) -> Millis {
        floors::first_byte_deadline(self.first_byte_timeout, self.header_read_timeout)
    }
}

/// The longest `limits.capacity_wait`: past this a client is better told at once.
const MAX_CAPACITY_WAIT_MS: u64 = 30_000;

/// Checks `[gateway.limits]`.
pub(crate) fn validate(c: &mut Check<'_>, limits: &Limits) {
    if let Some(message) = floors::header_bytes(limits.max_header_bytes) {
        c.at("gateway.limits.max_header_bytes", message);
    }
    for (key, message) in floors::at_least_one([
        ("max_connections", limits.max_connections as u64),
        (
            "max_connections_per_ip",
            limits.max_connections_per_ip as u64,
        ),
        ("admin_max_connections", limits.admin_max_connections as u64),
        ("header_read_timeout", limits.header_read_timeout.0),
        ("keepalive_idle", limits.keepalive_idle.0),
        ("tunnel_idle", limits.tunnel_idle.0),
        ("max_tracked_proxies", limits.max_tracked_proxies as u64),
        ("max_sticky_sessions", limits.max_sticky_sessions as u64),
        (
            "max_sticky_sessions_per_client",
            limits.max_sticky_sessions_per_client as u64,
        ),
        (
            "max_capacity_waiters_per_client",
            limits.max_capacity_waiters_per_client as u64,
        ),
        ("max_capacity_waiters", limits.max_capacity_waiters as u64),
    ]) {
        c.at(format!("gateway.limits.{key}"), message);
    }
    for (key, message) in floors::connection_caps(
        limits.max_connections,
        limits.max_connections_per_ip,
        limits.ipv6_prefix,
        (limits.first_byte_timeout, limits.header_read_timeout),
    ) {
        c.at(format!("gateway.limits.{key}"), message);
    }
    if limits.capacity_wait.0 > MAX_CAPACITY_WAIT_MS {
        c.at(
            "gateway.limits.capacity_wait",
            "must be at most 30s (\"0s\" turns the wait off)",
        );
    }
}
