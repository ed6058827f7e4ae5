//! OwnershipRepository for MemoryPool: leases fenced by a global epoch.

use super::MemoryPool;
use super::state::State;
use async_trait::async_trait;
use proxypool_core::{
    Assignment, AssignmentState, Conflict, Holding, OwnedProxy, OwnershipRepository, PoolError,
    PoolResult, ProxyId, ProxyRecord, UnixMillis, WorkerId,
};

fn check_lease(lease_ms: u64) -> PoolResult<()> {
    if lease_ms == 0 {
        return Err(PoolError::invalid("lease_ms must be at least 1"));
    }
    Ok(())
}

/// The live assignment of `proxy`, which must belong to `worker` at `epoch`.
fn owned_assignment(
    state: &State,
    now: UnixMillis,
    proxy: &ProxyId,
    worker: &WorkerId,
    epoch: u64,
) -> PoolResult<Assignment> {
    let assignment = state.assignments.get(proxy).ok_or(PoolError::NotFound)?;
    if state.live_record(proxy, now).is_none() {
        return Err(PoolError::NotFound);
    }
    if &assignment.worker != worker || assignment.epoch != epoch {
        return Err(PoolError::Conflict(Conflict::Ownership));
    }
    if assignment.lease_until_ms <= now {
        return Err(PoolError::Conflict(Conflict::LeaseExpired));
    }
    Ok(assignment.clone())
}

impl State {
    /// `id` as `worker`'s snapshot lists it: an unexpired, non-draining lease of `worker`
    /// on a live, usable record (`owned_by`'s rule).
    fn serving(&self, now: UnixMillis, worker: &WorkerId, id: &ProxyId) -> Option<OwnedProxy> {
        let assignment = self.assignments.get(id).filter(|a| &a.worker == worker)?;
        let record = self.live_record(id, now)?;
        let serving =
            !assignment.is_draining() && now < assignment.lease_until_ms && record.is_usable(now);
        serving.then(|| OwnedProxy {
            record: record.clone(),
            assignment: assignment.clone(),
        })
    }

    /// `worker`'s draining assignment of `id` with an unexpired lease (`draining_of`'s
    /// rule).
    fn draining(&self, now: UnixMillis, worker: &WorkerId, id: &ProxyId) -> Option<&Assignment> {
        self.assignments
            .get(id)
            .filter(|a| &a.worker == worker && a.is_draining() && now < a.lease_until_ms)
    }

    /// What `worker` holds of `id` at `now`, by the rules of `owned_by` and `draining_of`.
    pub(crate) fn holding(&self, now: UnixMillis, worker: &WorkerId, id: &ProxyId) -> Holding {
        if let Some(owned) = self.serving(now, worker, id) {
            return Holding::Serving(Box::new(owned));
        }
        match self.draining(now, worker, id) {
            Some(assignment) => Holding::Draining(assignment.clone()),
            None => Holding::Nothing,
        }
    }
}

#[async_trait]
impl OwnershipRepository for MemoryPool {
    async fn assign(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        check_lease(lease_ms)?;
        let mut state = self.lock_for_write(now)?;
        let record = state.live_record(proxy, now).ok_or(PoolError::NotFound)?;
        // A lapsed lease that nobody expired yet still blocks: expire() releases it.
        if state.assignments.contains_key(proxy) {
            return Err(PoolError::Conflict(Conflict::Ownership));
        }
        if !record.is_usable(now) {
            return Err(PoolError::Conflict(Conflict::Status));
        }
        let usable_until = record.usable_until_ms;
        let upstream = record.upstream.clone();
        state.epoch += 1;
        let assignment = Assignment {
            proxy_id: proxy.clone(),
            upstream,
            worker: worker.clone(),
            epoch: state.epoch,
            assigned_at_ms: now,
            lease_until_ms: now.saturating_add(lease_ms).min(usable_until),
            state: AssignmentState::Active,
        };
        state.put_assignment(assignment.clone());
        Ok(assignment)
    }

    async fn renew(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        check_lease(lease_ms)?;
        let mut state = self.lock_for_write(now)?;
        let mut assignment = owned_assignment(&state, now, proxy, worker, epoch)?;
        let usable_until = state
            .live_record(proxy, now)
            .map(|r| r.usable_until_ms)
            .ok_or(PoolError::NotFound)?;
        let lease_until = now.saturating_add(lease_ms).min(usable_until);
        if lease_until <= now {
            return Err(PoolError::Conflict(Conflict::LeaseExpired));
        }
        assignment.lease_until_ms = lease_until;
        state.put_assignment(assignment.clone());
        Ok(assignment)
    }

    async fn begin_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
    ) -> PoolResult<Assignment> {
        let mut state = self.lock_for_write(now)?;
        let mut assignment = owned_assignment(&state, now, proxy, worker, epoch)?;
        if assignment.is_draining() {
            return Ok(assignment);
        }
        state.epoch += 1;
        assignment.state = AssignmentState::Draining {
            drain_epoch: state.epoch,
        };
        state.put_assignment(assignment.clone());
        Ok(assignment)
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
        let mut state = self.lock_for_write(now)?;
        let assignment = owned_assignment(&state, now, proxy, worker, epoch)?;
        if !assignment.is_draining() {
            return Err(PoolError::Conflict(Conflict::Status));
        }
        // The caller's counts and the worker's own latest report must both say idle.
        let reported_busy = state.live_runtime(worker, now).is_some_and(|runtime| {
            runtime
                .report
                .entries
                .iter()
                .any(|e| &e.proxy_id == proxy && (e.active > 0 || e.reserved > 0))
        });
        if active > 0 || reserved > 0 || reported_busy {
            return Err(PoolError::Conflict(Conflict::NotDrained));
        }
        state.drop_assignment(proxy);
        Ok(())
    }

    async fn get(&self, now: UnixMillis, proxy: &ProxyId) -> PoolResult<Option<Assignment>> {
        let state = self.lock()?;
        if state.live_record(proxy, now).is_none() {
            return Ok(None);
        }
        Ok(state
            .assignments
            .get(proxy)
            .filter(|a| now < a.lease_until_ms)
            .cloned())
    }

    async fn expire(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        let mut state = self.lock_for_write(now)?;
        let due: Vec<ProxyId> = state
            .lease_expiry
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect();
        Ok(due
            .iter()
            .filter_map(|id| state.drop_assignment(id))
            .collect())
    }

    async fn release_orphaned(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        let mut state = self.lock_for_write(now)?;
        let mut orphaned: Vec<ProxyId> = state
            .worker_owned
            .iter()
            .filter(|(worker, _)| state.live_session(worker, now).is_none())
            .flat_map(|(_, owned)| owned.iter().cloned())
            .collect();
        // Deterministic, so a limit cuts the same way every time.
        orphaned.sort();
        orphaned.truncate(limit);
        Ok(orphaned
            .iter()
            .filter_map(|id| state.drop_assignment(id))
            .collect())
    }

    async fn assignable(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<ProxyRecord>> {
        let state = self.lock()?;
        Ok(state
            .available
            .all
            .iter()
            .rev()
            .take_while(|(usable_until, _)| now < *usable_until)
            .filter_map(|(_, id)| state.live_record(id, now))
            .filter(|r| r.is_usable(now))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn owned_by(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<OwnedProxy>> {
        let state = self.lock()?;
        let Some(owned) = state.worker_owned.get(worker) else {
            return Ok(Vec::new());
        };
        let mut result: Vec<OwnedProxy> = owned
            .iter()
            .filter_map(|id| state.serving(now, worker, id))
            .collect();
        result.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        result.truncate(limit);
        Ok(result)
    }

    async fn draining_of(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<Assignment>> {
        let state = self.lock()?;
        let Some(owned) = state.worker_owned.get(worker) else {
            return Ok(Vec::new());
        };
        let mut result: Vec<Assignment> = owned
            .iter()
            .filter_map(|id| state.draining(now, worker, id))
            .cloned()
            .collect();
        result.sort_by(|a, b| a.proxy_id.cmp(&b.proxy_id));
        result.truncate(limit);
        Ok(result)
    }

    async fn current_epoch(&self, _now: UnixMillis) -> PoolResult<u64> {
        Ok(self.lock()?.epoch)
    }
}
