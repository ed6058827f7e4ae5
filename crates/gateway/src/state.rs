//! [`Shared`]: what every listener task reads (config, snapshot store, router, limiters,
//! metrics, the connection cap, the clock and the shutdown signal), built once per gateway.

use crate::admission::{LimiterClock, Shield};
use crate::config::GatewayConfig;
use crate::dial::DialTimeouts;
use crate::metrics::GatewayMetrics;
use crate::route::Router;
use crate::snapshot::SnapshotStore;
use crate::usage::UsageTable;
use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use proxypool_core::SharedClock;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};

/// Where the gateway is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Running,
    /// Stop accepting; let in-flight requests and tunnels finish.
    Draining,
    /// The grace period is over: close everything.
    Stopped,
}

/// Shared by every connection task.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The settings in force; a reload swaps them whole ([`crate::GatewayReload`]). A
    /// connection reads them when it needs them, so a change applies to what comes next.
    pub settings: ArcSwap<GatewayConfig>,
    pub store: Arc<SnapshotStore>,
    pub router: Router,
    /// Bans this gateway saw and the cooldown changes waiting for the next report.
    pub bans: Arc<crate::bans::Bans>,
    /// The per-IP shield; a reload with another policy swaps in a new one (connections
    /// keep the one they were admitted by).
    pub shield: ArcSwapOption<Shield>,
    pub metrics: Arc<GatewayMetrics>,
    /// Usage per (client, upstream), for the runtime reports.
    pub usage: Arc<UsageTable>,
    /// One permit per open client connection (all listeners).
    pub connections: Arc<Semaphore>,
    /// How many permits `connections` stands for (`limits.max_connections`).
    pub connection_cap: AtomicUsize,
    /// Open client connections per address (all client listeners), taken before a
    /// permit of `connections` (`limits.max_connections_per_ip`, resized on reload).
    pub per_ip: Arc<proxypool_edge::PerIpLimit>,
    pub phase: watch::Receiver<Phase>,
    /// Wall time for leases and sessions, monotonic time for cooldowns and idle timers.
    pub clock: SharedClock,
    /// The last configuration reload's report, for `/status` (none before the first).
    pub last_reload: ArcSwapOption<serde_json::Value>,
    /// The limiters' clock (a reloaded shield runs on it too).
    pub limiter_clock: LimiterClock,
    /// TLS of the admin listener, loaded at start (its files are polled while it serves).
    pub admin_tls: Option<proxypool_edge::ServerTls>,
    /// The control client (which controller it talks to and why its last call failed,
    /// for `/status`).
    pub control: crate::control::ControlClient,
}

impl Shared {
    pub(crate) fn config(&self) -> Guard<Arc<GatewayConfig>> {
        self.settings.load()
    }

    pub(crate) fn tunnel_idle(&self) -> Duration {
        self.config().limits.tunnel_idle.as_duration()
    }

    pub(crate) fn header_timeout(&self) -> Duration {
        self.config().limits.header_read_timeout.as_duration()
    }

    pub(crate) fn pool_idle(&self) -> Duration {
        self.config().dial.pool_idle_timeout.as_duration()
    }

    pub(crate) fn timeouts(&self) -> DialTimeouts {
        let dial = &self.config().dial;
        DialTimeouts {
            connect: dial.connect_timeout.as_duration(),
            handshake: dial.handshake_timeout.as_duration(),
        }
    }

    /// Open client connections (all listeners).
    pub(crate) fn open_connections(&self) -> usize {
        self.connection_cap
            .load(Ordering::Acquire)
            .saturating_sub(self.connections.available_permits())
    }
}
