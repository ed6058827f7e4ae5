//! The ownership manager: leases proxies to live gateway workers and takes them back.
//!
//! One round:
//! 1. release lapsed assignments in bounded batches (`expire`), and the assignments of
//!    workers whose session lapsed (`release_orphaned`; see below);
//! 2. for each live worker session: renew its leases before they end, and acknowledge the
//!    drains its runtime report proves finished;
//! 3. plan ([`plan`]) and apply new assignments and rebalancing drains, with each worker's
//!    mode as operators set it in the store (`AdminStore::worker_modes`: a cordoned worker
//!    gets nothing new, a draining one gives everything back through the drain protocol).
//!
//! A worker that closes its session cleanly hands its proxies back at once
//! ([`release_worker`], called by the control API). A worker whose session lapsed (a
//! crash: `session_ttl` after its last registration or accepted report) loses its
//! assignments, draining ones too, in the next round, instead of only when their leases
//! lapse: the store decides "no live session" atomically with the release, so a session
//! renewed or opened again meanwhile keeps them. A proxy that turns
//! SUSPECT or UNHEALTHY drops out of the worker's snapshot at once (the store only lists
//! usable proxies); if the worker's runtime report still shows connections on it, its
//! assignment moves to draining, which is renewed while the connections last, so the proxy
//! stays exclusively the worker's until they end. Any change wakes the snapshot publisher.
//!
//! Extraction keeps its share: no new lease leaves fewer than `extraction_share` of the
//! usable proxies unowned ([`plan`]); what each round left is recorded ([`extraction`]).
//!
//! Every store call of a round goes through the term's fenced handle
//! ([`crate::leadership::TermStore`]).

pub mod extraction;
pub mod plan;
mod release;

pub use extraction::{ExtractionView, ExtractionWatch};
pub use release::{MAX_BATCHES, RELEASE_BATCH, Released, release_worker};

use crate::clock::SharedClock;
use crate::config::OwnershipConfig;
use crate::leadership::job::LeaderJob;
use crate::snapshot::ChangeSignal;
use plan::{Free, Held, Limits, WorkerLoad};
use proxypool_core::{
    ActivityPool, Assignment, AssignmentState, Conflict, LockExt, PoolError, PoolResult,
    StoredRuntime, UnixMillis, WorkerId, WorkerMode, WorkerSession,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Most worker sessions considered per round.
pub const MAX_WORKERS: usize = 1_000;
/// Expiry calls per round (each releases at most `expire_batch`).
const EXPIRE_CALLS_PER_ROUND: usize = 8;

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnershipRound {
    pub expired: usize,
    /// Assignments of workers without a live session, released.
    pub orphans_released: usize,
    pub renewed: usize,
    pub assigned: usize,
    pub drains_started: usize,
    pub drains_acknowledged: usize,
    pub workers: usize,
}

impl OwnershipRound {
    fn changed(&self) -> bool {
        self.expired
            + self.orphans_released
            + self.renewed
            + self.assigned
            + self.drains_started
            + self.drains_acknowledged
            > 0
    }
}

/// The ownership manager.
#[derive(Debug)]
pub struct OwnershipManager {
    pool: Arc<dyn ActivityPool>,
    clock: SharedClock,
    config: OwnershipConfig,
    changes: ChangeSignal,
    wake: Arc<Notify>,
    /// What each round left for extraction.
    extraction: Arc<ExtractionWatch>,
    /// Workers with a leases gauge, so one whose session ended is set back to 0.
    gauged: Mutex<BTreeSet<WorkerId>>,
}

impl OwnershipManager {
    pub fn new(
        pool: Arc<dyn ActivityPool>,
        clock: SharedClock,
        config: OwnershipConfig,
        changes: ChangeSignal,
        wake: Arc<Notify>,
        extraction: Arc<ExtractionWatch>,
    ) -> Self {
        OwnershipManager {
            pool,
            clock,
            config,
            changes,
            wake,
            extraction,
            gauged: Mutex::new(BTreeSet::new()),
        }
    }

    /// Sets the leases gauge of workers that no longer have a live session to 0 (their
    /// proxies come back through expiry or a release, not through this manager).
    fn zero_gone_workers(&self, sessions: &[WorkerSession]) {
        let live: BTreeSet<WorkerId> = sessions.iter().map(|s| s.worker.clone()).collect();
        let mut gauged = self.gauged.lock_or_recover();
        for gone in gauged.difference(&live) {
            crate::metrics::worker_leases(gone, 0);
        }
        *gauged = live;
    }

    /// One round (see the module doc).
    pub async fn round(&self) -> PoolResult<OwnershipRound> {
        let mut round = OwnershipRound::default();
        let now = self.clock.now();
        for _ in 0..EXPIRE_CALLS_PER_ROUND {
            let released = self.pool.expire(now, self.config.expire_batch).await?;
            round.expired += released.len();
            if released.len() < self.config.expire_batch {
                break;
            }
        }
        round.orphans_released = self.release_orphans(now).await?;

        let sessions = self.pool.live_sessions(now, MAX_WORKERS).await?;
        round.workers = sessions.len();
        self.zero_gone_workers(&sessions);
        let modes: BTreeMap<WorkerId, WorkerMode> = self
            .pool
            .worker_modes()
            .await?
            .into_iter()
            .map(|m| (m.worker, m.mode))
            .collect();
        let mut loads = Vec::with_capacity(sessions.len());
        for session in &sessions {
            let mode = modes
                .get(&session.worker)
                .copied()
                .unwrap_or(WorkerMode::Active);
            loads.push(self.tend_worker(now, session, mode, &mut round).await?);
        }

        let free: Vec<Free> = self
            .pool
            .assignable(now, self.config.assign_batch)
            .await?
            .into_iter()
            .map(|r| Free {
                proxy: r.id,
                max_sessions: r.max_sessions,
            })
            .collect();
        let limits = Limits {
            per_worker_target: self.config.worker_target(),
            extraction_share: self.config.share_for_extraction(),
        };
        let plan = plan::plan(&loads, &free, limits);
        for (proxy, worker, epoch) in &plan.drain {
            match self.pool.begin_drain(now, proxy, worker, *epoch).await {
                Ok(_) => round.drains_started += 1,
                Err(e) if !e.is_unavailable() => {
                    tracing::debug!(%proxy, %worker, "drain skipped: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        let lease = self.config.lease.as_ms();
        for (proxy, worker) in &plan.assign {
            match self.pool.assign(now, proxy, worker, lease).await {
                Ok(_) => round.assigned += 1,
                // Extracted or taken by someone else in between: fine, next round replans.
                Err(PoolError::Conflict(_) | PoolError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let leased: usize = loads.iter().map(|l| l.held.len()).sum();
        self.extraction.record(
            now,
            limits.extraction_share,
            free.len().saturating_sub(round.assigned),
            leased + round.assigned,
        );
        if round.changed() {
            self.changes.notify();
        }
        Ok(round)
    }

    /// Releases, in bounded batches, the assignments of workers without a live session, so
    /// a crashed gateway's proxies serve again `session_ttl` after it went silent rather
    /// than only when their leases lapse. Runs before planning, so they can be leased to
    /// the live workers in this same round.
    async fn release_orphans(&self, now: UnixMillis) -> PoolResult<usize> {
        let mut total = 0;
        for _ in 0..EXPIRE_CALLS_PER_ROUND {
            let released = self
                .pool
                .release_orphaned(now, self.config.expire_batch)
                .await?;
            let workers: BTreeSet<&WorkerId> = released.iter().map(|a| &a.worker).collect();
            for worker in workers {
                tracing::info!(%worker, "session lapsed: its proxies are released");
            }
            total += released.len();
            if released.len() < self.config.expire_batch {
                break;
            }
        }
        Ok(total)
    }

    /// Renews one worker's leases, acknowledges its finished drains, and returns its load.
    async fn tend_worker(
        &self,
        now: UnixMillis,
        session: &WorkerSession,
        mode: WorkerMode,
        round: &mut OwnershipRound,
    ) -> PoolResult<WorkerLoad> {
        let worker = &session.worker;
        let limit = self.config.worker_target().saturating_mul(2).max(16);
        let owned = self.pool.owned_by(now, worker, limit).await?;
        let runtime = self.pool.runtime(now, worker).await?;
        round.drains_started += self
            .drain_busy_unusable(now, session, runtime.as_ref(), &owned)
            .await?;
        let draining = self.pool.draining_of(now, worker, limit).await?;
        crate::metrics::worker_leases(worker, owned.len() + draining.len());
        let lease = self.config.lease.as_ms();
        let renew_before = self.config.renew_before.as_ms();

        // Renew all of a worker's leases together when any needs it, so their ends stay
        // aligned and the worker's snapshot changes once per lease period, not every round.
        // A lease already cut at `usable_until` cannot grow and does not count as a need.
        let needs_renewal = |a: &Assignment, usable_until: UnixMillis| {
            a.lease_until_ms < usable_until && a.lease_until_ms.saturating_sub(now) <= renew_before
        };
        let any_due = owned
            .iter()
            .any(|o| needs_renewal(&o.assignment, o.record.usable_until_ms))
            || draining
                .iter()
                .any(|a| a.lease_until_ms.saturating_sub(now) <= renew_before);
        let mut held = Vec::with_capacity(owned.len());
        for owned in &owned {
            let a = &owned.assignment;
            if any_due && a.lease_until_ms < owned.record.usable_until_ms {
                match self
                    .pool
                    .renew(now, &a.proxy_id, worker, a.epoch, lease)
                    .await
                {
                    Ok(_) => round.renewed += 1,
                    Err(PoolError::Conflict(_) | PoolError::NotFound) => continue,
                    Err(e) => return Err(e),
                }
            }
            held.push(Held {
                proxy: a.proxy_id.clone(),
                epoch: a.epoch,
                max_sessions: owned.record.max_sessions,
            });
        }

        for assignment in &draining {
            if drain_finished(session, runtime.as_ref(), assignment) {
                match self
                    .pool
                    .acknowledge_drain(now, &assignment.proxy_id, worker, assignment.epoch, 0, 0)
                    .await
                {
                    Ok(()) => {
                        round.drains_acknowledged += 1;
                        continue;
                    }
                    Err(PoolError::Conflict(Conflict::NotDrained)) => {}
                    Err(PoolError::Conflict(_) | PoolError::NotFound) => continue,
                    Err(e) => return Err(e),
                }
            }
            // Still busy: keep the lease so the worker's connections stay owned.
            if any_due {
                match self
                    .pool
                    .renew(now, &assignment.proxy_id, worker, assignment.epoch, lease)
                    .await
                {
                    Ok(_) => round.renewed += 1,
                    Err(PoolError::Conflict(_) | PoolError::NotFound) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(WorkerLoad {
            worker: worker.clone(),
            held,
            mode,
        })
    }

    /// Moves to draining the assignments the worker's live report shows busy but that no
    /// longer serve (the proxy turned SUSPECT or UNHEALTHY, so `owned_by` left them out):
    /// left alone their leases would lapse under open connections, and the proxy could be
    /// extracted or leased to another worker while the first still relays through it.
    /// Draining keeps them renewed until the connections end. Returns the drains started.
    async fn drain_busy_unusable(
        &self,
        now: UnixMillis,
        session: &WorkerSession,
        runtime: Option<&StoredRuntime>,
        serving: &[proxypool_core::OwnedProxy],
    ) -> PoolResult<usize> {
        let Some(runtime) = runtime.filter(|r| r.report.session_id == session.session_id) else {
            return Ok(0);
        };
        let serving: BTreeSet<_> = serving.iter().map(|o| &o.record.id).collect();
        let mut started = 0;
        for entry in &runtime.report.entries {
            if entry.draining
                || entry.active + entry.reserved == 0
                || serving.contains(&entry.proxy_id)
            {
                continue;
            }
            let Some(assignment) = self.pool.get(now, &entry.proxy_id).await? else {
                continue;
            };
            if assignment.worker != session.worker || assignment.is_draining() {
                continue;
            }
            match self
                .pool
                .begin_drain(now, &assignment.proxy_id, &session.worker, assignment.epoch)
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        proxy = %assignment.proxy_id,
                        worker = %session.worker,
                        "busy proxy no longer serves: draining it so its connections stay exclusive"
                    );
                    started += 1;
                }
                Err(PoolError::Conflict(_) | PoolError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(started)
    }
}

/// A drain is finished when the worker's live report is against the snapshot it
/// acknowledged, that snapshot was built at or after the drain's epoch (so it no longer
/// lists the proxy), and the report shows nothing active or reserved on the proxy.
pub fn drain_finished(
    session: &WorkerSession,
    runtime: Option<&StoredRuntime>,
    assignment: &Assignment,
) -> bool {
    let AssignmentState::Draining { drain_epoch } = assignment.state else {
        return false;
    };
    let Some(runtime) = runtime else {
        return false;
    };
    let report = &runtime.report;
    let acked = session.acked_snapshot.as_ref();
    report.session_id == session.session_id
        && acked == Some(&report.snapshot)
        && report.snapshot.epoch >= drain_epoch
        && report
            .entries
            .iter()
            .filter(|e| e.proxy_id == assignment.proxy_id)
            .all(|e| e.active == 0 && e.reserved == 0)
}

impl LeaderJob for OwnershipManager {
    const NAME: &'static str = "ownership";

    fn begin_term(&mut self, store: Arc<dyn ActivityPool>) {
        self.pool = store;
    }

    async fn round(&mut self) -> std::time::Duration {
        match OwnershipManager::round(self).await {
            Ok(round) if round.changed() => tracing::debug!(?round, "ownership round"),
            Ok(_) => {}
            Err(e) => tracing::warn!("ownership round failed: {e}"),
        }
        self.config.interval.as_duration()
    }

    /// Dropped between store calls: whatever it did is in the store, so let snapshots
    /// re-read it.
    fn dropped(&mut self) {
        self.changes.notify();
    }

    fn wake(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }
}
