//! Maintenance: `sweep.lua` removes expired state in batches of `limit`; `footprint.lua`
//! counts what the pool holds.

use crate::group::{GroupPool, Side};
use crate::reply;
use async_trait::async_trait;
use proxypool_core::{Footprint, Maintenance, PoolResult, SweepReport, UnixMillis};

#[async_trait]
impl Maintenance for GroupPool {
    async fn sweep(&self, now: UnixMillis, limit: usize) -> PoolResult<SweepReport> {
        // A fixed work bound per script; `more_pending` tells the caller to come back.
        let limit = limit.min(self.options.inventory_scan_budget).to_string();
        let value = self
            .eval(&self.scripts.sweep, now, Side::Read, vec![limit])
            .await?;
        let n = reply::items(value)?
            .iter()
            .map(reply::number)
            .collect::<PoolResult<Vec<_>>>()?;
        let count = |i: usize| n.get(i).copied().unwrap_or(0) as u32;
        Ok(SweepReport {
            records_removed: count(0),
            assignments_removed: count(1),
            sessions_removed: count(2),
            results_removed: count(3),
            records_released: count(5),
            more_pending: count(4) == 1,
        })
    }

    async fn footprint(&self) -> PoolResult<Footprint> {
        let value = self
            .eval(&self.scripts.footprint, 0, Side::Read, Vec::new())
            .await?;
        let n = reply::items(value)?
            .iter()
            .map(reply::number)
            .collect::<PoolResult<Vec<_>>>()?;
        let count = |i: usize| n.get(i).copied().unwrap_or(0);
        Ok(Footprint {
            records: count(0),
            assignments: count(1),
            sessions: count(2),
            runtimes: count(3),
            results: count(4),
            index_entries: count(5),
        })
    }
}
