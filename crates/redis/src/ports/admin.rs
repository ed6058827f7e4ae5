//! AdminStore: worker modes (and keyed mode changes' answers) and provider status (`worker_mode*.lua`,
//! `provider_status*.lua`), one hash each under the pool's base.

use crate::codec::{corrupt, parse_u64};
use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::admin::{MAX_KEYED_ADMIN_CALLS, MAX_PROVIDER_STATUSES, MAX_WORKER_MODES};
use proxypool_core::extract::validate_idempotency_key;
use proxypool_core::{
    AdminStore, KeyedCall, KeyedModeSet, PoolError, PoolResult, ProviderStatus, UnixMillis,
    WorkerId, WorkerMode, WorkerModeRecord,
};

fn mode_record(worker: &str, value: &str) -> PoolResult<WorkerModeRecord> {
    let (mode, since) = value
        .split_once('\t')
        .ok_or_else(|| corrupt("worker mode"))?;
    Ok(WorkerModeRecord {
        worker: WorkerId::new(worker).map_err(|_| corrupt("worker mode"))?,
        mode: WorkerMode::parse(mode).ok_or_else(|| corrupt("worker mode"))?,
        since_ms: parse_u64(since, "worker mode")?,
    })
}

impl GroupPool {
    async fn set_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
        call: Option<&KeyedCall>,
    ) -> PoolResult<KeyedModeSet> {
        let args = vec![
            worker.as_str().to_owned(),
            mode.as_str().to_owned(),
            MAX_WORKER_MODES.to_string(),
            call.map_or_else(String::new, |c| format!("{}\t{}", c.client.as_str(), c.key)),
            call.map_or(0, |c| c.held_ms).to_string(),
            MAX_KEYED_ADMIN_CALLS.to_string(),
        ];
        let reply = self
            .call(&self.scripts.worker_mode_set, now, Side::Write, args)
            .await?;
        match reply.status.as_str() {
            "too_many" => {
                return Err(PoolError::invalid(format!(
                    "{MAX_WORKER_MODES} workers are already cordoned or draining"
                )));
            }
            "too_many_calls" => {
                return Err(PoolError::invalid(format!(
                    "{MAX_KEYED_ADMIN_CALLS} keyed admin answers are already held"
                )));
            }
            _ => {}
        }
        let value = format!("{}\t{}", reply.text(0)?, reply.text(1)?);
        Ok(KeyedModeSet {
            record: mode_record(worker.as_str(), &value)?,
            replayed: reply.text(2)? == "1",
        })
    }
}

#[async_trait]
impl AdminStore for GroupPool {
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
    ) -> PoolResult<WorkerModeRecord> {
        Ok(self.set_mode(now, worker, mode, None).await?.record)
    }

    async fn set_worker_mode_keyed(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
        call: &KeyedCall,
    ) -> PoolResult<KeyedModeSet> {
        validate_idempotency_key(&call.key)?;
        self.set_mode(now, worker, mode, Some(call)).await
    }

    async fn worker_modes(&self) -> PoolResult<Vec<WorkerModeRecord>> {
        let reply = self
            .call(&self.scripts.worker_modes, 0, Side::Read, Vec::new())
            .await?;
        let mut out = Vec::with_capacity(reply.items.len() / 2);
        for pair in (0..reply.items.len()).step_by(2) {
            out.push(mode_record(&reply.text(pair)?, &reply.text(pair + 1)?)?);
        }
        out.sort_by(|a, b| a.worker.cmp(&b.worker));
        Ok(out)
    }

    async fn put_provider_status(
        &self,
        now: UnixMillis,
        status: &ProviderStatus,
    ) -> PoolResult<()> {
        let text = status.encode()?;
        let upstream = status.upstream.as_ref().expect("checked by encode");
        let args = vec![
            upstream.as_str().to_owned(),
            text,
            MAX_PROVIDER_STATUSES.to_string(),
        ];
        let reply = self
            .call(&self.scripts.provider_status_put, now, Side::Write, args)
            .await?;
        match reply.status.as_str() {
            "too_many" => Err(PoolError::invalid(format!(
                "{MAX_PROVIDER_STATUSES} upstreams already have a stored status"
            ))),
            _ => Ok(()),
        }
    }

    async fn provider_statuses(&self) -> PoolResult<Vec<ProviderStatus>> {
        let reply = self
            .call(&self.scripts.provider_statuses, 0, Side::Read, Vec::new())
            .await?;
        let mut out = Vec::with_capacity(reply.items.len());
        for i in 0..reply.items.len() {
            out.push(ProviderStatus::decode(&reply.text(i)?)?);
        }
        out.sort_by(|a, b| a.upstream.cmp(&b.upstream));
        Ok(out)
    }
}
