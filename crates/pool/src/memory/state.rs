//! The MemoryPool's state and its indexes, kept consistent by a few small helpers.
//!
//! Invariant: a record is in the available indexes exactly when it is AVAILABLE, has no
//! assignment and is not hard-expired. Every mutation of a record goes through
//! [`State::replace_record`] or [`State::remove_record`], which keep that true.

pub(crate) use super::available::{AvailableIndex, ExpiryOrdered, FilterKey};
use proxypool_core::{
    Assignment, ClientId, ExtractResponse, ExtractionId, ProxyId, ProxyRecord,
    SNAPSHOT_JOURNAL_CAP, StoredRuntime, UnixMillis, UpsertReport, UpstreamId, WorkerId,
    WorkerSession,
};
use proxypool_core::{DomainCooldown, SessionFeedback};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// The first `limit` entries of a time-ordered `index` that are due at `now`, and whether
/// more are waiting: one bounded step of a sweep.
pub(crate) fn due_entries<T: Clone + Ord>(
    index: &BTreeSet<(UnixMillis, T)>,
    now: UnixMillis,
    limit: usize,
) -> (Vec<(UnixMillis, T)>, bool) {
    let mut due: Vec<(UnixMillis, T)> = index
        .iter()
        .take_while(|(at, _)| *at <= now)
        .take(limit.saturating_add(1))
        .cloned()
        .collect();
    let more = due.len() > limit;
    due.truncate(limit);
    (due, more)
}

/// A stored extraction response (replayable until `expires_at_ms`).
#[derive(Debug, Clone)]
pub(crate) struct StoredExtraction {
    pub(crate) client: ClientId,
    pub(crate) digest: String,
    pub(crate) response: ExtractResponse,
    pub(crate) expires_at_ms: UnixMillis,
    /// Until when the id stays taken (`ExtractRequest::held_until`): after the replay ends,
    /// a reuse of the key is refused until then. The expiry index is ordered by it.
    pub(crate) held_until_ms: UnixMillis,
}

/// A stored upsert result, keyed by (upstream, operation id).
#[derive(Debug, Clone)]
pub(crate) struct StoredOperation {
    pub(crate) report: UpsertReport,
    pub(crate) expires_at_ms: UnixMillis,
}

/// A worker's session plus what the store needs to judge replays.
#[derive(Debug, Clone)]
pub(crate) struct SessionState {
    pub(crate) session: WorkerSession,
    pub(crate) last_report_digest: Option<String>,
    /// The stale entries of the last accepted report, so a replay answers the same.
    pub(crate) last_report_stale: Vec<ProxyId>,
}

/// Everything the MemoryPool holds.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) records: HashMap<ProxyId, ProxyRecord>,
    /// (hard expiry, id) of every record.
    pub(crate) expiry: ExpiryOrdered,
    pub(crate) by_upstream: HashMap<UpstreamId, HashSet<ProxyId>>,
    pub(crate) available: AvailableIndex,
    /// Un-extracted records per upstream (what `max_size` caps).
    pub(crate) unextracted: HashMap<UpstreamId, u64>,
    pub(crate) assignments: HashMap<ProxyId, Assignment>,
    /// The client each EXTRACTED record was handed to and is still held by.
    pub(crate) extracted_by: HashMap<ProxyId, ClientId>,
    /// EXTRACTED records their client gave back: withheld from everyone until their hard
    /// expiry or a new generation from the vendor (`super::generation`).
    pub(crate) given_back: HashSet<ProxyId>,
    /// The epoch of each record's latest lease since it last entered the pool, what the
    /// gateways' tickets are bound to (`super::generation`).
    pub(crate) lease_epochs: HashMap<ProxyId, u64>,
    pub(crate) lease_expiry: ExpiryOrdered,
    pub(crate) worker_owned: HashMap<WorkerId, HashSet<ProxyId>>,
    pub(crate) epoch: u64,
    pub(crate) sessions: HashMap<WorkerId, SessionState>,
    pub(crate) runtimes: HashMap<WorkerId, StoredRuntime>,
    pub(crate) extractions: HashMap<ExtractionId, StoredExtraction>,
    pub(crate) extraction_expiry: BTreeSet<(UnixMillis, ExtractionId)>,
    pub(crate) usage: super::usage_state::UsageState,
    pub(crate) operations: HashMap<(UpstreamId, String), StoredOperation>,
    pub(crate) leases: HashMap<String, proxypool_core::Lease>,
    /// The last fencing token handed out per lease name (kept after release, so tokens
    /// only ever grow).
    pub(crate) lease_tokens: HashMap<String, u64>,
    /// Workers whose mode is not `Active`.
    pub(crate) worker_modes: std::collections::BTreeMap<WorkerId, proxypool_core::WorkerModeRecord>,
    pub(crate) provider_statuses:
        std::collections::BTreeMap<UpstreamId, proxypool_core::ProviderStatus>,
    /// Answers of keyed admin calls by (client, key): the record answered, and until when
    /// it is replayed.
    pub(crate) keyed_admin_calls:
        HashMap<(proxypool_core::ClientId, String), (proxypool_core::WorkerModeRecord, UnixMillis)>,
    /// Remembered cooldowns per proxy, each proxy's by domain (`merge_cooldowns` keeps
    /// them so); a proxy without any has no entry.
    pub(crate) cooldowns: HashMap<ProxyId, Vec<DomainCooldown>>,
    /// (earliest `forget_at_ms` of the proxy's cooldowns, proxy): what the sweep visits.
    pub(crate) cooldown_forget: ExpiryOrdered,
    /// Session feedback, oldest first.
    pub(crate) session_feedback: VecDeque<SessionFeedback>,
    /// Per worker, the counter of writes that may change its snapshot
    /// (`SnapshotVersion::worker`). Kept for every worker ever written for, so a counter
    /// never goes back: one small entry per worker id.
    pub(crate) snapshot_versions: HashMap<WorkerId, u64>,
    /// Per worker, the proxies its counter moved for (`snapshot_changes`), from the first
    /// such move on. Lives as long as the worker's counter: for good.
    pub(crate) snapshot_journals: HashMap<WorkerId, proxypool_snapshot::Journal>,
    /// `SnapshotVersion::feedback`: moved by every new session feedback.
    pub(crate) feedback_version: u64,
    /// The store's identity, generation and recovery (`proxypool_core::store_mark`).
    pub(crate) mark: Option<proxypool_core::StoreMark>,
    /// (withheld until, id) of every withheld record: what the sweep releases.
    pub(crate) withheld: ExpiryOrdered,
    /// The key of the gateways' feedback tickets, made on first use.
    pub(crate) ticket_key: Option<proxypool_core::TicketKey>,
}

impl State {
    /// A record that exists and has not reached its hard expiry.
    pub(crate) fn live_record(&self, id: &ProxyId, now: UnixMillis) -> Option<&ProxyRecord> {
        self.records.get(id).filter(|r| now < r.hard_expiry_ms)
    }

    fn is_available(&self, record: &ProxyRecord) -> bool {
        record.status == proxypool_core::ProxyStatus::Available
            && record.withheld_until_ms.is_none()
            && !self.assignments.contains_key(&record.id)
    }

    /// Moves the worker's snapshot version: a write may have changed what it lists. A write
    /// about one proxy names it (`proxy`), so the worker's journal remembers it at the new
    /// value; one about the worker itself (its session) names none.
    pub(crate) fn bump_snapshot_version(&mut self, worker: &WorkerId, proxy: Option<&ProxyId>) {
        let value = match self.snapshot_versions.get_mut(worker) {
            Some(version) => {
                *version += 1;
                *version
            }
            None => {
                self.snapshot_versions.insert(worker.clone(), 1);
                1
            }
        };
        let Some(proxy) = proxy else {
            return;
        };
        match self.snapshot_journals.get_mut(worker) {
            Some(journal) => journal.record(proxy, value, SNAPSHOT_JOURNAL_CAP),
            None => {
                let mut journal = proxypool_snapshot::Journal::default();
                journal.record(proxy, value, SNAPSHOT_JOURNAL_CAP);
                self.snapshot_journals.insert(worker.clone(), journal);
            }
        }
    }

    /// Moves the snapshot version of the worker holding `id`, if any, naming `id`.
    fn bump_owner_of(&mut self, id: &ProxyId) {
        if let Some(owner) = self.assignments.get(id).map(|a| a.worker.clone()) {
            self.bump_snapshot_version(&owner, Some(id));
        }
    }

    /// Stores `record` (new or changed), keeping every index and counter in step.
    pub(crate) fn replace_record(&mut self, record: ProxyRecord) {
        let old = self.records.remove(&record.id);
        if old
            .as_ref()
            .is_some_and(|old| differs_for_snapshot(old, &record))
        {
            self.bump_owner_of(&record.id);
        }
        if let Some(old) = &old {
            self.available.remove(old);
            self.expiry.remove(&(old.hard_expiry_ms, old.id.clone()));
            if let Some(until) = old.withheld_until_ms {
                self.withheld.remove(&(until, old.id.clone()));
            }
            if old.status.is_unextracted() {
                self.adjust_unextracted(&old.upstream, -1);
            }
            if old.upstream != record.upstream {
                self.forget_upstream_member(&old.upstream, &old.id);
            }
        }
        if self.is_available(&record) {
            self.available.insert(&record);
        }
        self.expiry
            .insert((record.hard_expiry_ms, record.id.clone()));
        if let Some(until) = record.withheld_until_ms {
            self.withheld.insert((until, record.id.clone()));
        }
        if record.status.is_unextracted() {
            self.adjust_unextracted(&record.upstream, 1);
        }
        self.follow_generation(&record);
        self.by_upstream
            .entry(record.upstream.clone())
            .or_default()
            .insert(record.id.clone());
        self.records.insert(record.id.clone(), record);
    }

    /// While records are withheld, how long a client that found too little should wait
    /// (until the first is released, between 1 s and a minute); `None` when none is.
    pub(crate) fn recovery_retry_after(&self, now: UnixMillis) -> Option<u64> {
        let (until, _) = self.withheld.first()?;
        Some(proxypool_core::store_mark::recovery_retry_after_ms(
            *until, now,
        ))
    }

    /// Releases up to `limit` withheld records whose hold ended at `now` (all of them once
    /// the store's recovery is over): (released, more waiting).
    pub(crate) fn release_withheld(&mut self, now: UnixMillis, limit: usize) -> (u32, bool) {
        let recovering = self.mark.as_ref().is_some_and(|m| m.recovery.is_some());
        let due: Vec<_> = self
            .withheld
            .iter()
            .take_while(|(until, _)| !recovering || *until <= now)
            .take(limit.saturating_add(1))
            .map(|(_, id)| id.clone())
            .collect();
        let more = due.len() > limit;
        let mut released = 0;
        for id in due.into_iter().take(limit) {
            if let Some(mut record) = self.records.get(&id).cloned() {
                record.withheld_until_ms = None;
                self.replace_record(record);
                released += 1;
            }
        }
        (released, more)
    }

    /// Re-evaluates a record's place in the available indexes (after ownership changed).
    pub(crate) fn reindex(&mut self, id: &ProxyId) {
        if let Some(record) = self.records.remove(id) {
            self.available.remove(&record);
            if self.is_available(&record) {
                self.available.insert(&record);
            }
            self.records.insert(id.clone(), record);
        }
    }

    /// Removes a record with its indexes, counters and assignment.
    pub(crate) fn remove_record(
        &mut self,
        id: &ProxyId,
    ) -> Option<(ProxyRecord, Option<Assignment>)> {
        let record = self.records.remove(id)?;
        self.available.remove(&record);
        self.expiry
            .remove(&(record.hard_expiry_ms, record.id.clone()));
        if let Some(until) = record.withheld_until_ms {
            self.withheld.remove(&(until, record.id.clone()));
        }
        if record.status.is_unextracted() {
            self.adjust_unextracted(&record.upstream, -1);
        }
        self.forget_upstream_member(&record.upstream, id);
        self.forget_generation(id);
        // Cooldowns belong to the record: a later lifetime of the same id starts clean,
        // as it does in Redis, where the record's removal drops them too.
        self.put_cooldowns(id, Vec::new());
        let assignment = self.drop_assignment(id);
        Some((record, assignment))
    }

    /// Replaces a proxy's cooldowns (empty = none), keeping the forget index in step.
    pub(crate) fn put_cooldowns(&mut self, id: &ProxyId, entries: Vec<DomainCooldown>) {
        // Every snapshot listing the proxy carries its cooldowns.
        let unchanged = match self.cooldowns.get(id) {
            Some(old) => *old == entries,
            None => entries.is_empty(),
        };
        if !unchanged {
            self.bump_owner_of(id);
        }
        if let Some(old) = self.cooldowns.remove(id)
            && let Some(earliest) = old.iter().map(|e| e.forget_at_ms).min()
        {
            self.cooldown_forget.remove(&(earliest, id.clone()));
        }
        if let Some(earliest) = entries.iter().map(|e| e.forget_at_ms).min() {
            self.cooldown_forget.insert((earliest, id.clone()));
            self.cooldowns.insert(id.clone(), entries);
        }
    }

    fn forget_upstream_member(&mut self, upstream: &UpstreamId, id: &ProxyId) {
        if let Some(members) = self.by_upstream.get_mut(upstream) {
            members.remove(id);
            if members.is_empty() {
                self.by_upstream.remove(upstream);
            }
        }
    }

    fn adjust_unextracted(&mut self, upstream: &UpstreamId, delta: i64) {
        let count = self.unextracted.entry(upstream.clone()).or_default();
        *count = count.saturating_add_signed(delta);
        if *count == 0 {
            self.unextracted.remove(upstream);
        }
    }

    pub(crate) fn unextracted_of(&self, upstream: &UpstreamId) -> u64 {
        self.unextracted.get(upstream).copied().unwrap_or(0)
    }

    /// Stores an assignment with its lease and per-worker indexes.
    pub(crate) fn put_assignment(&mut self, assignment: Assignment) {
        let id = assignment.proxy_id.clone();
        self.drop_assignment(&id);
        self.bump_snapshot_version(&assignment.worker, Some(&id));
        self.lease_expiry
            .insert((assignment.lease_until_ms, id.clone()));
        self.worker_owned
            .entry(assignment.worker.clone())
            .or_default()
            .insert(id.clone());
        // Every lease takes a new epoch: the generation the gateways' tickets name.
        self.lease_epochs.insert(id.clone(), assignment.epoch);
        self.assignments.insert(id.clone(), assignment);
        self.reindex(&id);
    }

    /// Removes an assignment (and puts the proxy back in the available indexes if it is
    /// still available).
    pub(crate) fn drop_assignment(&mut self, id: &ProxyId) -> Option<Assignment> {
        let assignment = self.assignments.remove(id)?;
        self.bump_snapshot_version(&assignment.worker, Some(id));
        self.lease_expiry
            .remove(&(assignment.lease_until_ms, id.clone()));
        if let Some(owned) = self.worker_owned.get_mut(&assignment.worker) {
            owned.remove(id);
            if owned.is_empty() {
                self.worker_owned.remove(&assignment.worker);
            }
        }
        self.reindex(id);
        Some(assignment)
    }

    /// Removes up to `limit` hard-expired records; returns (records, assignments) removed and
    /// whether more are waiting.
    pub(crate) fn remove_expired_records(
        &mut self,
        now: UnixMillis,
        limit: usize,
    ) -> (u32, u32, bool) {
        let (due, more) = due_entries(&self.expiry, now, limit);
        let (mut records, mut assignments) = (0, 0);
        for (_, id) in due {
            if let Some((_, assignment)) = self.remove_record(&id) {
                records += 1;
                assignments += u32::from(assignment.is_some());
            }
        }
        (records, assignments, more)
    }

    /// Removes up to `limit` expired extraction responses and operation results.
    pub(crate) fn remove_expired_results(&mut self, now: UnixMillis, limit: usize) -> (u32, bool) {
        let (due, mut more) = due_entries(&self.extraction_expiry, now, limit);
        let mut removed = 0;
        for entry in due {
            self.extraction_expiry.remove(&entry);
            self.extractions.remove(&entry.1);
            removed += 1;
        }
        let expired_ops: Vec<(UpstreamId, String)> = self
            .operations
            .iter()
            .filter(|(_, op)| op.expires_at_ms <= now)
            .map(|(key, _)| key.clone())
            .take(limit.saturating_add(1))
            .collect();
        more |= expired_ops.len() > limit;
        for key in expired_ops.into_iter().take(limit) {
            self.operations.remove(&key);
            removed += 1;
        }
        (removed, more)
    }

    /// Forgets the worker's session and runtime; a poll waiting on that session must see it
    /// end, so the worker's snapshot version moves.
    pub(crate) fn forget_session(&mut self, worker: &WorkerId) {
        self.sessions.remove(worker);
        self.runtimes.remove(worker);
        self.bump_snapshot_version(worker, None);
    }

    /// The worker's current session, if it is live.
    pub(crate) fn live_session(&self, worker: &WorkerId, now: UnixMillis) -> Option<&SessionState> {
        self.sessions.get(worker).filter(|s| s.session.is_live(now))
    }

    /// The worker's runtime, if it is live and belongs to its live current session.
    pub(crate) fn live_runtime(
        &self,
        worker: &WorkerId,
        now: UnixMillis,
    ) -> Option<&StoredRuntime> {
        let session = self.live_session(worker, now)?;
        self.runtimes
            .get(worker)
            .filter(|r| now < r.expires_at_ms && r.report.session_id == session.session.session_id)
    }
}

/// Whether `a` and `b` differ in anything a snapshot carries or that decides whether it
/// lists the proxy: everything but the health bookkeeping and the fetch time, which the
/// checker rewrites on every check of a proxy that stays AVAILABLE.
fn differs_for_snapshot(a: &ProxyRecord, b: &ProxyRecord) -> bool {
    a.id != b.id
        || a.protocol != b.protocol
        || a.host != b.host
        || a.port != b.port
        || a.credentials != b.credentials
        || a.upstream != b.upstream
        || a.region != b.region
        || a.carrier != b.carrier
        || a.labels != b.labels
        || a.status != b.status
        || a.hard_expiry_ms != b.hard_expiry_ms
        || a.usable_until_ms != b.usable_until_ms
        || a.max_sessions != b.max_sessions
}
