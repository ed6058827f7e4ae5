//! Readiness: whether the gateway can route anything at all right now, and if not why.
//!
//! Ready means: a snapshot is applied, the controller answered within the snapshot's
//! `max_staleness_ms`, and at least one proxy of the snapshot is before its cutoff (its
//! lease lives, see [`crate::proxies::cutoff`]). Liveness is another question: a gateway that cannot
//! reach its controller is alive and must not be restarted (it would lose the snapshot it
//! still serves from), so the admin `/healthz` answers 200 while the process runs and
//! `/readyz` answers 503 with the reason below.
//!
//! The check is one atomic load of the view, one of its latest cutoff and a clock read;
//! [`LeaseSummary`] (counts for `/status` and the gauges) walks the view and is for the admin
//! listener and the lease keeper only.

use crate::metrics::GatewayMetrics;
use crate::snapshot::{SnapshotStore, SnapshotView};
use proxypool_core::UnixMillis;
use std::sync::Arc;

/// Why the gateway is not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotReady {
    /// No snapshot applied yet (refusals: `gateway_stale`).
    NoSnapshot,
    /// The controller has not answered within `max_staleness_ms` (refusals: `gateway_stale`).
    StaleSnapshot,
    /// The snapshot has no proxy with a live lease (refusals: `no_leased_proxies`).
    NoLeasedProxies,
}

impl NotReady {
    /// The reason on `/readyz` and `/status`.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            NotReady::NoSnapshot => "no_snapshot",
            NotReady::StaleSnapshot => "stale_snapshot",
            NotReady::NoLeasedProxies => "no_leased_proxies",
        }
    }
}

/// The view to route from when the gateway is ready.
pub(crate) fn readiness(
    store: &SnapshotStore,
    now_ms: UnixMillis,
) -> Result<Arc<SnapshotView>, NotReady> {
    let view = match store.current() {
        Ok(view) => view,
        Err(_) if store.view().is_none() => return Err(NotReady::NoSnapshot),
        Err(_) => return Err(NotReady::StaleSnapshot),
    };
    if view.has_lease(now_ms) {
        Ok(view)
    } else {
        Err(NotReady::NoLeasedProxies)
    }
}

/// The leases of the applied snapshot at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LeaseSummary {
    /// Proxies in the snapshot.
    pub proxies: usize,
    /// Of those, the ones the gateway may relay through now.
    pub leased: usize,
    /// The earliest and the latest lease end in the snapshot (wall clock).
    pub earliest_end_ms: Option<UnixMillis>,
    pub latest_end_ms: Option<UnixMillis>,
}

impl LeaseSummary {
    pub(crate) fn of(view: &SnapshotView, now_ms: UnixMillis) -> Self {
        let ends = view.proxies.iter().map(|p| p.lease_end_ms());
        LeaseSummary {
            proxies: view.proxies.len(),
            leased: view.proxies.iter().filter(|p| p.is_live(now_ms)).count(),
            earliest_end_ms: ends.clone().min(),
            latest_end_ms: ends.max(),
        }
    }
}

/// Sets the readiness gauges (`ready`, `leased_proxies`) from the store at `now_ms`.
pub(crate) fn publish(store: &SnapshotStore, metrics: &GatewayMetrics, now_ms: UnixMillis) {
    let ready = readiness(store, now_ms).is_ok();
    metrics.ready.set(if ready { 1.0 } else { 0.0 });
    let leased = store
        .view()
        .map_or(0, |view| LeaseSummary::of(&view, now_ms).leased);
    metrics.leased_proxies.set(leased as f64);
}
