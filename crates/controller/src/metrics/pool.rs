//! The gauges that describe state rather than events: proxies by upstream and state,
//! live worker sessions, each worker's snapshot age, and this controller's leadership.
//!
//! One task per controller ([`PoolGauges::run`]) reads the pool every
//! [`REFRESH_INTERVAL`] (and at once when the leadership changes). It runs on every
//! controller, leader or not: the reads are cheap, atomic store calls, and a standby's
//! `/metrics` then shows the pool too instead of gauges frozen at its last term. A read
//! that fails leaves the previous values in place (and counts in the store errors).

use super::{LEADER, LEADER_TERM, PROXIES, SNAPSHOT_AGE, WORKER_SESSIONS, state_label};
use crate::clock::SharedClock;
use crate::leadership::Term;
use crate::ownership::MAX_WORKERS;
use crate::snapshot::SnapshotPublisher;
use proxypool_core::{ActivityPool, ProxyStatus, UpstreamId, WorkerId};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the pool is read for the gauges: a scrape every 15 s or more sees values at
/// most this old.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(2);

/// The state-reading task's inputs.
#[derive(Debug)]
pub(crate) struct PoolGauges {
    pub pool: Arc<dyn ActivityPool>,
    pub clock: SharedClock,
    /// The configured upstreams (a bounded label set).
    pub upstreams: Vec<UpstreamId>,
    pub publisher: Arc<SnapshotPublisher>,
    pub leadership: watch::Receiver<Option<Term>>,
}

impl PoolGauges {
    /// Refreshes the gauges until `stop` turns true.
    pub(crate) async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut last_term = 0;
        let mut workers = BTreeSet::new();
        let mut leadership_open = true;
        loop {
            let term = *self.leadership.borrow_and_update();
            last_term = term.map_or(last_term, |t| t.0);
            metrics::gauge!(LEADER).set(if term.is_some() { 1.0 } else { 0.0 });
            metrics::gauge!(LEADER_TERM).set(last_term as f64);
            self.refresh(&mut workers).await;
            tokio::select! {
                _ = tokio::time::sleep(REFRESH_INTERVAL) => {}
                changed = self.leadership.changed(), if leadership_open => {
                    // A dropped sender means no more changes: keep the last value.
                    leadership_open = changed.is_ok();
                }
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// One read of the pool. `workers` holds the workers given a snapshot-age series, so
    /// one whose session ended is set back to 0.
    async fn refresh(&self, workers: &mut BTreeSet<WorkerId>) {
        let now = self.clock.now();
        for upstream in &self.upstreams {
            match self.pool.inventory(now, upstream).await {
                Ok(view) => {
                    for status in ProxyStatus::ALL {
                        let count = view.by_status.get(&status).copied().unwrap_or(0);
                        metrics::gauge!(
                            PROXIES,
                            "upstream" => upstream.to_string(),
                            "state" => state_label(status)
                        )
                        .set(count as f64);
                    }
                }
                Err(e) => tracing::debug!(%upstream, "inventory for metrics failed: {e}"),
            }
        }
        let sessions = match self.pool.live_sessions(now, MAX_WORKERS).await {
            Ok(sessions) => sessions,
            Err(e) => {
                tracing::debug!("live sessions for metrics failed: {e}");
                return;
            }
        };
        metrics::gauge!(WORKER_SESSIONS).set(sessions.len() as f64);
        let mut live = BTreeSet::new();
        for session in &sessions {
            let built = session.acked_snapshot.as_ref().and_then(|acked| {
                self.publisher
                    .built_at(&session.worker, &session.session_id, acked.version)
            });
            let age_ms = built.map_or(0, |at| now.saturating_sub(at));
            metrics::gauge!(SNAPSHOT_AGE, "worker" => session.worker.to_string())
                .set(age_ms as f64 / 1000.0);
            live.insert(session.worker.clone());
        }
        for gone in workers.difference(&live) {
            metrics::gauge!(SNAPSHOT_AGE, "worker" => gone.to_string()).set(0.0);
        }
        self.publisher.forget_other_workers(&live);
        *workers = live;
    }
}
