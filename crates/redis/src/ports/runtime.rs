//! WorkerRuntimeStore: sessions that fence their predecessors, issued and acknowledged
//! snapshots, strictly sequenced runtime reports, the snapshot counters and the change
//! journal behind them; validation and digests from core.

use crate::codec::session::{self, snapshot_json};
use crate::codec::{assignment, clamp_ms, parse_u64, record, runtime};
use crate::group::{GroupPool, Side};
use crate::reply::Reply;
use crate::scripts::Function;
use async_trait::async_trait;
use proxypool_core::runtime::validate_session_id;
use proxypool_core::{
    Holding, OwnedProxy, PoolError, PoolResult, ProxyId, ReportOutcome, ReportReceipt,
    RuntimeReport, SNAPSHOT_JOURNAL_CAP, SnapshotChanges, SnapshotRef, SnapshotVersion,
    StoredRuntime, UnixMillis, WorkerId, WorkerRuntimeStore, WorkerSession,
};

fn check_ttl(ttl_ms: u64) -> PoolResult<()> {
    if ttl_ms == 0 {
        return Err(PoolError::invalid("ttl_ms must be at least 1"));
    }
    Ok(())
}

/// `{'ok', session, issued}` of `worker`.
fn one(worker: &WorkerId, reply: &Reply) -> PoolResult<WorkerSession> {
    session::decode(worker, &reply.text(0)?, &reply.text(1)?)
}

/// One proxy of a `snapshot_changes` reply: `id, kind, a, b` (see `snapshot_changes.lua`).
fn holding(id: &str, kind: &str, a: &str, b: &str) -> PoolResult<(ProxyId, Holding)> {
    let proxy = ProxyId::new(id).map_err(|_| PoolError::corrupt("undecodable proxy id"))?;
    let holding = match kind {
        "s" => Holding::Serving(Box::new(OwnedProxy {
            record: record::decode(a)?,
            assignment: assignment::decode(id, b, "")?,
        })),
        "d" => Holding::Draining(assignment::decode(id, a, b)?),
        "n" => Holding::Nothing,
        _ => return Err(PoolError::corrupt("undecodable snapshot changes in redis")),
    };
    Ok((proxy, holding))
}

/// `worker, session id, snapshot`: what issuing and acknowledging a snapshot both send.
fn snapshot_args(worker: &WorkerId, session_id: &str, snapshot: &SnapshotRef) -> Vec<String> {
    vec![
        worker.to_string(),
        session_id.to_owned(),
        snapshot_json(snapshot),
    ]
}

impl GroupPool {
    /// Opening and renewing send the same arguments and read the same reply; the script
    /// decides whether a session is started or extended.
    async fn session_until(
        &self,
        script: &Function,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        check_ttl(ttl_ms)?;
        let expires = clamp_ms(now.saturating_add(ttl_ms));
        let args = vec![
            worker.to_string(),
            session_id.to_owned(),
            expires.to_string(),
        ];
        one(worker, &self.call(script, now, Side::Write, args).await?)
    }
}

#[async_trait]
impl WorkerRuntimeStore for GroupPool {
    async fn open_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        validate_session_id(session_id)?;
        self.session_until(&self.scripts.session_open, now, worker, session_id, ttl_ms)
            .await
    }

    async fn renew_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession> {
        self.session_until(&self.scripts.session_renew, now, worker, session_id, ttl_ms)
            .await
    }

    async fn close_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<()> {
        let args = vec![worker.to_string(), session_id.to_owned()];
        self.call(&self.scripts.session_close, now, Side::Write, args)
            .await
            .map(|_| ())
    }

    async fn session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<WorkerSession>> {
        let reply = self
            .call(
                &self.scripts.session_get,
                now,
                Side::Read,
                vec![worker.to_string()],
            )
            .await?;
        reply.optional(|reply| one(worker, reply))
    }

    async fn live_sessions(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<WorkerSession>> {
        let args = vec![self.options.inventory_scan_budget.to_string()];
        let reply = self
            .call(&self.scripts.sessions_live, now, Side::Read, args)
            .await?;
        let mut sessions = reply
            .texts()?
            .chunks(3)
            .map(|t| match t {
                [worker, value, issued] => {
                    let worker = WorkerId::new(worker)
                        .map_err(|_| PoolError::corrupt("undecodable worker id in redis"))?;
                    session::decode(&worker, value, issued)
                }
                _ => Err(PoolError::corrupt("undecodable session list in redis")),
            })
            .collect::<PoolResult<Vec<_>>>()?;
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
        let args = snapshot_args(worker, session_id, &snapshot);
        self.call(&self.scripts.snapshot_issue, now, Side::Write, args)
            .await
            .map(|_| ())
    }

    async fn ack_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<WorkerSession> {
        let args = snapshot_args(worker, session_id, &snapshot);
        let reply = self
            .call(&self.scripts.snapshot_ack, now, Side::Write, args)
            .await?;
        one(worker, &reply)
    }

    async fn report_runtime(
        &self,
        now: UnixMillis,
        report: RuntimeReport,
        ttl_ms: u64,
    ) -> PoolResult<ReportReceipt> {
        report.validate()?;
        check_ttl(ttl_ms)?;
        let (head, tail) = runtime::report_frame(&report);
        let mut args = vec![
            report.worker.to_string(),
            report.session_id.clone(),
            report.sequence.to_string(),
            report.digest(),
            snapshot_json(&report.snapshot),
            report.snapshot.epoch.to_string(),
            clamp_ms(now.saturating_add(ttl_ms)).to_string(),
            head,
            tail,
            runtime::usage_text(&report),
        ];
        args.extend(runtime::entry_args(&report));
        let reply = self
            .call(&self.scripts.report, now, Side::Write, args)
            .await?;
        let outcome = match reply.status.as_str() {
            "accepted" => ReportOutcome::Accepted,
            "replayed" => ReportOutcome::Replayed,
            other => {
                return Err(PoolError::corrupt(format!(
                    "unexpected report reply {other}"
                )));
            }
        };
        let texts = reply.texts()?;
        let (expires, stale) = texts
            .split_first()
            .ok_or_else(|| PoolError::corrupt("report reply without the session's end"))?;
        Ok(ReportReceipt {
            outcome,
            session_expires_at_ms: parse_u64(expires, "report reply")?,
            stale_proxies: stale
                .iter()
                .map(|id| ProxyId::new(id).map_err(|_| PoolError::corrupt("undecodable proxy id")))
                .collect::<PoolResult<_>>()?,
        })
    }

    async fn runtime(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<StoredRuntime>> {
        let reply = self
            .call(
                &self.scripts.runtime_get,
                now,
                Side::Read,
                vec![worker.to_string()],
            )
            .await?;
        reply.optional(|reply| runtime::decode(&reply.text(0)?, &reply.text(1)?, &reply.text(2)?))
    }

    async fn snapshot_version(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<SnapshotVersion> {
        // A read only: the counters carry no time, `now` fills the calling convention.
        let reply = self
            .call(
                &self.scripts.snapshot_version,
                now,
                Side::Read,
                vec![worker.to_string()],
            )
            .await?;
        Ok(SnapshotVersion {
            worker: reply.number(0)?,
            feedback: reply.number(1)?,
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
        // The journal keeps at most the cap, so no answer is longer than the cap plus the
        // asked ids: a larger limit changes nothing, and the script's count stays exact.
        let limit = limit.min(SNAPSHOT_JOURNAL_CAP.saturating_add(also.len()));
        let mut args = vec![worker.to_string(), after.to_string(), limit.to_string()];
        args.extend(also.iter().map(ToString::to_string));
        let reply = self
            .call(&self.scripts.snapshot_changes, now, Side::Read, args)
            .await?;
        let version = SnapshotVersion {
            worker: reply.number(0)?,
            feedback: reply.number(1)?,
        };
        let texts = reply.texts()?;
        let changed = match texts.get(2).map(String::as_str) {
            Some("none") => None,
            Some("some") => {
                let mut changed = texts[3..]
                    .chunks(4)
                    .map(|t| match t {
                        [id, kind, a, b] => holding(id, kind, a, b),
                        _ => Err(PoolError::corrupt("undecodable snapshot changes in redis")),
                    })
                    .collect::<PoolResult<Vec<_>>>()?;
                changed.sort_by(|a, b| a.0.cmp(&b.0));
                Some(changed)
            }
            _ => return Err(PoolError::corrupt("undecodable snapshot changes in redis")),
        };
        Ok(SnapshotChanges { version, changed })
    }
}
