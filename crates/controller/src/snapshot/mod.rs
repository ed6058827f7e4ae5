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

mod changes;
mod issued;
mod memo;
mod signal;

use arc_swap::ArcSwap;
use issued::{Horizons, Issued, IssuedContents};
use memo::{BuildMemo, Remembered, Verdict};
pub use signal::ChangeSignal;

use crate::clock::SharedClock;
use crate::config::SnapshotConfig;
use proxypool_core::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use proxypool_core::cooldown::MAX_SESSION_FEEDBACK;
use proxypool_core::snapshot_content::SnapshotContent;
use proxypool_core::snapshot_delta::{SnapshotDelta, SnapshotUpdate};
use proxypool_core::{
    ActivityPool, AssignmentState, ClientId, Conflict, CooldownPolicy, LockExt, PoolError,
    PoolResult, ProxyId, SNAPSHOT_JOURNAL_CAP, SessionFeedback, SnapshotRef, SnapshotVersion,
    TicketKey, UnixMillis, WorkerId, WorkerSession,
};
use std::collections::{BTreeSet, HashMap};
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
    /// When this controller built the latest snapshot it served each worker, for the
    /// snapshot-age gauge (`crate::metrics::pool`). One entry per worker with a session;
    /// held only to copy in or out, never across an `.await`.
    built: Mutex<HashMap<WorkerId, Built>>,
    /// What the latest build for each worker's session read, so a waiting poll can skip
    /// rebuilding while nothing it read can have changed.
    memo: BuildMemo,
    /// The content issued to each worker's session, the base of the next delta.
    issued: IssuedContents,
    /// The store's ticket key and when it was read: read again by a build at most every
    /// [`TICKET_KEY_REREAD_MS`], which also keeps it alive in the store.
    ticket_key: Mutex<Option<(TicketKey, UnixMillis)>>,
    /// How gateways reach `https` proxies (`crate::upstream_tls`), in every snapshot.
    upstream_tls: Vec<UpstreamTls>,
}

/// How long a build reuses the ticket key it read: the key changes only with the store's
/// incarnation (whose loss starts new sessions and new snapshots anyway).
const TICKET_KEY_REREAD_MS: u64 = 60_000;

/// What one poll read first: the caller's position and the counters its reads start from.
#[derive(Debug)]
struct Read<'a> {
    worker: &'a WorkerId,
    session_id: &'a str,
    after_version: u64,
    version: SnapshotVersion,
    local: u64,
    now: UnixMillis,
}

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
            issued: IssuedContents::default(),
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
        self.issued.retain(live);
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
        let version = self
            .pool
            .snapshot_version(self.clock.now(), worker)
            .await?;
        // Read after the counters, like every time this poll compares.
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
                    self.issued.forget(worker);
                    return Err(e);
                }
            },
            Verdict::Rebuild => {}
        }
        let base = match after_version {
            // A caller without a snapshot (or asking to start over) gets it whole.
            0 => None,
            v => self.issued.take(worker, session_id, v),
        };
        let read = Read {
            worker,
            session_id,
            after_version,
            version,
            local,
            now,
        };
        let result = match base {
            Some(issued)
                if now.saturating_sub(issued.read_whole_at_ms)
                    < self.config.full_read_interval.as_ms() =>
            {
                self.issue_changes(&read, issued).await
            }
            base => self.read_whole_and_issue(&read, base).await,
        };
        if result.is_err() {
            // What was taken out is gone; the next poll starts over from the store.
            self.memo.forget(worker);
        }
        result
    }

    /// Reads everything the snapshot lists and issues a new version when its content
    /// differs from the session's latest: as a delta when `base` is the content the caller
    /// holds, else whole.
    async fn read_whole_and_issue(
        &self,
        read: &Read<'_>,
        base: Option<Issued>,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, now) = (read.worker, read.now);
        let session = self.current_session(now, worker, read.session_id).await?;
        let epoch = self.pool.current_epoch().await?;
        let owned = self
            .pool
            .owned_by(now, worker, self.config.max_proxies)
            .await?;
        let proxies: Vec<SnapshotProxy> = owned.iter().map(changes::snapshot_proxy).collect();
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
        let whole = WorkerSnapshot {
            advisories,
            worker: worker.clone(),
            session_id: read.session_id.to_owned(),
            reference: SnapshotRef {
                version: 0,
                epoch,
                checksum: String::new(),
            },
            generated_at_ms: now,
            max_staleness_ms: self.config.max_staleness.as_ms(),
            proxies,
            clients: clients.as_ref().clone(),
            held,
            ticket_key: Some(ticket_key),
            upstream_tls: self.upstream_tls.clone(),
        };
        let content = SnapshotContent::of(&whole).map_err(|e| {
            PoolError::corrupt(format!(
                "the store lists a worker's snapshot twice over: {e}"
            ))
        })?;
        let mut horizons = Horizons::default();
        for o in &owned {
            let ends = changes::listing_ends_at(o)
                .min(changes::forgotten_at(content.cooldowns(&o.record.id)));
            horizons.set(&o.record.id, ends);
        }
        let mut drain_epochs = HashMap::new();
        for a in &draining {
            horizons.set(&a.proxy_id, a.lease_until_ms);
            if let AssignmentState::Draining { drain_epoch } = a.state {
                drain_epochs.insert(a.proxy_id.clone(), drain_epoch);
            }
        }
        let issued = Issued {
            content,
            counter: read.version.worker,
            feedback: read.version.feedback,
            clients,
            horizons,
            drain_epochs,
            read_whole_at_ms: now,
        };
        // The delta is made against what the caller holds, if this controller knows it.
        self.finish(read, &session, epoch, issued, true, |issued| {
            base.map(|base| base.content.delta_to(worker, &issued.content))
        })
        .await
    }

    /// Reads only what changed since `issued` (the content the caller holds) and issues
    /// the difference as a delta; falls back to a whole read when the store cannot say
    /// what changed or the result would pass a limit.
    async fn issue_changes(
        &self,
        read: &Read<'_>,
        mut issued: Issued,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, now) = (read.worker, read.now);
        let session = self.current_session(now, worker, read.session_id).await?;
        let epoch = self.pool.current_epoch().await?;
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
        let listed = changes::add_proxies(&mut issued, changed, &mut delta);
        if !listed.is_empty() {
            let mut ids: Vec<ProxyId> = listed.keys().cloned().collect();
            ids.sort();
            let cooldowns = self.pool.cooldowns_of(now, &ids).await?;
            changes::add_cooldowns(&mut issued, &listed, cooldowns, &mut delta);
        }
        let clients = self.clients.load_full();
        if !Arc::ptr_eq(&clients, &issued.clients) && clients.as_slice() != issued.content.clients()
        {
            delta.clients = Some(clients.as_ref().clone());
        }
        let policy = **self.cooldown_policy.load();
        if issued.content.policy() != Some(&policy) {
            delta.policy = Some(policy);
        }
        let feedback_due = issued
            .content
            .session_feedback()
            .iter()
            .any(|f| f.expires_at_ms <= now);
        if read.version.feedback != issued.feedback || delta.clients.is_some() || feedback_due {
            let feedback = self.served_feedback(now, &clients).await?;
            if feedback.as_slice() != issued.content.session_feedback() {
                delta.session_feedback = Some(feedback);
            }
        }
        let ticket_key = self.ticket_key(now).await?;
        if issued.content.ticket_key().map(TicketKey::id) != Some(ticket_key.id()) {
            delta.ticket_key = Some(ticket_key);
        }
        if issued.content.upstream_tls() != self.upstream_tls.as_slice() {
            delta.upstream_tls = Some(self.upstream_tls.clone());
        }
        issued.counter = read.version.worker;
        issued.feedback = read.version.feedback;
        issued.clients = clients;
        let mut next = issued;
        let applied = next.content.apply_unchecked(&delta);
        let within = next.content.proxy_count() <= self.config.max_proxies
            && next.content.held_count() <= self.config.max_proxies;
        if applied.is_err() || !within {
            // Cannot happen from a consistent store, but never serve a guess: read whole.
            return self.read_whole_and_issue(read, None).await;
        }
        self.finish(read, &session, epoch, next, false, |_| Some(delta))
            .await
    }

    /// Issues `issued.content` (a new version when it differs from the session's latest
    /// snapshot or a drain needs a newer epoch), remembers it, and answers with the delta
    /// `delta_of` makes or the whole snapshot.
    async fn finish(
        &self,
        read: &Read<'_>,
        session: &WorkerSession,
        epoch: u64,
        mut issued: Issued,
        whole_read: bool,
        delta_of: impl FnOnce(&Issued) -> Option<SnapshotDelta>,
    ) -> PoolResult<Option<SnapshotUpdate>> {
        let (worker, session_id, now) = (read.worker, read.session_id, read.now);
        let checksum = issued.content.checksum();
        let needed_epoch = issued.needed_epoch();
        let latest = session
            .issued_snapshot
            .clone()
            .or_else(|| session.acked_snapshot.clone());
        let reference = match latest {
            Some(latest) if latest.checksum == checksum && latest.epoch >= needed_epoch => {
                let latest_version = latest.version;
                issued.content.set_reference(latest.clone());
                if latest_version <= read.after_version {
                    self.remember_build(read, session, &issued, latest_version);
                    self.issued.put(worker, issued);
                    return Ok(None);
                }
                latest // the caller missed it (a lost response): serve it again
            }
            latest => {
                let floor = [
                    latest.map_or(0, |l| l.version),
                    session.acked_snapshot.as_ref().map_or(0, |a| a.version),
                    read.after_version,
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
                reference
            }
        };
        issued.content.set_reference(reference.clone());
        self.remember_build(read, session, &issued, reference.version);
        self.remember(worker, session_id, reference.version, now);
        let max_staleness_ms = self.config.max_staleness.as_ms();
        let update = match delta_of(&issued) {
            Some(mut delta) => {
                delta.reference = reference;
                delta.generated_at_ms = now;
                delta.max_staleness_ms = max_staleness_ms;
                SnapshotUpdate::Delta(Box::new(delta))
            }
            None => SnapshotUpdate::Full(Box::new(issued.content.to_snapshot(
                worker,
                now,
                max_staleness_ms,
            ))),
        };
        crate::metrics::snapshot_update(matches!(update, SnapshotUpdate::Delta(_)), whole_read);
        self.issued.put(worker, issued);
        Ok(Some(update))
    }

    /// Remembers what a build read, so a waiting poll can skip the next one.
    fn remember_build(
        &self,
        read: &Read<'_>,
        session: &WorkerSession,
        issued: &Issued,
        latest_version: u64,
    ) {
        let feedback_until = issued
            .content
            .session_feedback()
            .iter()
            .map(|f| f.expires_at_ms)
            .min()
            .unwrap_or(UnixMillis::MAX);
        self.memo.remember(
            read.worker,
            Remembered {
                session_id: read.session_id.to_owned(),
                version: read.version,
                local: read.local,
                content_until_ms: issued.horizons.earliest().min(feedback_until),
                session_until_ms: session.expires_at_ms,
                latest_version,
            },
        );
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
        let session_feedback = self.served_feedback(now, clients).await?;
        Ok(Advisories {
            policy: Some(**self.cooldown_policy.load()),
            cooldowns,
            session_feedback,
        })
    }

    /// The live session feedback of the given clients, oldest first.
    async fn served_feedback(
        &self,
        now: UnixMillis,
        clients: &[GatewayClient],
    ) -> PoolResult<Vec<SessionFeedback>> {
        let served: BTreeSet<&ClientId> = clients.iter().map(|c| &c.id).collect();
        Ok(self
            .pool
            .session_feedback(now, MAX_SESSION_FEEDBACK)
            .await?
            .into_iter()
            .filter(|f| served.contains(&f.client))
            .collect())
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
