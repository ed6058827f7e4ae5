//! CooldownStore for MemoryPool: cooldowns per (proxy, domain) merged by
//! `merge_cooldowns`, session feedback kept briefly, and extracted proxies given back.
//!
//! Cooldowns live next to their record and go with it (`State::remove_record`); a proxy's
//! forgotten entries go when it is next written or when the sweep reaches it through the
//! forget index. `may_report` answers for a proxy the pool does not hold as for one held
//! by another client's extraction or given back (`No`), and names the lease epoch a
//! gateway's ticket must be bound to. `return_extracted` ends the client's hold but leaves
//! the proxy EXTRACTED (`super::generation`): nobody else is handed it while the client
//! may still hold its credentials, and the stored extraction no longer shows them
//! (`super::extract`).

use super::MemoryPool;
use super::state::{State, due_entries};
use async_trait::async_trait;
use proxypool_core::cooldown::{MAX_SESSION_FEEDBACK, validate_changes};
use proxypool_core::cooldown_merge::merge_cooldowns;
use proxypool_core::{
    ClientId, CooldownChange, CooldownReport, CooldownStore, Domain, DomainCooldown, PoolError,
    PoolResult, ProjectId, ProxyId, ProxyStatus, Reporter, ReturnOutcome, SessionFeedback,
    UnixMillis,
};
use std::collections::HashMap;

impl State {
    /// Whether `id` has a cooldown for `domain` that binds a client of `project` (shared,
    /// or that project's) and has not ended at `now`.
    pub(crate) fn is_cooling_for(
        &self,
        id: &ProxyId,
        domain: &Domain,
        project: Option<&ProjectId>,
        now: UnixMillis,
    ) -> bool {
        self.cooldowns.get(id).is_some_and(|entries| {
            entries
                .iter()
                .any(|e| &e.domain == domain && e.binds(project) && e.is_cooling(now))
        })
    }

    /// Drops forgotten cooldowns of at most `limit` proxies; true when more are waiting.
    pub(crate) fn forget_cooldowns(&mut self, now: UnixMillis, limit: usize) -> bool {
        let (due, more) = due_entries(&self.cooldown_forget, now, limit);
        for (_, id) in due {
            let mut entries = self.cooldowns.get(&id).cloned().unwrap_or_default();
            entries.retain(|e| e.forget_at_ms > now);
            self.put_cooldowns(&id, entries);
        }
        more
    }

    /// Drops session feedback that expired at `now`.
    pub(crate) fn forget_session_feedback(&mut self, now: UnixMillis) {
        self.session_feedback.retain(|f| now < f.expires_at_ms);
    }
}

#[async_trait]
impl CooldownStore for MemoryPool {
    async fn apply_cooldowns(
        &self,
        now: UnixMillis,
        changes: &[CooldownChange],
    ) -> PoolResult<CooldownReport> {
        validate_changes(changes)?;
        let mut state = self.lock_for_write(now)?;
        // Per proxy, in the batch's order: a Set then a Clear of one domain must clear.
        let mut per_proxy: Vec<(&ProxyId, Vec<&CooldownChange>)> = Vec::new();
        let mut slot: HashMap<&ProxyId, usize> = HashMap::new();
        for change in changes {
            let index = *slot.entry(change.proxy_id()).or_insert_with(|| {
                per_proxy.push((change.proxy_id(), Vec::new()));
                per_proxy.len() - 1
            });
            per_proxy[index].1.push(change);
        }
        let mut report = CooldownReport::default();
        for (id, proxy_changes) in per_proxy {
            if state.live_record(id, now).is_none() {
                report.unknown += proxy_changes.len();
                continue;
            }
            let mut entries = state.cooldowns.get(id).cloned().unwrap_or_default();
            // A forgotten entry is gone before the merge, so its strikes never carry into
            // a new ban of the same domain (the sweep may not have reached it yet).
            entries.retain(|e| e.forget_at_ms > now);
            merge_cooldowns(&mut entries, &proxy_changes, now);
            state.put_cooldowns(id, entries);
            report.applied += proxy_changes.len();
        }
        Ok(report)
    }

    async fn cooldowns_of(
        &self,
        now: UnixMillis,
        proxies: &[ProxyId],
    ) -> PoolResult<Vec<DomainCooldown>> {
        let state = self.lock()?;
        let mut out = Vec::new();
        for id in proxies {
            if state.live_record(id, now).is_none() {
                continue;
            }
            if let Some(entries) = state.cooldowns.get(id) {
                out.extend(entries.iter().filter(|e| e.forget_at_ms > now).cloned());
            }
        }
        Ok(out)
    }

    async fn add_session_feedback(
        &self,
        now: UnixMillis,
        feedback: SessionFeedback,
    ) -> PoolResult<()> {
        let mut state = self.lock_for_write(now)?;
        state.forget_session_feedback(now);
        if now >= feedback.expires_at_ms
            || state.session_feedback.iter().any(|f| f.id == feedback.id)
        {
            return Ok(());
        }
        state.session_feedback.push_back(feedback);
        state.feedback_version += 1;
        while state.session_feedback.len() > MAX_SESSION_FEEDBACK {
            state.session_feedback.pop_front();
        }
        Ok(())
    }

    async fn session_feedback(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> PoolResult<Vec<SessionFeedback>> {
        let state = self.lock()?;
        Ok(state
            .session_feedback
            .iter()
            .filter(|f| now < f.expires_at_ms)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn may_report(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<Reporter> {
        let state = self.lock()?;
        Ok(match state.live_record(proxy, now) {
            None => Reporter::No,
            Some(record) if record.status != ProxyStatus::Extracted => Reporter::Unheld {
                lease_epoch: state.lease_epoch(proxy),
            },
            Some(_) if state.holds(client, proxy, now) => Reporter::Holder,
            Some(_) => Reporter::No,
        })
    }

    async fn return_extracted(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<ReturnOutcome> {
        let mut state = self.lock_for_write(now)?;
        if !state.give_back(client, proxy, now) {
            return Err(PoolError::NotFound);
        }
        Ok(ReturnOutcome::Returned)
    }
}
