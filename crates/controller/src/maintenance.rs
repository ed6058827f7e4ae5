//! The maintenance loop: removes expired records, sessions and stored results in bounded
//! batches, so memory stays bounded under continuous short-TTL churn even when writes
//! (which also clean up a little on the side) are rare.

use crate::clock::SharedClock;
use crate::config::MaintenanceConfig;
use crate::leadership::job::LeaderJob;
use proxypool_core::{Maintenance, PoolResult, SweepReport};
use std::sync::Arc;

/// Sweep calls per round when more is pending (bounded, like everything else).
const SWEEPS_PER_ROUND: usize = 16;

/// Sweeps expired records in bounded batches while this controller leads.
#[derive(Debug)]
pub struct Sweeper {
    store: Arc<dyn Maintenance>,
    clock: SharedClock,
    config: MaintenanceConfig,
}

impl Sweeper {
    pub fn new(store: Arc<dyn Maintenance>, clock: SharedClock, config: MaintenanceConfig) -> Self {
        Sweeper {
            store,
            clock,
            config,
        }
    }

    /// Sweeps until nothing expired is pending (or the per-round bound is reached).
    pub async fn sweep_round(&self) -> PoolResult<SweepReport> {
        let mut total = SweepReport::default();
        for _ in 0..SWEEPS_PER_ROUND {
            let report = self
                .store
                .sweep(self.clock.now(), self.config.batch)
                .await?;
            // Per call, so what a round removed before a failing call is still counted.
            crate::metrics::sweep_removed(&report);
            total.records_removed += report.records_removed;
            total.assignments_removed += report.assignments_removed;
            total.sessions_removed += report.sessions_removed;
            total.results_removed += report.results_removed;
            total.more_pending = report.more_pending;
            if !report.more_pending {
                break;
            }
        }
        Ok(total)
    }
}

impl LeaderJob for Sweeper {
    const NAME: &'static str = "maintenance";

    fn begin_term(&mut self, store: Arc<dyn proxypool_core::ActivityPool>) {
        self.store = store;
    }

    async fn round(&mut self) -> std::time::Duration {
        let result = self.sweep_round().await;
        crate::metrics::sweep_round(result.is_ok());
        if let Err(e) = result {
            tracing::warn!("maintenance sweep failed: {e}");
        }
        self.config.interval.as_duration()
    }
}
