//! InventoryReader and Maintenance for MemoryPool.

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::{
    Footprint, InventoryReader, InventoryView, Maintenance, PoolError, PoolResult, ProxyStatus,
    SweepReport, Unavailable, UnixMillis, UpstreamId,
};
use std::collections::BTreeMap;

#[async_trait]
impl InventoryReader for MemoryPool {
    async fn inventory(&self, now: UnixMillis, upstream: &UpstreamId) -> PoolResult<InventoryView> {
        let state = self.lock()?;
        let empty = Default::default();
        let members = state.by_upstream.get(upstream).unwrap_or(&empty);
        if members.len() > self.options.inventory_scan_budget {
            return Err(PoolError::Unavailable(Unavailable::ScanBudget));
        }
        let mut view = InventoryView {
            upstream: upstream.clone(),
            managed: 0,
            available_slots: 0,
            unextracted: state.unextracted_of(upstream),
            by_status: BTreeMap::new(),
        };
        for id in members {
            let Some(record) = state.records.get(id) else {
                return Err(PoolError::corrupt("upstream index names a missing record"));
            };
            let status = if record.hard_expiry_ms <= now {
                ProxyStatus::Expired
            } else {
                record.status
            };
            *view.by_status.entry(status).or_default() += 1;
            if status.is_managed() {
                view.managed += 1;
            }
            if !record.is_usable(now) || status == ProxyStatus::Expired {
                continue;
            }
            let max = u64::from(record.max_sessions);
            view.available_slots += match state.assignments.get(id) {
                None => max,
                Some(a) if a.is_draining() || a.lease_until_ms <= now => 0,
                Some(a) => match state.live_runtime(&a.worker, now) {
                    // Capacity is only known from a report made against a snapshot that
                    // already included this assignment.
                    Some(runtime) if runtime.report.snapshot.epoch >= a.epoch => {
                        let used = runtime
                            .report
                            .entries
                            .iter()
                            .find(|e| &e.proxy_id == id)
                            .map_or(0, |e| u64::from(e.active) + u64::from(e.reserved));
                        max.saturating_sub(used)
                    }
                    _ => 0,
                },
            };
        }
        Ok(view)
    }
}

#[async_trait]
impl Maintenance for MemoryPool {
    async fn sweep(&self, now: UnixMillis, limit: usize) -> PoolResult<SweepReport> {
        let mut state = self.lock()?;
        state.usage.prune(now);
        let (records_removed, assignments_removed, more_records) =
            state.remove_expired_records(now, limit);
        let (results_removed, more_results) = state.remove_expired_results(now, limit);
        let more_cooldowns = state.forget_cooldowns(now, limit);
        state.forget_session_feedback(now);
        let (records_released, more_withheld) = state.release_withheld(now, limit);

        let lapsed_sessions: Vec<_> = state
            .sessions
            .iter()
            .filter(|(_, s)| !s.session.is_live(now))
            .map(|(worker, _)| worker.clone())
            .take(limit.saturating_add(1))
            .collect();
        let more_sessions = lapsed_sessions.len() > limit;
        let mut sessions_removed = 0;
        for worker in lapsed_sessions.into_iter().take(limit) {
            state.forget_session(&worker);
            sessions_removed += 1;
        }
        let lapsed_runtimes: Vec<_> = state
            .runtimes
            .iter()
            .filter(|(_, r)| r.expires_at_ms <= now)
            .map(|(worker, _)| worker.clone())
            .take(limit)
            .collect();
        for worker in lapsed_runtimes {
            state.runtimes.remove(&worker);
        }

        Ok(SweepReport {
            records_removed,
            assignments_removed,
            sessions_removed,
            results_removed,
            records_released,
            more_pending: more_records
                || more_results
                || more_sessions
                || more_cooldowns
                || more_withheld,
        })
    }

    async fn footprint(&self) -> PoolResult<Footprint> {
        let state = self.lock()?;
        let index_entries = state.expiry.len()
            + state.available.entries()
            + state.lease_expiry.len()
            + state.by_upstream.values().map(|s| s.len()).sum::<usize>()
            + state.worker_owned.values().map(|s| s.len()).sum::<usize>()
            + state.extraction_expiry.len()
            + state.unextracted.len();
        Ok(Footprint {
            records: state.records.len() as u64,
            assignments: state.assignments.len() as u64,
            sessions: state.sessions.len() as u64,
            runtimes: state.runtimes.len() as u64,
            results: (state.extractions.len() + state.operations.len()) as u64,
            index_entries: index_entries as u64,
        })
    }
}
