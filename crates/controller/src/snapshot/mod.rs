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
//! store's [`SnapshotVersion`] (one small call) and rebuilds only when the counters moved,
//! when time alone ended something the last build listed, or on a local change (`memo`).

mod memo;
mod signal;

use arc_swap::ArcSwap;
use memo::{BuildMemo, Remembered, Verdict};
pub use signal::ChangeSignal;

use crate::clock::SharedClock;
use crate::config::SnapshotConfig;
use proxypool_core::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
    snapshot_checksum_full,
};
use proxypool_core::cooldown::MAX_SESSION_FEEDBACK;
use proxypool_core::{
    ActivityPool, Assignment, AssignmentState, ClientId, Conflict, CooldownPolicy, LockExt,
    OwnedProxy, PoolError, PoolResult, ProxyId, SnapshotRef, TicketKey, UnixMillis, WorkerId,
    WorkerSession,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A long-poll's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PollOutcome {
    Snapshot(Box<WorkerSnapshot>),
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
    /// When this controller built the latest snapshot it served each worker, for the
    /// snapshot-age gauge (`crate::metrics::pool`). One entry per worker with a session;
    /// held only to copy in or out, never across an `.await`.
    built: Mutex<HashMap<WorkerId, Built>>,
    /// What the latest build for each worker's session read, so a waiting poll can skip
    /// rebuilding while nothing it read can have changed.
    memo: BuildMemo,
    /// The store's ticket key and when it was read: read again by a build at most every
    /// [`TICKET_KEY_REREAD_MS`], which also keeps it alive in the store.
    ticket_key: Mutex<Option<(TicketKey, UnixMillis)>>,
    /// How gateways reach `https` proxies (`crate::upstream_tls`), in every snapshot.
    upstream_tls: Vec<UpstreamTls>,
}

/// How long a build reuses the ticket key it read: the key changes only with the store's
/// incarnation (whose loss starts new sessions and new snapshots anyway).
const TICKET_KEY_REREAD_MS: u64 = 60_000;

/// The latest snapshot served to a worker's session, and when it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Built {
    session_id: String,
    version: u64,
    at_ms: UnixMillis,
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
            built: Mutex::new(HashMap::new()),
            memo: BuildMemo::default(),
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
        self.built
            .lock_or_recover()
            .get(worker)
            .filter(|b| b.session_id == session_id && b.version == version)
            .map(|b| b.at_ms)
    }

    /// Drops what is remembered for workers not in `live` (their sessions ended).
    pub(crate) fn forget_other_workers(&self, live: &BTreeSet<WorkerId>) {
        self.built.lock_or_recover().retain(|w, _| live.contains(w));
        self.memo.retain(live);
    }

    /// Remembers a served snapshot; serving the same version again keeps its build time.
    fn remember(&self, worker: &WorkerId, session_id: &str, version: u64, now: UnixMillis) {
        let mut built = self.built.lock_or_recover();
        let same = built
            .get(worker)
            .is_some_and(|b| b.session_id == session_id && b.version == version);
        if !same {
            built.insert(
                worker.clone(),
                Built {
                    session_id: session_id.to_owned(),
                    version,
                    at_ms: now,
                },
            );
        }
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
            if let Some(snapshot) = self.try_issue(worker, session_id, after_version).await? {
                return Ok(PollOutcome::Snapshot(Box::new(snapshot)));
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

    /// The snapshot to serve now, or `None` when the caller already has the current one.
    /// Reads only the store's snapshot version when nothing the last build read can have
    /// changed since.
    async fn try_issue(
        &self,
        worker: &WorkerId,
        session_id: &str,
        after_version: u64,
    ) -> PoolResult<Option<WorkerSnapshot>> {
        // Both read before anything they vouch for: a change after them moves them.
        let local = self.changes.generation();
        let version = self.pool.snapshot_version(worker).await?;
        let now = self.clock.now();
        match self
            .memo
            .verdict(worker, session_id, after_version, version, local, now)
        {
            Verdict::Unchanged => return Ok(None),
            Verdict::SessionDue => match self.current_session(now, worker, session_id).await {
                // Still current, and nobody issued since the caller's version: nothing to serve.
                Ok(session) if latest_version_of(&session) == after_version => {
                    self.memo
                        .session_renewed(worker, session_id, session.expires_at_ms);
                    return Ok(None);
                }
                Ok(_) => {}
                Err(e) => {
                    self.memo.forget(worker);
                    return Err(e);
                }
            },
            Verdict::Rebuild => {}
        }
        self.build_and_issue(worker, session_id, after_version, version, local, now)
            .await
    }

    /// Reads everything the snapshot lists, and issues a new version when its content
    /// differs from the session's latest; remembers what it read.
    async fn build_and_issue(
        &self,
        worker: &WorkerId,
        session_id: &str,
        after_version: u64,
        version: proxypool_core::SnapshotVersion,
        local: u64,
        now: UnixMillis,
    ) -> PoolResult<Option<WorkerSnapshot>> {
        let session = self.current_session(now, worker, session_id).await?;
        let epoch = self.pool.current_epoch().await?;
        let owned = self
            .pool
            .owned_by(now, worker, self.config.max_proxies)
            .await?;
        let proxies: Vec<SnapshotProxy> = owned.iter().map(snapshot_proxy).collect();
        let clients = self.clients.load_full();
        let draining = self
            .pool
            .draining_of(now, worker, self.config.max_proxies)
            .await?;
        let mut held: Vec<HeldLease> = draining
            .iter()
            .map(|a| HeldLease {
                id: a.proxy_id.clone(),
                lease_until_ms: a.lease_until_ms,
            })
            .collect();
        held.sort_by(|a, b| a.id.cmp(&b.id));
        let advisories = self.advisories(now, &proxies, &clients).await?;
        let ticket_key = self.ticket_key(now).await?;
        let checksum = snapshot_checksum_full(
            &proxies,
            &held,
            &clients,
            &advisories,
            Some(&ticket_key),
            &self.upstream_tls,
        );
        let remembered = |latest_version: u64| Remembered {
            session_id: session_id.to_owned(),
            version,
            local,
            content_until_ms: changes_by_time_at(&owned, &draining, &advisories),
            session_until_ms: session.expires_at_ms,
            latest_version,
        };
        let needed_epoch = draining
            .iter()
            .filter_map(|a| match a.state {
                AssignmentState::Draining { drain_epoch } => Some(drain_epoch),
                AssignmentState::Active => None,
            })
            .max()
            .unwrap_or(0);

        let latest = session
            .issued_snapshot
            .clone()
            .or_else(|| session.acked_snapshot.clone());
        let reference = match latest {
            Some(latest) if latest.checksum == checksum && latest.epoch >= needed_epoch => {
                self.memo.remember(worker, remembered(latest.version));
                if latest.version <= after_version {
                    return Ok(None);
                }
                latest // the caller missed it (a lost response): serve it again
            }
            latest => {
                let floor = [
                    latest.map_or(0, |l| l.version),
                    session.acked_snapshot.as_ref().map_or(0, |a| a.version),
                    after_version,
                ]
                .into_iter()
                .max()
                .unwrap_or(0);
                let reference = SnapshotRef {
                    version: floor + 1,
                    epoch,
                    checksum,
                };
                self.pool
                    .issue_snapshot(now, worker, session_id, reference.clone())
                    .await?;
                self.memo.remember(worker, remembered(reference.version));
                reference
            }
        };
        self.remember(worker, session_id, reference.version, now);
        Ok(Some(WorkerSnapshot {
            advisories,
            worker: worker.clone(),
            session_id: session_id.to_owned(),
            reference,
            generated_at_ms: now,
            max_staleness_ms: self.config.max_staleness.as_ms(),
            proxies,
            clients: clients.as_ref().clone(),
            held,
            ticket_key: Some(ticket_key),
            upstream_tls: self.upstream_tls.clone(),
        }))
    }

    /// The store's ticket key, read at most every [`TICKET_KEY_REREAD_MS`].
    async fn ticket_key(&self, now: UnixMillis) -> PoolResult<TicketKey> {
        let cached = self.ticket_key.lock_or_recover().clone();
        if let Some((key, read_at)) = cached
            && now.saturating_sub(read_at) < TICKET_KEY_REREAD_MS
        {
            return Ok(key);
        }
        let key = self.pool.ticket_key(now).await?;
        *self.ticket_key.lock_or_recover() = Some((key.clone(), now));
        Ok(key)
    }

    /// The policy, the listed proxies' remembered cooldowns (by proxy id, then domain) and
    /// the live feedback on sessions of the snapshot's clients (oldest first).
    async fn advisories(
        &self,
        now: UnixMillis,
        proxies: &[SnapshotProxy],
        clients: &[GatewayClient],
    ) -> PoolResult<Advisories> {
        let mut ids: Vec<ProxyId> = proxies.iter().map(|p| p.id.clone()).collect();
        ids.sort();
        ids.dedup();
        // The store answers in the order asked, each proxy's entries by domain.
        let cooldowns = if ids.is_empty() {
            Vec::new()
        } else {
            self.pool.cooldowns_of(now, &ids).await?
        };
        let served: BTreeSet<&ClientId> = clients.iter().map(|c| &c.id).collect();
        let session_feedback = self
            .pool
            .session_feedback(now, MAX_SESSION_FEEDBACK)
            .await?
            .into_iter()
            .filter(|f| served.contains(&f.client))
            .collect();
        Ok(Advisories {
            policy: Some(**self.cooldown_policy.load()),
            cooldowns,
            session_feedback,
        })
    }

    async fn current_session(
        &self,
        now: u64,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<WorkerSession> {
        self.pool
            .session(now, worker)
            .await?
            .filter(|s| s.session_id == session_id)
            .ok_or(PoolError::Conflict(Conflict::Fenced))
    }
}

/// The version of the session's latest snapshot: the issued one, else the acknowledged.
fn latest_version_of(session: &WorkerSession) -> u64 {
    session
        .issued_snapshot
        .as_ref()
        .or(session.acked_snapshot.as_ref())
        .map_or(0, |r| r.version)
}

/// The earliest instant at which the same reads answer differently with time alone: a
/// listed proxy's lease, usable-until or hard expiry, a draining lease's end, a listed
/// cooldown forgotten, a feedback expired (each is listed only while `now` is before it).
fn changes_by_time_at(
    owned: &[OwnedProxy],
    draining: &[Assignment],
    advisories: &Advisories,
) -> UnixMillis {
    let listed = owned.iter().flat_map(|o| {
        [
            o.assignment.lease_until_ms,
            o.record.usable_until_ms,
            o.record.hard_expiry_ms,
        ]
    });
    listed
        .chain(draining.iter().map(|a| a.lease_until_ms))
        .chain(advisories.cooldowns.iter().map(|c| c.forget_at_ms))
        .chain(advisories.session_feedback.iter().map(|f| f.expires_at_ms))
        .min()
        .unwrap_or(UnixMillis::MAX)
}

fn snapshot_proxy(owned: &OwnedProxy) -> SnapshotProxy {
    let record = &owned.record;
    SnapshotProxy {
        id: record.id.clone(),
        protocol: record.protocol,
        host: record.host.clone(),
        port: record.port,
        credentials: record.credentials.clone(),
        upstream: record.upstream.clone(),
        region: record.region.clone(),
        carrier: record.carrier.clone(),
        max_sessions: record.max_sessions,
        usable_until_ms: record.usable_until_ms,
        lease_until_ms: owned.assignment.lease_until_ms,
        epoch: owned.assignment.epoch,
    }
}
