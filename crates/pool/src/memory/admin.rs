//! AdminStore for MemoryPool: worker modes and provider status in the shared state.

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::admin::{MAX_PROVIDER_STATUSES, MAX_WORKER_MODES};
use proxypool_core::{
    AdminStore, PoolError, PoolResult, ProviderStatus, UnixMillis, WorkerId, WorkerMode,
    WorkerModeRecord,
};

#[async_trait]
impl AdminStore for MemoryPool {
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
    ) -> PoolResult<WorkerModeRecord> {
        let mut state = self.lock_for_write(now)?;
        let record = WorkerModeRecord {
            worker: worker.clone(),
            mode,
            since_ms: now,
        };
        if mode == WorkerMode::Active {
            state.worker_modes.remove(worker);
            return Ok(record);
        }
        if let Some(existing) = state.worker_modes.get_mut(worker) {
            if existing.mode != mode {
                *existing = record;
            }
            return Ok(existing.clone());
        }
        if state.worker_modes.len() >= MAX_WORKER_MODES {
            return Err(PoolError::invalid(format!(
                "{MAX_WORKER_MODES} workers are already cordoned or draining"
            )));
        }
        state.worker_modes.insert(worker.clone(), record.clone());
        Ok(record)
    }

    async fn worker_modes(&self) -> PoolResult<Vec<WorkerModeRecord>> {
        Ok(self.lock()?.worker_modes.values().cloned().collect())
    }

    async fn put_provider_status(
        &self,
        now: UnixMillis,
        status: &ProviderStatus,
    ) -> PoolResult<()> {
        // Same validation as the stores that keep it encoded.
        status.encode()?;
        let upstream = status.upstream.clone().expect("checked by encode");
        let mut state = self.lock_for_write(now)?;
        if !state.provider_statuses.contains_key(&upstream)
            && state.provider_statuses.len() >= MAX_PROVIDER_STATUSES
        {
            return Err(PoolError::invalid(format!(
                "{MAX_PROVIDER_STATUSES} upstreams already have a stored status"
            )));
        }
        state.provider_statuses.insert(upstream, status.clone());
        Ok(())
    }

    async fn provider_statuses(&self) -> PoolResult<Vec<ProviderStatus>> {
        Ok(self.lock()?.provider_statuses.values().cloned().collect())
    }
}
