//! [`Shared`]: what every listener task reads (config, snapshot store, router, limiters,
//! metrics, the connection cap, the clock and the shutdown signal), built once per gateway.

use crate::admission::Shield;
use crate::config::GatewayConfig;
use crate::dial::DialTimeouts;
use crate::metrics::GatewayMetrics;
use crate::route::Router;
use crate::snapshot::SnapshotStore;
use proxypool_core::SharedClock;
use std::sync::Arc;
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
    pub config: GatewayConfig,
    pub store: Arc<SnapshotStore>,
    pub router: Router,
    pub shield: Option<Shield>,
    pub metrics: Arc<GatewayMetrics>,
    /// One permit per open client connection (all listeners).
    pub connections: Arc<Semaphore>,
    pub phase: watch::Receiver<Phase>,
    pub timeouts: DialTimeouts,
    /// Wall time for leases and sessions, monotonic time for cooldowns and idle timers.
    pub clock: SharedClock,
}

impl Shared {
    pub(crate) fn tunnel_idle(&self) -> Duration {
        self.config.limits.tunnel_idle.as_duration()
    }

    pub(crate) fn header_timeout(&self) -> Duration {
        self.config.limits.header_read_timeout.as_duration()
    }

    pub(crate) fn pool_idle(&self) -> Duration {
        self.config.dial.pool_idle_timeout.as_duration()
    }
}
