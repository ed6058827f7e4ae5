//! [`Shared`]: what every listener task reads. The [`GatewayContext`] that routing and
//! outbound read too, plus what only the inbound side and the operators need: the per-IP
//! shield, the connection caps, the limiters' clock, the admin listener's TLS, the control
//! client and the last reload's report. Built once per gateway.

use crate::context::GatewayContext;
use crate::policy::limits::{LimiterClock, Shield};
use arc_swap::ArcSwapOption;
use std::ops::Deref;
use std::sync::Arc;

/// Shared by every connection task.
#[derive(Debug)]
pub(crate) struct Shared {
    /// What routing and outbound read (settings, store, router, bans, metrics, usage,
    /// phase, clock).
    pub context: GatewayContext,
    /// The per-IP shield; a reload with another policy swaps in a new one (connections
    /// keep the one they were admitted by).
    pub shield: ArcSwapOption<Shield>,
    /// Open client connections over all listeners (`limits.max_connections`, resized on
    /// reload); at the cap an unused connection is closed to admit a new one.
    pub connections: Arc<proxypool_edge::ConnectionCap>,
    /// Open client connections per address (all client listeners, IPv6 per
    /// `limits.ipv6_prefix` network), taken before a slot of `connections`
    /// (`limits.max_connections_per_ip`, resized on reload).
    pub per_ip: Arc<proxypool_edge::PerIpLimit>,
    /// The last configuration reload's report, for `/status` (none before the first).
    pub last_reload: ArcSwapOption<serde_json::Value>,
    /// The limiters' clock (a reloaded shield runs on it too).
    pub limiter_clock: LimiterClock,
    /// TLS of the admin listener, loaded at start (its files are polled while it serves).
    pub admin_tls: Option<proxypool_edge::ServerTls>,
    /// TLS of the client listener (`listeners.https`), loaded at start, its files polled
    /// ([`crate::inbound::tls_accept::watch_files`]).
    pub client_tls: Option<proxypool_edge::ServerTls>,
    /// The CA inspected `CONNECT`s are ended with and its leaf cache
    /// (`[gateway.inspection]`; none = no tunnel is inspected), replaced by a reload that
    /// changes it.
    pub inspection: ArcSwapOption<crate::inspection::Authority>,
    /// The control client (which controller it talks to and why its last call failed,
    /// for `/status`).
    pub control: crate::control::ControlClient,
    /// The fleet this gateway is a member of (`[gateway.fleet]`); `None`: every sticky key
    /// is kept here alone.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
}

/// Inbound code reads the context's fields through `Shared` as if they were its own, and
/// hands `&Shared` to outbound code that takes a `&GatewayContext`.
impl Deref for Shared {
    type Target = GatewayContext;

    fn deref(&self) -> &GatewayContext {
        &self.context
    }
}

impl Shared {
    /// Open client connections (all listeners).
    pub(crate) fn open_connections(&self) -> usize {
        self.connections.open()
    }
}
