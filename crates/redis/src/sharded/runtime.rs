//! WorkerRuntimeStore over groups. Every group keeps a copy of each worker session and of
//! the snapshots issued to and acknowledged by it, written to the others before the home
//! group, so each group judges its own proxies against the session atomically (a report's
//! entries, an orphan release); a session is granted (opened, renewed, acknowledged) only
//! when every group took it, and only until the earliest end any group holds. A runtime
//! report goes to every group with that group's entries (its usage to the home group
//! alone). The snapshot counter of a worker is the groups' counters read as one, so a
//! journal version means the same in every group.

use super::RedisPool;
use super::calls::Counter;
use crate::group::GroupPool;
use async_trait::async_trait;
use futures_util::future::try_join_all;
use proxypool_core::{
    Holding, PoolResult, ProxyId, ReportOutcome, ReportReceipt, RuntimeReport, SnapshotChanges,
    SnapshotRef, SnapshotVersion, StoredRuntime, UnixMillis, WorkerId, WorkerRuntimeStore,
    WorkerSession,
};
use std::future::Future;

impl RedisPool {
    /// Runs `call` on every group but the home one (together), then on the home one, and
    /// answers the home group's session cut at the earliest end any group holds.
    async fn on_every_group<'a, F, Fut>(&'a self, call: F) -> PoolResult<WorkerSession>
    where
        F: Fn(&'a GroupPool) -> Fut,
        Fut: Future<Output = PoolResult<WorkerSession>>,
    {
        let others = try_join_all(self.groups()[1..].iter().map(&call)).await?;
        let mut session = call(self.home()).await?;
        for other in others {
            session.expires_at_ms = session.expires_at_ms.min(other.expires_at_ms);
        }
        Ok(session)
    }
}

#[async_trait]
impl WorkerRuntimeStore for RedisPool {
    async fn open_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        self.on_every_group(|g| g.open_session(now, worker, session_id, ttl_ms))
            .await
    }

    async fn renew_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        self.on_every_group(|g| g.renew_session(now, worker, session_id, ttl_ms))
            .await
    }

    async fn close_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<()> {
        try_join_all(
            self.groups()
                .iter()
                .map(|g| g.close_session(now, worker, session_id)),
        )
        .await
        .map(|_| ())
    }

    async fn session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<WorkerSession>> {
        self.home().session(now, worker).await
    }

    async fn live_sessions(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<WorkerSession>> {
        self.home().live_sessions(now, limit).await
    }

    async fn issue_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<()> {
        try_join_all(
            self.groups()[1..]
                .iter()
                .map(|g| g.issue_snapshot(now, worker, session_id, snapshot.clone())),
        )
        .await?;
        self.home()
            .issue_snapshot(now, worker, session_id, snapshot)
            .await
    }

    async fn ack_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<WorkerSession> {
        self.on_every_group(|g| g.ack_snapshot(now, worker, session_id, snapshot.clone()))
            .await
    }

    async fn report_runtime(
        &self,
        now: UnixMillis,
        report: RuntimeReport,
        ttl_ms: u64,
    ) -> PoolResult<ReportReceipt> {
        if let Some(one) = self.single() {
            return one.report_runtime(now, report, ttl_ms).await;
        }
        report.validate()?;
        let mut entries = self.split(report.entries.iter().cloned(), |e| &e.proxy_id);
        let parts: Vec<RuntimeReport> = (0..self.groups().len())
            .map(|g| RuntimeReport {
                entries: std::mem::take(&mut entries[g]),
                usage: if g == 0 { report.usage.clone() } else { None },
                ..report.clone()
            })
            .collect();
        let mut parts = parts.into_iter();
        let home_part = parts.next().expect("a home group");
        let others = try_join_all(
            self.groups()[1..]
                .iter()
                .zip(parts)
                .map(|(g, part)| g.report_runtime(now, part, ttl_ms)),
        )
        .await?;
        let mut receipt = self.home().report_runtime(now, home_part, ttl_ms).await?;
        for other in others {
            if other.outcome == ReportOutcome::Accepted {
                receipt.outcome = ReportOutcome::Accepted;
            }
            receipt.session_expires_at_ms = receipt
                .session_expires_at_ms
                .min(other.session_expires_at_ms);
            receipt.stale_proxies.extend(other.stale_proxies);
        }
        // In report order, as one group names them.
        let order: std::collections::HashMap<&ProxyId, usize> = report
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (&e.proxy_id, i))
            .collect();
        receipt
            .stale_proxies
            .sort_by_key(|id| order.get(id).copied().unwrap_or(usize::MAX));
        Ok(receipt)
    }

    async fn runtime(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<StoredRuntime>> {
        if let Some(one) = self.single() {
            return one.runtime(now, worker).await;
        }
        let parts = try_join_all(self.groups().iter().map(|g| g.runtime(now, worker))).await?;
        let mut parts = parts.into_iter();
        let Some(mut whole) = parts.next().flatten() else {
            return Ok(None);
        };
        for part in parts.flatten() {
            if part.report.sequence == whole.report.sequence {
                whole.report.entries.extend(part.report.entries);
            }
        }
        whole
            .report
            .entries
            .sort_by(|a, b| a.proxy_id.cmp(&b.proxy_id));
        Ok(Some(whole))
    }

    async fn snapshot_version(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<SnapshotVersion> {
        if let Some(one) = self.single() {
            return one.snapshot_version(now, worker).await;
        }
        let versions = try_join_all(
            self.groups()
                .iter()
                .map(|g| g.snapshot_version(now, worker)),
        )
        .await?;
        let counters = versions.iter().map(|v| v.worker).collect();
        // Counters carry no time; `now` only dates a raised counter's native TTL.
        Ok(SnapshotVersion {
            worker: self
                .read_as_one(now, Counter::Snapshot(worker.as_str()), counters)
                .await?,
            feedback: versions[0].feedback,
        })
    }

    async fn snapshot_changes(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        after: u64,
        also: &[ProxyId],
        limit: usize,
    ) -> PoolResult<SnapshotChanges> {
        if let Some(one) = self.single() {
            return one.snapshot_changes(now, worker, after, also, limit).await;
        }
        let asked = self.split(also.iter().cloned(), |id| id);
        let parts = try_join_all(
            self.groups()
                .iter()
                .zip(&asked)
                .map(|(g, ids)| g.snapshot_changes(now, worker, after, ids, limit)),
        )
        .await?;
        let counters = parts.iter().map(|p| p.version.worker).collect();
        let version = SnapshotVersion {
            worker: self
                .read_as_one(now, Counter::Snapshot(worker.as_str()), counters)
                .await?,
            feedback: parts[0].version.feedback,
        };
        // Known only when every group can say.
        let mut changed: Option<Vec<(ProxyId, Holding)>> = parts
            .into_iter()
            .map(|p| p.changed)
            .collect::<Option<Vec<_>>>()
            .map(|all| all.into_iter().flatten().collect());
        if let Some(all) = changed.as_mut() {
            all.sort_by(|a, b| a.0.cmp(&b.0));
        }
        // Each group's journal keeps up to the cap; the whole answers as one journal of that
        // cap would, so a version is forgotten at the same point whatever the groups.
        let changed = changed.filter(|all| {
            all.len() <= limit.min(proxypool_core::SNAPSHOT_JOURNAL_CAP.saturating_add(also.len()))
        });
        Ok(SnapshotChanges { version, changed })
    }
}
