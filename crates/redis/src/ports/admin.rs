//! AdminStore: worker modes and provider status (`worker_mode*.lua`,
//! `provider_status*.lua`), one hash each under the pool's base.

use crate::codec::{corrupt, parse_u64};
use crate::pool::{RedisPool, Side};
use async_trait::async_trait;
use proxypool_core::admin::{MAX_PROVIDER_STATUSES, MAX_WORKER_MODES};
use proxypool_core::{
    AdminStore, PoolError, PoolResult, ProviderStatus, UnixMillis, WorkerId, WorkerMode,
    WorkerModeRecord,
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

#[async_trait]
impl AdminStore for RedisPool {
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
    ) -> PoolResult<WorkerModeRecord> {
        let args = vec![
            worker.as_str().to_owned(),
            mode.as_str().to_owned(),
            MAX_WORKER_MODES.to_string(),
        ];
        let reply = self
            .call(&self.scripts.worker_mode_set, now, Side::Write, args)
            .await?;
        if reply.status == "too_many" {
            return Err(PoolError::invalid(format!(
                "{MAX_WORKER_MODES} workers are already cordoned or draining"
            )));
        }
        let value = format!("{}\t{}", reply.text(0)?, reply.text(1)?);
        mode_record(worker.as_str(), &value)
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
