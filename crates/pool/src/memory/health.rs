//! HealthStore for MemoryPool.

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::health::status_after;
use proxypool_core::{
    CheckOutcome, DueQuery, HealthBatch, HealthReport, HealthStore, PoolResult, ProxyRecord,
    ProxyStatus, UnixMillis,
};

#[async_trait]
impl HealthStore for MemoryPool {
    async fn apply_health(&self, now: UnixMillis, batch: HealthBatch) -> PoolResult<HealthReport> {
        batch.validate()?;
        let mut state = self.lock_for_write(now)?;
        let mut report = HealthReport::default();
        for observation in batch.observations {
            let Some(current) = state.live_record(&observation.proxy_id, now) else {
                report.ignored += 1;
                continue;
            };
            let stale = current
                .health
                .checked_at_ms
                .is_some_and(|at| at > observation.checked_at_ms);
            if !current.status.accepts_health() || stale {
                report.ignored += 1;
                continue;
            }
            let mut record = current.clone();
            record.health.checked_at_ms = Some(observation.checked_at_ms);
            match &observation.outcome {
                CheckOutcome::Success { latency_ms } => {
                    record.health.succeeded_at_ms = Some(observation.checked_at_ms);
                    record.health.latency_ms = Some(*latency_ms);
                    record.health.failures = 0;
                    record.health.last_error = None;
                }
                CheckOutcome::Failure { error } => {
                    record.health.failures = record.health.failures.saturating_add(1);
                    record.health.last_error = Some(error.clone());
                }
            }
            record.status = status_after(
                &observation.outcome,
                record.health.failures,
                batch.unhealthy_after_failures,
            );
            state.replace_record(record);
            report.applied += 1;
        }
        Ok(report)
    }

    async fn due_for_check(
        &self,
        now: UnixMillis,
        query: DueQuery,
    ) -> PoolResult<Vec<ProxyRecord>> {
        let state = self.lock()?;
        // (priority, since, id): FETCHED first, then SUSPECT, then stale re-checks.
        let mut due: Vec<(u8, u64, &ProxyRecord)> = state
            .records
            .values()
            .filter(|r| now < r.hard_expiry_ms)
            .filter_map(|r| {
                let checked = r.health.checked_at_ms.unwrap_or(0);
                let stale = checked.saturating_add(query.recheck_after_ms) <= now;
                match r.status {
                    ProxyStatus::Fetched => Some((0, r.fetched_at_ms, r)),
                    ProxyStatus::Suspect => Some((1, checked, r)),
                    ProxyStatus::Available | ProxyStatus::Unhealthy if stale => {
                        Some((2, checked, r))
                    }
                    _ => None,
                }
            })
            .collect();
        due.sort_by(|a, b| (a.0, a.1, &a.2.id).cmp(&(b.0, b.1, &b.2.id)));
        Ok(due
            .into_iter()
            .take(query.limit)
            .map(|(_, _, r)| r.clone())
            .collect())
    }
}
