//! One build of a worker's snapshot: read whole or read what changed, then issue. The reads
//! and the store's `issue_snapshot` happen here; what they come to is decided by
//! `proxypool_snapshot::publisher`.

use super::SnapshotPublisher;
use proxypool_core::{PoolError, PoolResult, ProxyId, SNAPSHOT_JOURNAL_CAP, WorkerSession};
use proxypool_snapshot::publisher::{
    Inputs, Issue, Issued, PollStart, WholeRead, add_cooldowns, add_inputs, add_proxies, issue,
    listed_ids,
};
use proxypool_snapshot::{SnapshotDelta, SnapshotUpdate};

impl SnapshotPublisher {
    /// Reads everything the snapshot lists and issues a new version when its content
    /// differs from the session's latest: as a delta when `base` is the content the caller
    /// holds, else whole.
    pub(super) async fn read_whole_and_issue(
        &self,
        read: &PollStart<'_>,
        base: Option<Issued>,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, now) = (read.worker, read.now);
        let session = self.current_session(now, worker, read.session_id).await?;
        let epoch = self.pool.current_epoch(now).await?;
        let owned = self
            .pool
            .owned_by(now, worker, self.config.max_proxies)
            .await?;
        let clients = self.clients.load_full();
        let draining = self
            .pool
            .draining_of(now, worker, self.config.max_proxies)
            .await?;
        let advisories = self.advisories(now, &listed_ids(&owned), &clients).await?;
        let ticket_key = self.ticket_key(now).await?;
        let issued = WholeRead {
            worker,
            session_id: read.session_id,
            counters: read.counters,
            epoch,
            now,
            owned: &owned,
            draining: &draining,
            clients,
            advisories,
            ticket_key,
            upstream_tls: self.upstream_tls.clone(),
        }
        .into_issued()
        .map_err(|e| {
            PoolError::corrupt(format!(
                "the store lists a worker's snapshot twice over: {e}"
            ))
        })?;
        // The delta is made against what the caller holds, if this controller knows it.
        self.finish(read, &session, epoch, issued, true, |issued| {
            base.map(|base| base.content.delta_to(worker, &issued.content))
        })
        .await
    }

    /// Reads only what changed since `issued` (the content the caller holds) and issues
    /// the difference as a delta; falls back to a whole read when the store cannot say
    /// what changed or the result would pass a limit.
    pub(super) async fn issue_changes(
        &self,
        read: &PollStart<'_>,
        mut issued: Issued,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, now) = (read.worker, read.now);
        let session = self.current_session(now, worker, read.session_id).await?;
        let epoch = self.pool.current_epoch(now).await?;
        let due = issued.horizons.due(now);
        let changed = self
            .pool
            .snapshot_changes(now, worker, issued.counter, &due, SNAPSHOT_JOURNAL_CAP)
            .await?;
        let Some(changed) = changed.changed else {
            return self.read_whole_and_issue(read, Some(issued)).await;
        };
        let base = issued.content.reference().clone();
        let mut delta = SnapshotDelta::empty(worker.clone(), read.session_id.to_owned(), base);
        let listed = add_proxies(&mut issued, changed, &mut delta);
        if !listed.is_empty() {
            let mut ids: Vec<ProxyId> = listed.keys().cloned().collect();
            ids.sort();
            let cooldowns = self.pool.cooldowns_of(now, &ids).await?;
            add_cooldowns(&mut issued, &listed, cooldowns, &mut delta);
        }
        let clients = self.clients.load_full();
        let inputs = Inputs {
            clients: &clients,
            policy: **self.cooldown_policy.load(),
            ticket_key: self.ticket_key(now).await?,
            upstream_tls: &self.upstream_tls,
        };
        add_inputs(&issued, inputs, &mut delta);
        if issued.feedback_due(read.counters, delta.clients.is_some(), now) {
            let feedback = self.served_feedback(now, &clients).await?;
            if feedback.as_slice() != issued.content.session_feedback() {
                delta.session_feedback = Some(feedback);
            }
        }
        let Some(next) = issued.advance(&delta, read.counters, clients, self.config.max_proxies)
        else {
            return self.read_whole_and_issue(read, None).await;
        };
        self.finish(read, &session, epoch, next, false, |_| Some(delta))
            .await
    }

    /// Issues `issued.content` (a new version when it differs from the session's latest
    /// snapshot or a drain needs a newer epoch), remembers it, and answers with the delta
    /// `delta_of` makes or the whole snapshot.
    async fn finish(
        &self,
        read: &PollStart<'_>,
        session: &WorkerSession,
        epoch: u64,
        mut issued: Issued,
        whole_read: bool,
        delta_of: impl FnOnce(&Issued) -> Option<SnapshotDelta>,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, session_id, now) = (read.worker, read.session_id, read.now);
        let decision = issue::decide(
            session,
            read.after_version,
            issued.content.checksum(),
            issued.needed_epoch(),
            epoch,
        );
        if let Issue::New(reference) = &decision {
            self.pool
                .issue_snapshot(now, worker, session_id, reference.clone())
                .await?;
        }
        issued.content.set_reference(decision.reference().clone());
        let update = match decision {
            Issue::Current(_) => None,
            Issue::Again(_) | Issue::New(_) => {
                let max_staleness_ms = self.config.max_staleness.as_ms();
                let update =
                    issue::answer(worker, &issued, delta_of(&issued), now, max_staleness_ms);
                crate::metrics::snapshot_update(
                    matches!(update, SnapshotUpdate::Delta(_)),
                    whole_read,
                );
                Some(update)
            }
        };
        self.state.settle(read, session, &decision, issued);
        Ok(update)
    }
}
