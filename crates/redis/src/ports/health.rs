//! HealthStore: `health.lua` applies a batch atomically; `due.lua` lists what to check.

use crate::codec::record;
use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::{
    CheckOutcome, DueQuery, HealthBatch, HealthReport, HealthStore, PoolResult, ProxyRecord,
    UnixMillis,
};

#[async_trait]
impl HealthStore for GroupPool {
    async fn apply_health(&self, now: UnixMillis, batch: HealthBatch) -> PoolResult<HealthReport> {
        batch.validate()?;
        let mut args = Vec::with_capacity(1 + batch.observations.len() * 3);
        args.push(batch.unhealthy_after_failures.to_string());
        for observation in &batch.observations {
            args.push(observation.proxy_id.to_string());
            args.push(observation.checked_at_ms.to_string());
            args.push(match &observation.outcome {
                CheckOutcome::Success { latency_ms } => format!("s{latency_ms}"),
                CheckOutcome::Failure { error } => format!("f{error}"),
            });
        }
        let reply = self
            .call(&self.scripts.health, now, Side::Write, args)
            .await?;
        Ok(HealthReport {
            applied: reply.number(0)? as u32,
            ignored: reply.number(1)? as u32,
        })
    }

    async fn due_for_check(
        &self,
        now: UnixMillis,
        query: DueQuery,
    ) -> PoolResult<Vec<ProxyRecord>> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let args = vec![
            query.limit.min(crate::codec::MAX_MS as usize).to_string(),
            query.recheck_after_ms.min(crate::codec::MAX_MS).to_string(),
            self.options.inventory_scan_budget.to_string(),
        ];
        let reply = self.call(&self.scripts.due, now, Side::Read, args).await?;
        reply.texts()?.iter().map(|r| record::decode(r)).collect()
    }
}
