//! The snapshot publisher: what each gateway worker may serve from, versioned per session.
//!
//! A snapshot lists the serving proxies the worker owns (with the credentials it needs to
//! dial them, `max_sessions` and lease end) and the gateway clients from the config. Its
//! version grows per session and is derived from the session's issued/acknowledged
//! references in the store, so any controller can continue the sequence. A new version is
//! issued only when the content (checksum) changes, or when a drain needs the worker to
//! confirm a snapshot at a newer ownership epoch. The epoch is read *before* the content,
//! so a snapshot at epoch E never lists a proxy whose drain bumped the epoch to E or less.
//!
//! Each snapshot carries the store's feedback-ticket key (`proxypool_core::ticket`), with
//! which the gateway signs the `X-Proxypool-Ticket` of its answers; it counts in the
//! checksum by its id, so a new key (a new store incarnation) is a new snapshot.
//!
//! Each snapshot also carries advisories: the `[cooldowns]` policy, the remembered
//! cooldowns of the proxies it lists and the live session feedback of its clients. They
//! are part of the checksum, so a new cooldown (from any gateway's report) or new feedback
//! issues a new version at the next re-read.
//!
//! A waiting long-poll does not re-read all that every `poll_interval`: it reads the
//! store's `SnapshotVersion` (one small call) and rebuilds only when the counters moved,
//! when time alone ended something the last build listed, or on a local change.
//!
//! This module is the driver: it does the reads and the waits, and the decisions are the
//! protocol's (`proxypool_snapshot::publisher`, whose crate doc has the glossary of every
//! counter). `build.rs` reads and issues one snapshot, `reads.rs` holds the store reads
//! they share, `signal.rs` the local change signal.

mod build;
mod reads;
mod signal;

pub use signal::ChangeSignal;

use crate::clock::SharedClock;
use crate::config::SnapshotConfig;
use arc_swap::ArcSwap;
use proxypool_core::control::{GatewayClient, UpstreamTls};
use proxypool_core::{ActivityPool, CooldownPolicy, PoolResult, TicketKey, UnixMillis, WorkerId};
use proxypool_snapshot::SnapshotUpdate;
use proxypool_snapshot::publisher::{Base, Plan, PollStart, PublisherState};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A long-poll's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PollOutcome {
    /// The whole snapshot or the changes since the caller's version.
    Update(SnapshotUpdate),
    /// Nothing newer than the caller's version within the wait.
    NotModified,
}

/// Builds and issues worker snapshots.
#[derive(Debug)]
pub struct SnapshotPublisher {
    pool: Arc<dyn ActivityPool>,
    clock: SharedClock,
    config: SnapshotConfig,
    // Swapped whole on a configuration reload; every snapshot after it carries the new set.
    clients: ArcSwap<Vec<GatewayClient>>,
    /// `[cooldowns]`, shipped in every snapshot; swapped on a reload like the clients.
    cooldown_policy: ArcSwap<CooldownPolicy>,
    changes: ChangeSignal,
    /// Per worker: what the latest build read (so a waiting poll can skip rebuilding), the
    /// content issued (the base of the next delta) and when the latest snapshot served
    /// was built (the snapshot-age gauge, `crate::metrics::pool`).
    state: PublisherState,
    /// The store's ticket key and when it was read: read again by a build at most every
    /// [`reads::TICKET_KEY_REREAD_MS`], which also keeps it alive in the store.
    ticket_key: Mutex<Option<(TicketKey, UnixMillis)>>,
    /// How gateways reach `https` proxies (`crate::upstream_tls`), in every snapshot.
    upstream_tls: Vec<UpstreamTls>,
}

impl SnapshotPublisher {
    pub fn new(
        pool: Arc<dyn ActivityPool>,
        clock: SharedClock,
        config: SnapshotConfig,
        clients: Vec<GatewayClient>,
        cooldown_policy: CooldownPolicy,
        changes: ChangeSignal,
    ) -> Self {
        SnapshotPublisher {
            pool,
            clock,
            config,
            clients: ArcSwap::from_pointee(clients),
            cooldown_policy: ArcSwap::from_pointee(cooldown_policy),
            changes,
            state: PublisherState::default(),
            ticket_key: Mutex::new(None),
            upstream_tls: Vec::new(),
        }
    }

    /// Ships `upstream_tls` in every snapshot.
    pub fn with_upstream_tls(mut self, upstream_tls: Vec<UpstreamTls>) -> Self {
        self.upstream_tls = upstream_tls;
        self
    }

    /// When this controller built version `version` of the session's snapshot (`None`
    /// when it did not: another controller did, or it was not the latest served).
    pub fn built_at(
        &self,
        worker: &WorkerId,
        session_id: &str,
        version: u64,
    ) -> Option<UnixMillis> {
        self.state.built_at(worker, session_id, version)
    }

    /// Drops what is remembered for workers not in `live` (their sessions ended).
    pub(crate) fn forget_other_workers(&self, live: &BTreeSet<WorkerId>) {
        self.state.retain(live);
    }

    /// Replaces the gateway clients and wakes every waiting long-poll, so each gateway
    /// gets a snapshot with the new clients within a round trip.
    pub fn replace_clients(&self, clients: Vec<GatewayClient>) {
        self.clients.store(Arc::new(clients));
        self.changes.notify();
    }

    /// Replaces the cooldown policy the snapshots carry and wakes every waiting long-poll.
    pub fn replace_cooldown_policy(&self, policy: CooldownPolicy) {
        self.cooldown_policy.store(Arc::new(policy));
        self.changes.notify();
    }

    pub fn changes(&self) -> &ChangeSignal {
        &self.changes
    }

    /// Waits up to `wait` for a snapshot newer than `after_version` for the session.
    /// `Conflict(Fenced)` when the session is not the worker's live current one.
    pub async fn poll(
        &self,
        worker: &WorkerId,
        session_id: &str,
        after_version: u64,
        wait: Duration,
    ) -> PoolResult<PollOutcome> {
        let deadline = Instant::now() + wait.min(self.config.long_poll_wait.as_duration());
        let mut changes = self.changes.subscribe();
        loop {
            changes.borrow_and_update();
            if let Some(update) = self.try_issue(worker, session_id, after_version).await? {
                return Ok(PollOutcome::Update(update));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(PollOutcome::NotModified);
            }
            // Changes made by this controller wake us at once; the periodic look at the
            // store's snapshot version catches changes made elsewhere (another controller,
            // health, reports), and the remembered horizon those made by time (expiry).
            let nap = (deadline - now).min(self.config.poll_interval.as_duration());
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// The update to serve now, or `None` when the caller already has the current
    /// snapshot. Reads only the store's snapshot version when nothing the last build read
    /// can have changed since; reads only what changed when this controller issued the
    /// version the caller holds.
    async fn try_issue(
        &self,
        worker: &WorkerId,
        session_id: &str,
        after_version: u64,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        // Both read before anything they vouch for: a change after them moves them.
        let local = self.changes.generation();
        let counters = self.pool.snapshot_version(self.clock.now(), worker).await?;
        // Read after the counters, like every time this poll compares.
        let now = self.clock.now();
        let start = PollStart {
            worker,
            session_id,
            after_version,
            counters,
            local,
            now,
        };
        match self.state.plan(&start) {
            Plan::Unchanged => return Ok(None),
            Plan::SessionDue => match self.current_session(now, worker, session_id).await {
                // Still current, and nobody issued since the caller's version: nothing to serve.
                Ok(session) if self.state.session_read(&start, &session) => return Ok(None),
                Ok(_) => {}
                Err(e) => {
                    self.state.session_lost(worker);
                    return Err(e);
                }
            },
            Plan::Build => {}
        }
        let result = match self
            .state
            .base(&start, self.config.full_read_interval.as_ms())
        {
            Base::Changes(issued) => self.issue_changes(&start, issued).await,
            Base::Whole(issued) => self.read_whole_and_issue(&start, issued).await,
        };
        if result.is_err() {
            self.state.build_failed(worker);
        }
        result
    }
}
