//! Usage per (client, upstream): what this gateway process routed, counted locally and
//! sent, as cumulative totals, in every runtime report (`proxypool_core::usage` says how
//! the store turns them into exact deltas).
//!
//! The hot path takes one cell per routed request or tunnel (a read-locked map lookup,
//! written only the first time a pair is seen) and adds to its atomics. The pairs are
//! bounded by the configured clients and the upstreams of the snapshot, never by what a
//! client sends. The byte counters feed the gateway's `bytes_total` metric and the cell in
//! one `increment`, so the relay paths count once.

use metrics::{Counter, CounterFn};
use proxypool_core::usage::{GatewayCounters, GatewayUsage, GatewayUsageEntry};
use proxypool_core::{ClientId, RwLockExt, UpstreamId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// One (client, upstream)'s counters, also exported as `proxypool_usage_*_total{client,
/// upstream}` (labels from the configured clients and the snapshot's upstreams).
#[derive(Debug)]
pub(crate) struct UsageCell {
    requests: AtomicU64,
    failures: AtomicU64,
    requests_metric: Counter,
    failures_metric: Counter,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
    /// Payload bytes client → upstream: the gateway's metric and this cell.
    pub bytes_up: Counter,
    /// Payload bytes upstream → client.
    pub bytes_down: Counter,
}

impl UsageCell {
    fn new(
        client: &ClientId,
        upstream: &UpstreamId,
        bytes_up: Counter,
        bytes_down: Counter,
    ) -> UsageCell {
        let up = Arc::new(AtomicU64::new(0));
        let down = Arc::new(AtomicU64::new(0));
        let labels = [
            ("client", client.to_string()),
            ("upstream", upstream.to_string()),
        ];
        let bytes = |direction: &'static str| {
            let mut labels = labels.to_vec();
            labels.push(("direction", direction.to_owned()));
            metrics::counter!(USAGE_BYTES, &labels)
        };
        UsageCell {
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            requests_metric: metrics::counter!(USAGE_REQUESTS, &labels),
            failures_metric: metrics::counter!(USAGE_FAILURES, &labels),
            bytes_up: Counter::from_arc(Arc::new(Tee {
                totals: [bytes_up, bytes("client_to_upstream")],
                cell: up.clone(),
            })),
            bytes_down: Counter::from_arc(Arc::new(Tee {
                totals: [bytes_down, bytes("upstream_to_client")],
                cell: down.clone(),
            })),
            up,
            down,
        }
    }

    /// A request or tunnel routed through an upstream proxy of this pair.
    pub(crate) fn routed(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.requests_metric.increment(1);
    }

    /// The upstream of a routed request failed before answering.
    pub(crate) fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.failures_metric.increment(1);
    }

    fn counters(&self) -> GatewayCounters {
        // Failures are read first: a request counted after this read cannot make the
        // failures seen exceed the requests seen.
        let failures = self.failures.load(Ordering::Acquire);
        GatewayCounters {
            requests: self.requests.load(Ordering::Acquire).max(failures),
            failures,
            bytes_up: self.up.load(Ordering::Relaxed),
            bytes_down: self.down.load(Ordering::Relaxed),
        }
    }
}

/// The usage metric names (the gateway describes them with its others).
pub(crate) const USAGE_REQUESTS: &str = "proxypool_usage_requests_total";
pub(crate) const USAGE_FAILURES: &str = "proxypool_usage_failures_total";
pub(crate) const USAGE_BYTES: &str = "proxypool_usage_bytes_total";

/// A counter that adds to the gateway's byte metrics (in total and per pair) and to one
/// cell.
#[derive(Debug)]
struct Tee {
    totals: [Counter; 2],
    cell: Arc<AtomicU64>,
}

impl CounterFn for Tee {
    fn increment(&self, value: u64) {
        for total in &self.totals {
            total.increment(value);
        }
        self.cell.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        for total in &self.totals {
            total.absolute(value);
        }
        self.cell.fetch_max(value, Ordering::Relaxed);
    }
}

/// Every pair this process has routed, since it started.
#[derive(Debug)]
pub(crate) struct UsageTable {
    instance: String,
    /// By client, then upstream: looked up by reference, so a request copies no key.
    cells: RwLock<HashMap<ClientId, HashMap<UpstreamId, Arc<UsageCell>>>>,
    bytes_up: Counter,
    bytes_down: Counter,
}

impl UsageTable {
    /// A table whose byte counters also feed `bytes_up` and `bytes_down`.
    pub(crate) fn new(bytes_up: Counter, bytes_down: Counter) -> UsageTable {
        UsageTable {
            instance: crate::session_id::new_session_id(),
            cells: RwLock::new(HashMap::new()),
            bytes_up,
            bytes_down,
        }
    }

    /// The cell of (`client`, `upstream`), made the first time the pair is routed.
    pub(crate) fn cell(&self, client: &ClientId, upstream: &UpstreamId) -> Arc<UsageCell> {
        if let Some(cell) = self
            .cells
            .read_or_recover()
            .get(client)
            .and_then(|cells| cells.get(upstream))
        {
            return cell.clone();
        }
        self.cells
            .write_or_recover()
            .entry(client.clone())
            .or_default()
            .entry(upstream.clone())
            .or_insert_with(|| {
                Arc::new(UsageCell::new(
                    client,
                    upstream,
                    self.bytes_up.clone(),
                    self.bytes_down.clone(),
                ))
            })
            .clone()
    }

    /// The cumulative totals, for a runtime report (pairs with nothing yet left out).
    pub(crate) fn report(&self) -> GatewayUsage {
        let mut entries: Vec<GatewayUsageEntry> = self
            .cells
            .read_or_recover()
            .iter()
            .flat_map(|(client, cells)| {
                cells.iter().map(move |(upstream, cell)| GatewayUsageEntry {
                    client: client.clone(),
                    upstream: upstream.clone(),
                    counters: cell.counters(),
                })
            })
            .filter(|entry| !entry.counters.is_zero())
            .collect();
        entries.sort_by(|a, b| (&a.client, &a.upstream).cmp(&(&b.client, &b.upstream)));
        GatewayUsage {
            instance: self.instance.clone(),
            entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_count_per_pair_and_report_cumulative_totals() {
        let table = UsageTable::new(Counter::noop(), Counter::noop());
        let (a, b) = (ClientId::new("a").unwrap(), ClientId::new("b").unwrap());
        let up = UpstreamId::new("u").unwrap();
        let cell = table.cell(&a, &up);
        cell.routed();
        cell.routed();
        cell.failed();
        cell.bytes_up.increment(10);
        cell.bytes_down.increment(70);
        table.cell(&a, &up).bytes_up.increment(5);
        table.cell(&b, &up);
        let report = table.report();
        proxypool_core::usage::GatewayUsage::validate(&report).unwrap();
        assert_eq!(
            report.entries.len(),
            1,
            "a pair with nothing yet is left out"
        );
        assert_eq!(
            report.entries[0].counters,
            GatewayCounters {
                requests: 2,
                failures: 1,
                bytes_up: 15,
                bytes_down: 70
            }
        );
        assert_eq!(
            table.report(),
            report,
            "cumulative: reading changes nothing"
        );
        assert_ne!(crate::session_id::new_session_id(), report.instance);
    }
}
