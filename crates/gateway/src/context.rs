//! [`GatewayContext`]: what routing a request and relaying it read — the settings in
//! force, the snapshot store, the router, bans, metrics, usage counts, the access log, the
//! clock, the proxies' judged addresses, the trust origins are verified by and the
//! gateway's [`Phase`]. Built once per gateway; [`crate::state::Shared`] adds what only
//! the inbound side needs (the shield, the connection caps) and the operators' view.
//!
//! Outbound code takes a `&GatewayContext`, so it cannot reach the inbound-only state.

use crate::access::AccessLog;
use crate::config::GatewayConfig;
use crate::metrics::GatewayMetrics;
use crate::origin_tls::OriginTls;
use crate::proxy_addresses::ProxyAddresses;
use crate::routing::bans::Bans;
use crate::routing::route::Router;
use crate::snapshot::SnapshotStore;
use crate::usage::UsageTable;
use arc_swap::{ArcSwap, Guard};
use proxypool_core::SharedClock;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where the gateway is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Running,
    /// Stop accepting; let in-flight requests and tunnels finish.
    Draining,
    /// The grace period is over: close everything.
    Stopped,
}

/// Shared by every connection task, below the inbound side.
#[derive(Debug)]
pub(crate) struct GatewayContext {
    /// The settings in force; a reload swaps them whole ([`crate::GatewayReload`]). A
    /// connection reads them when it needs them, so a change applies to what comes next.
    pub settings: ArcSwap<GatewayConfig>,
    pub store: Arc<SnapshotStore>,
    pub router: Router,
    /// Bans this gateway saw and the cooldown changes waiting for the next report.
    pub bans: Arc<Bans>,
    pub metrics: Arc<GatewayMetrics>,
    /// Usage per (client, upstream), for the runtime reports.
    pub usage: Arc<UsageTable>,
    /// Where each finished request is accounted: duration histograms, the access log.
    pub access: Arc<AccessLog>,
    pub phase: watch::Receiver<Phase>,
    /// Wall time for leases and sessions, monotonic time for cooldowns and idle timers.
    pub clock: SharedClock,
    /// The judged addresses of the proxies' host names: the only ones a dial connects to.
    pub addresses: Arc<ProxyAddresses>,
    /// How origins are verified when the gateway speaks TLS to them itself (inspected
    /// requests): built at start and swapped by each reload, never per request.
    pub origin_tls: ArcSwap<OriginTls>,
}

impl GatewayContext {
    pub(crate) fn config(&self) -> Guard<Arc<GatewayConfig>> {
        self.settings.load()
    }

    pub(crate) fn tunnel_idle(&self) -> Duration {
        self.config().limits.tunnel_idle.as_duration()
    }

    pub(crate) fn header_timeout(&self) -> Duration {
        self.config().limits.header_read_timeout.as_duration()
    }

    /// The HTTP/1.1 server every client connection is served with (the proxy listeners and
    /// the inside of an inspected tunnel): the header-read timeout and size cap, keep-alive,
    /// and header names as the client spelled them (sites fingerprint case; the upstream's
    /// come back the same way, `outbound::forward`).
    pub(crate) fn client_http1(&self) -> hyper::server::conn::http1::Builder {
        let config = self.config();
        let limits = &config.limits;
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(self.header_timeout())
            .max_buf_size(
                limits
                    .max_header_bytes
                    .max(proxypool_core::MIN_HEADER_BYTES),
            )
            .max_header_size(limits.max_header_bytes)
            .preserve_header_case(true)
            .keep_alive(true);
        builder
    }

    pub(crate) fn pool_idle(&self) -> Duration {
        self.config().dial.pool_idle_timeout.as_duration()
    }
}
