//! AdminStore for MemoryPool: worker modes (and the answers of keyed mode changes) and
//! provider status in the shared state.

use super::MemoryPool;
use super::state::State;
use async_trait::async_trait;
use proxypool_core::admin::{MAX_KEYED_ADMIN_CALLS, MAX_PROVIDER_STATUSES, MAX_WORKER_MODES};
use proxypool_core::extract::validate_idempotency_key;
use proxypool_core::{
    AdminStore, Conflict, KeyedCall, KeyedModeSet, PoolError, PoolResult, ProviderStatus,
    UnixMillis, WorkerId, WorkerMode, WorkerModeRecord,
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
        set_mode(&mut state, now, worker, mode)
    }

    async fn set_worker_mode_keyed(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
        call: &KeyedCall,
    ) -> PoolResult<KeyedModeSet> {
        validate_idempotency_key(&call.key)?;
        let slot = (call.client.clone(), call.key.clone());
        let mut state = self.lock_for_write(now)?;
        state.keyed_admin_calls.retain(|_, (_, until)| *until > now);
        if let Some((record, _)) = state.keyed_admin_calls.get(&slot) {
            if record.worker != *worker || record.mode != mode {
                return Err(PoolError::Conflict(Conflict::IdempotencyDigest));
            }
            return Ok(KeyedModeSet {
                record: record.clone(),
                replayed: true,
            });
        }
        if state.keyed_admin_calls.len() >= MAX_KEYED_ADMIN_CALLS {
            return Err(PoolError::invalid(format!(
                "{MAX_KEYED_ADMIN_CALLS} keyed admin answers are already held"
            )));
        }
        let record = set_mode(&mut state, now, worker, mode)?;
        state
            .keyed_admin_calls
            .insert(slot, (record.clone(), now.saturating_add(call.held_ms)));
        Ok(KeyedModeSet {
            record,
            replayed: false,
        })
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

/// Sets `worker`'s mode in `state` (the rule of [`AdminStore::set_worker_mode`]).
fn set_mode(
    state: &mut State,
    now: UnixMillis,
    worker: &WorkerId,
    mode: WorkerMode,
) -> PoolResult<WorkerModeRecord> {
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
