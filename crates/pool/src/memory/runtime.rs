//! WorkerRuntimeStore for MemoryPool: sessions that fence their predecessors, snapshot
//! acknowledgements and strictly sequenced runtime reports.

use super::MemoryPool;
use super::state::{SessionState, State};
use async_trait::async_trait;
use proxypool_core::runtime::validate_session_id;
use proxypool_core::{
    Conflict, PoolError, PoolResult, ProxyId, ReportOutcome, ReportReceipt, RuntimeReport,
    SnapshotChanges, SnapshotRef, SnapshotVersion, StoredRuntime, UnixMillis, WorkerId,
    WorkerRuntimeStore, WorkerSession,
};
use std::collections::BTreeSet;

fn check_ttl(ttl_ms: u64) -> PoolResult<()> {
    if ttl_ms == 0 {
        return Err(PoolError::invalid("ttl_ms must be at least 1"));
    }
    Ok(())
}

/// The live session `session_id` of `worker`, or `Fenced` when another one (or none) is
/// current.
fn current_session<'a>(
    state: &'a mut State,
    now: UnixMillis,
    worker: &WorkerId,
    session_id: &str,
) -> PoolResult<&'a mut SessionState> {
    match state.sessions.get_mut(worker) {
        Some(current)
            if current.session.session_id == session_id && current.session.is_live(now) =>
        {
            Ok(current)
        }
        _ => Err(PoolError::Conflict(Conflict::Fenced)),
    }
}

/// Whether `worker` owns `proxy` with a live lease at or before `epoch`: only then are
/// non-zero counts on it believable.
fn owns_at(state: &State, now: UnixMillis, proxy: &ProxyId, worker: &WorkerId, epoch: u64) -> bool {
    state
        .assignments
        .get(proxy)
        .is_some_and(|a| &a.worker == worker && a.epoch <= epoch && now < a.lease_until_ms)
}

/// Takes the stale entries (busy on a proxy the worker does not own) out of the report and
/// returns their ids, in report order.
fn take_stale_entries(state: &State, now: UnixMillis, report: &mut RuntimeReport) -> Vec<ProxyId> {
    let (worker, epoch) = (&report.worker, report.snapshot.epoch);
    let mut stale = Vec::new();
    report.entries.retain(|entry| {
        let idle = entry.active == 0 && entry.reserved == 0;
        if idle || owns_at(state, now, &entry.proxy_id, worker, epoch) {
            return true;
        }
        stale.push(entry.proxy_id.clone());
        false
    });
    stale
}

/// Extends the session to at least `now + ttl_ms` (a report never shortens it).
fn renew(session: &mut WorkerSession, now: UnixMillis, ttl_ms: u64) -> UnixMillis {
    session.expires_at_ms = session.expires_at_ms.max(now.saturating_add(ttl_ms));
    session.expires_at_ms
}

#[async_trait]
impl WorkerRuntimeStore for MemoryPool {
    async fn open_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        validate_session_id(session_id)?;
        check_ttl(ttl_ms)?;
        let mut state = self.lock_for_write(now)?;
        let expires_at_ms = now.saturating_add(ttl_ms);
        if let Ok(current) = current_session(&mut state, now, worker, session_id) {
            current.session.expires_at_ms = expires_at_ms;
            return Ok(current.session.clone());
        }
        // A new session: the old one's runtime no longer describes anything we can trust,
        // and a poll waiting on the old one must see it fenced.
        state.forget_session(worker);
        let session = WorkerSession {
            worker: worker.clone(),
            session_id: session_id.to_owned(),
            opened_at_ms: now,
            expires_at_ms,
            issued_snapshot: None,
            acked_snapshot: None,
            last_report_sequence: None,
        };
        state.sessions.insert(
            worker.clone(),
            SessionState {
                session: session.clone(),
                last_report_digest: None,
                last_report_stale: Vec::new(),
            },
        );
        Ok(session)
    }

    async fn renew_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        check_ttl(ttl_ms)?;
        let mut state = self.lock_for_write(now)?;
        let current = current_session(&mut state, now, worker, session_id)?;
        current.session.expires_at_ms = now.saturating_add(ttl_ms);
        Ok(current.session.clone())
    }

    async fn close_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<()> {
        let mut state = self.lock_for_write(now)?;
        match state.sessions.get(worker) {
            None => Ok(()),
            Some(current) if current.session.session_id == session_id => {
                state.forget_session(worker);
                Ok(())
            }
            Some(_) => Err(PoolError::Conflict(Conflict::Fenced)),
        }
    }

    async fn session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<WorkerSession>> {
        let state = self.lock()?;
        Ok(state.live_session(worker, now).map(|s| s.session.clone()))
    }

    async fn live_sessions(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<WorkerSession>> {
        let state = self.lock()?;
        let mut sessions: Vec<WorkerSession> = state
            .sessions
            .values()
            .filter(|s| s.session.is_live(now))
            .map(|s| s.session.clone())
            .collect();
        sessions.sort_by(|a, b| a.worker.cmp(&b.worker));
        sessions.truncate(limit);
        Ok(sessions)
    }

    async fn issue_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<()> {
        let mut state = self.lock_for_write(now)?;
        let current = current_session(&mut state, now, worker, session_id)?;
        current.session.issued_snapshot = Some(snapshot);
        Ok(())
    }

    async fn ack_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<WorkerSession> {
        let mut state = self.lock_for_write(now)?;
        let current = current_session(&mut state, now, worker, session_id)?;
        let session = &mut current.session;
        if session.acked_snapshot.as_ref() == Some(&snapshot) && session.issued_snapshot.is_none() {
            return Ok(session.clone()); // an idempotent repeat
        }
        if session.issued_snapshot.as_ref() != Some(&snapshot) {
            return Err(PoolError::Conflict(Conflict::Snapshot));
        }
        session.acked_snapshot = session.issued_snapshot.take();
        Ok(session.clone())
    }

    async fn report_runtime(
        &self,
        now: UnixMillis,
        report: RuntimeReport,
        ttl_ms: u64,
    ) -> PoolResult<ReportReceipt> {
        report.validate()?;
        check_ttl(ttl_ms)?;
        let digest = report.digest();
        let mut state = self.lock_for_write(now)?;
        let current = current_session(&mut state, now, &report.worker, &report.session_id)?;
        if let Some(last) = current.session.last_report_sequence {
            if report.sequence == last && current.last_report_digest.as_deref() == Some(&digest) {
                return Ok(ReportReceipt {
                    outcome: ReportOutcome::Replayed,
                    stale_proxies: current.last_report_stale.clone(),
                    session_expires_at_ms: renew(&mut current.session, now, ttl_ms),
                });
            }
            if report.sequence <= last {
                return Err(PoolError::Conflict(Conflict::Sequence));
            }
        }
        if current.session.acked_snapshot.as_ref() != Some(&report.snapshot) {
            return Err(PoolError::Conflict(Conflict::Snapshot));
        }

        let (worker, session_id) = (report.worker.clone(), report.session_id.clone());
        let sequence = report.sequence;
        let mut report = report;
        let stale_proxies = take_stale_entries(&state, now, &mut report);
        // The gateway serves from a snapshot that no longer matches what it owns: let a
        // waiting long-poll re-check at once rather than trust its remembered answer, and
        // re-read each stale proxy.
        for id in &stale_proxies {
            state.bump_snapshot_version(&worker, Some(id));
        }
        // Accounted here, in the step that accepts the report; the stored runtime does not
        // need to carry it.
        if let Some(usage) = report.usage.take() {
            state.usage.record_gateway(now, &worker, &usage);
        }
        state.runtimes.insert(
            worker.clone(),
            StoredRuntime {
                report,
                received_at_ms: now,
                expires_at_ms: now.saturating_add(ttl_ms),
            },
        );
        // Still current: nothing above let go of the lock.
        let current = current_session(&mut state, now, &worker, &session_id)?;
        current.session.last_report_sequence = Some(sequence);
        current.last_report_digest = Some(digest);
        current.last_report_stale = stale_proxies.clone();
        Ok(ReportReceipt {
            outcome: ReportOutcome::Accepted,
            stale_proxies,
            session_expires_at_ms: renew(&mut current.session, now, ttl_ms),
        })
    }

    async fn runtime(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<StoredRuntime>> {
        let state = self.lock()?;
        Ok(state.live_runtime(worker, now).cloned())
    }

    async fn snapshot_version(
        &self,
        _now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<SnapshotVersion> {
        let state = self.lock()?;
        Ok(state.snapshot_version_of(worker))
    }

    async fn snapshot_changes(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        after: u64,
        also: &[ProxyId],
        limit: usize,
    ) -> PoolResult<SnapshotChanges> {
        let state = self.lock()?;
        let version = state.snapshot_version_of(worker);
        let journal = state.snapshot_journals.get(worker);
        // A worker without a journal had no change that named a proxy.
        let changed = match journal.map(|j| j.changed_after(after)) {
            None => Some(BTreeSet::new()),
            Some(None) => None,
            Some(Some(ids)) => Some(ids.collect::<BTreeSet<&ProxyId>>()),
        };
        let changed = changed
            .map(|mut ids| {
                ids.extend(also);
                ids
            })
            .filter(|ids| ids.len() <= limit)
            .map(|ids| {
                ids.into_iter()
                    .map(|id| (id.clone(), state.holding(now, worker, id)))
                    .collect()
            });
        Ok(SnapshotChanges { version, changed })
    }
}

impl State {
    fn snapshot_version_of(&self, worker: &WorkerId) -> SnapshotVersion {
        SnapshotVersion {
            worker: self.snapshot_versions.get(worker).copied().unwrap_or(0),
            feedback: self.feedback_version,
        }
    }
}
