//! The activity pool as the controller calls it: every port call timed and its errors
//! counted, labelled by the call's name (the port method, a fixed set).
//!
//! The controller wraps its store once ([`MeteredPool`]) and hands the wrapper to its
//! loops, its snapshot publisher and its control API; the unwrapped pool goes to a client
//! API in the same process, which times its own calls under its own names.

use super::{STORE_ERRORS, STORE_SECONDS, error_label};
use async_trait::async_trait;
use proxypool_core::{
    ActivityPool, Assignment, ClientId, DueQuery, ExtractOutcome, ExtractRequest, ExtractResponse,
    ExtractionId, Extractor, FetchedBatch, Footprint, HealthBatch, HealthReport, HealthStore,
    InventoryReader, InventoryView, Maintenance, OwnedProxy, OwnershipRepository, PoolResult,
    ProxyId, ProxyRecord, ReportReceipt, RuntimeReport, SnapshotRef, SnapshotVersion,
    StoredRuntime, SweepReport, UnixMillis, UpsertReport, Upserter, UpstreamId, WorkerId,
    WorkerRuntimeStore, WorkerSession,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// An activity pool whose calls are recorded in `proxypool_controller_store_*`.
#[derive(Debug)]
pub struct MeteredPool {
    inner: Arc<dyn ActivityPool>,
}

impl MeteredPool {
    pub fn new(inner: Arc<dyn ActivityPool>) -> Self {
        MeteredPool { inner }
    }
}

/// Times one call and counts its error, if any.
async fn timed<T>(
    call: &'static str,
    future: impl Future<Output = PoolResult<T>>,
) -> PoolResult<T> {
    let started = Instant::now();
    let result = future.await;
    metrics::histogram!(STORE_SECONDS, "call" => call).record(started.elapsed().as_secs_f64());
    if let Err(error) = &result {
        metrics::counter!(STORE_ERRORS, "call" => call, "error" => error_label(error)).increment(1);
    }
    result
}

#[async_trait]
impl Upserter for MeteredPool {
    async fn upsert(&self, now: UnixMillis, batch: FetchedBatch) -> PoolResult<UpsertReport> {
        timed("upsert", self.inner.upsert(now, batch)).await
    }
}

#[async_trait]
impl HealthStore for MeteredPool {
    async fn apply_health(&self, now: UnixMillis, batch: HealthBatch) -> PoolResult<HealthReport> {
        timed("apply_health", self.inner.apply_health(now, batch)).await
    }

    async fn due_for_check(
        &self,
        now: UnixMillis,
        query: DueQuery,
    ) -> PoolResult<Vec<ProxyRecord>> {
        timed("due_for_check", self.inner.due_for_check(now, query)).await
    }
}

#[async_trait]
impl Extractor for MeteredPool {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        timed("extract", self.inner.extract(now, request)).await
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        timed("get_extraction", self.inner.get_extraction(now, client, id)).await
    }
}

#[async_trait]
impl OwnershipRepository for MeteredPool {
    async fn assign(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        timed("assign", self.inner.assign(now, proxy, worker, lease_ms)).await
    }

    async fn renew(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        timed(
            "renew",
            self.inner.renew(now, proxy, worker, epoch, lease_ms),
        )
        .await
    }

    async fn begin_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
    ) -> PoolResult<Assignment> {
        timed(
            "begin_drain",
            self.inner.begin_drain(now, proxy, worker, epoch),
        )
        .await
    }

    async fn acknowledge_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        active: u32,
        reserved: u32,
    ) -> PoolResult<()> {
        let call = self
            .inner
            .acknowledge_drain(now, proxy, worker, epoch, active, reserved);
        timed("acknowledge_drain", call).await
    }

    async fn get(&self, now: UnixMillis, proxy: &ProxyId) -> PoolResult<Option<Assignment>> {
        timed("get", self.inner.get(now, proxy)).await
    }

    async fn expire(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        timed("expire", self.inner.expire(now, limit)).await
    }

    async fn release_orphaned(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        timed("release_orphaned", self.inner.release_orphaned(now, limit)).await
    }

    async fn assignable(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<ProxyRecord>> {
        timed("assignable", self.inner.assignable(now, limit)).await
    }

    async fn owned_by(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<OwnedProxy>> {
        timed("owned_by", self.inner.owned_by(now, worker, limit)).await
    }

    async fn draining_of(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<Assignment>> {
        timed("draining_of", self.inner.draining_of(now, worker, limit)).await
    }

    async fn current_epoch(&self) -> PoolResult<u64> {
        timed("current_epoch", self.inner.current_epoch()).await
    }
}

#[async_trait]
impl WorkerRuntimeStore for MeteredPool {
    async fn open_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        let call = self.inner.open_session(now, worker, session_id, ttl_ms);
        timed("open_session", call).await
    }

    async fn renew_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        let call = self.inner.renew_session(now, worker, session_id, ttl_ms);
        timed("renew_session", call).await
    }

    async fn close_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<()> {
        let call = self.inner.close_session(now, worker, session_id);
        timed("close_session", call).await
    }

    async fn session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<WorkerSession>> {
        timed("session", self.inner.session(now, worker)).await
    }

    async fn live_sessions(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<WorkerSession>> {
        timed("live_sessions", self.inner.live_sessions(now, limit)).await
    }

    async fn issue_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<()> {
        let call = self.inner.issue_snapshot(now, worker, session_id, snapshot);
        timed("issue_snapshot", call).await
    }

    async fn ack_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<WorkerSession> {
        let call = self.inner.ack_snapshot(now, worker, session_id, snapshot);
        timed("ack_snapshot", call).await
    }

    async fn report_runtime(
        &self,
        now: UnixMillis,
        report: RuntimeReport,
        ttl_ms: u64,
    ) -> PoolResult<ReportReceipt> {
        timed(
            "report_runtime",
            self.inner.report_runtime(now, report, ttl_ms),
        )
        .await
    }

    async fn runtime(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<StoredRuntime>> {
        timed("runtime", self.inner.runtime(now, worker)).await
    }

    async fn snapshot_version(&self, worker: &WorkerId) -> PoolResult<SnapshotVersion> {
        timed("snapshot_version", self.inner.snapshot_version(worker)).await
    }
}

#[async_trait]
impl InventoryReader for MeteredPool {
    async fn inventory(&self, now: UnixMillis, upstream: &UpstreamId) -> PoolResult<InventoryView> {
        timed("inventory", self.inner.inventory(now, upstream)).await
    }
}

#[async_trait]
impl Maintenance for MeteredPool {
    async fn sweep(&self, now: UnixMillis, limit: usize) -> PoolResult<SweepReport> {
        timed("sweep", self.inner.sweep(now, limit)).await
    }

    async fn footprint(&self) -> PoolResult<Footprint> {
        timed("footprint", self.inner.footprint()).await
    }
}

#[async_trait]
impl proxypool_core::UsageReader for MeteredPool {
    async fn usage(
        &self,
        now: UnixMillis,
        clients: &[proxypool_core::ClientId],
    ) -> PoolResult<Vec<proxypool_core::usage::ClientUsage>> {
        timed("usage", self.inner.usage(now, clients)).await
    }
}

#[async_trait]
impl proxypool_core::AdminStore for MeteredPool {
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: proxypool_core::WorkerMode,
    ) -> PoolResult<proxypool_core::WorkerModeRecord> {
        timed(
            "set_worker_mode",
            self.inner.set_worker_mode(now, worker, mode),
        )
        .await
    }

    async fn worker_modes(&self) -> PoolResult<Vec<proxypool_core::WorkerModeRecord>> {
        timed("worker_modes", self.inner.worker_modes()).await
    }

    async fn put_provider_status(
        &self,
        now: UnixMillis,
        status: &proxypool_core::ProviderStatus,
    ) -> PoolResult<()> {
        timed(
            "put_provider_status",
            self.inner.put_provider_status(now, status),
        )
        .await
    }

    async fn provider_statuses(&self) -> PoolResult<Vec<proxypool_core::ProviderStatus>> {
        timed("provider_statuses", self.inner.provider_statuses()).await
    }
}

#[async_trait]
impl proxypool_core::ProxyLister for MeteredPool {
    async fn list_proxies(
        &self,
        now: UnixMillis,
        filter: &proxypool_core::ProxyListFilter,
        limit: usize,
    ) -> PoolResult<proxypool_core::ProxyPage> {
        timed("list_proxies", self.inner.list_proxies(now, filter, limit)).await
    }
}

#[async_trait]
impl proxypool_core::CooldownStore for MeteredPool {
    async fn apply_cooldowns(
        &self,
        now: UnixMillis,
        changes: &[proxypool_core::CooldownChange],
    ) -> PoolResult<proxypool_core::CooldownReport> {
        timed("apply_cooldowns", self.inner.apply_cooldowns(now, changes)).await
    }

    async fn cooldowns_of(
        &self,
        now: UnixMillis,
        proxies: &[ProxyId],
    ) -> PoolResult<Vec<proxypool_core::DomainCooldown>> {
        timed("cooldowns_of", self.inner.cooldowns_of(now, proxies)).await
    }

    async fn add_session_feedback(
        &self,
        now: UnixMillis,
        feedback: proxypool_core::SessionFeedback,
    ) -> PoolResult<()> {
        timed(
            "add_session_feedback",
            self.inner.add_session_feedback(now, feedback),
        )
        .await
    }

    async fn session_feedback(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> PoolResult<Vec<proxypool_core::SessionFeedback>> {
        timed("session_feedback", self.inner.session_feedback(now, limit)).await
    }

    async fn return_extracted(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<proxypool_core::ReturnOutcome> {
        timed(
            "return_extracted",
            self.inner.return_extracted(now, client, proxy),
        )
        .await
    }
}

impl proxypool_core::Fencing for MeteredPool {
    fn fenced(&self, fence: proxypool_core::Fence) -> Arc<dyn ActivityPool> {
        Arc::new(MeteredPool::new(self.inner.fenced(fence)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_metrics::MetricsHandle;
    use proxypool_pool::MemoryPool;

    #[test]
    fn calls_are_timed_and_errors_counted_by_call() {
        let (recorder, handle) = MetricsHandle::local();
        let pool = MeteredPool::new(Arc::new(MemoryPool::new(Default::default())));
        let worker = WorkerId::new("w1").unwrap();
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        // The local recorder is per thread: run the calls on this thread.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            runtime.block_on(async {
                pool.live_sessions(1_000, 10).await.unwrap();
                assert!(pool.renew(1_000, &proxy, &worker, 1, 10).await.is_err());
            })
        });
        let text = handle.render();
        for expected in [
            "proxypool_controller_store_duration_seconds_count{call=\"live_sessions\"} 1\n",
            "proxypool_controller_store_duration_seconds_count{call=\"renew\"} 1\n",
            "proxypool_controller_store_errors_total{call=\"renew\",error=\"not_found\"} 1\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
        assert!(
            !text.contains("store_errors_total{call=\"live_sessions\""),
            "{text}"
        );
    }
}
