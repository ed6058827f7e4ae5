//! The narrow async ports of the activity pool.
//!
//! Callers depend on the one port they need; adapters (MemoryPool, RedisPool) implement all
//! of them. Every time-dependent method takes `now` (ms since the epoch) from the caller so
//! one contract suite can time-travel every adapter. All methods are atomic per call: a
//! call either applies whole or returns an error and changes nothing.
//!
//! Every port is `Debug`, so a component holding `Arc<dyn Port>` can derive `Debug`.

use crate::admin::AdminStore;
use crate::cooldown::CooldownStore;
use crate::error::PoolResult;
use crate::extract::{ExtractOutcome, ExtractRequest, ExtractResponse};
use crate::health::{DueQuery, HealthBatch, HealthReport};
use crate::ids::{ClientId, ExtractionId, ProxyId, UpstreamId, WorkerId};
use crate::inventory::{Footprint, InventoryView, SweepReport};
use crate::lease::Fence;
use crate::listing::{ProxyListFilter, ProxyPage};
use crate::ownership::{Assignment, OwnedProxy};
use crate::proxy::ProxyRecord;
use crate::runtime::{
    ReportReceipt, RuntimeReport, SnapshotChanges, SnapshotRef, SnapshotVersion, StoredRuntime,
    WorkerSession,
};
use crate::store_mark::StoreIdentity;
use crate::ticket::TicketKey;
use crate::time::UnixMillis;
use crate::upsert::{FetchedBatch, UpsertReport};
use crate::usage::ClientUsage;
use async_trait::async_trait;
use std::fmt::Debug;

/// Vendor batches into the pool (the provider reconciler's port).
#[async_trait]
pub trait Upserter: Send + Sync + Debug {
    /// Validates the batch (a bad batch fails before any write), dedupes by unique key
    /// (the current lifetime's upstream keeps its proxy), never refreshes an EXTRACTED
    /// proxy back in, and enforces `max_size` on the upstream's un-extracted inventory.
    async fn upsert(&self, now: UnixMillis, batch: FetchedBatch) -> PoolResult<UpsertReport>;
}

/// Health-check results (the checker's port).
#[async_trait]
pub trait HealthStore: Send + Sync + Debug {
    /// Applies check results atomically; non-AVAILABLE records leave every available index.
    async fn apply_health(&self, now: UnixMillis, batch: HealthBatch) -> PoolResult<HealthReport>;

    /// Records to check next: FETCHED first (oldest first), then SUSPECT, then AVAILABLE and
    /// UNHEALTHY ones whose last check is at least `recheck_after_ms` old. Live records only.
    async fn due_for_check(&self, now: UnixMillis, query: DueQuery)
    -> PoolResult<Vec<ProxyRecord>>;
}

/// Exclusive extraction (the distribution API's port).
#[async_trait]
pub trait Extractor: Send + Sync + Debug {
    /// One atomic step: idempotency check, candidate selection and re-validation, the
    /// gateway reserve, partial or all-or-nothing, the move to EXTRACTED and the stored
    /// response. A scan that runs out of budget before deciding is `Unavailable`.
    async fn extract(&self, now: UnixMillis, request: ExtractRequest)
    -> PoolResult<ExtractOutcome>;

    /// A stored extraction of `client`; another client's or an expired one is `NotFound`.
    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse>;
}

/// Worker ownership of proxies (the ownership manager's port).
#[async_trait]
pub trait OwnershipRepository: Send + Sync + Debug {
    /// Assigns an AVAILABLE, unowned proxy before its `usable_until` to `worker` under a new
    /// epoch; the lease is cut at `usable_until`.
    async fn assign(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        lease_ms: u64,
    ) -> PoolResult<Assignment>;

    /// Extends the lease; worker and epoch must match and the lease must not have lapsed.
    async fn renew(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        lease_ms: u64,
    ) -> PoolResult<Assignment>;

    /// Starts draining the proxy off `worker` (idempotent; the first call bumps the global
    /// epoch).
    async fn begin_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
    ) -> PoolResult<Assignment>;

    /// Releases a draining proxy, only when the worker has nothing active or reserved on it.
    async fn acknowledge_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        active: u32,
        reserved: u32,
    ) -> PoolResult<()>;

    async fn get(&self, now: UnixMillis, proxy: &ProxyId) -> PoolResult<Option<Assignment>>;

    /// Releases at most `limit` lapsed assignments and returns them.
    async fn expire(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>>;

    /// Releases at most `limit` assignments, serving or draining, of workers that have no
    /// live session at `now` (a crashed gateway's), and returns them. Each worker's
    /// session is judged in the same atomic step as the release, so a session opened or
    /// renewed concurrently keeps every proxy of its worker; a worker with a live session
    /// (whichever session id) never loses one this way.
    async fn release_orphaned(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>>;

    /// Usable, unowned proxies (candidates to assign), at most `limit`.
    async fn assignable(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<ProxyRecord>>;

    /// Proxies `worker` owns with an unexpired, non-draining lease, at most `limit`
    /// (what its next snapshot lists).
    async fn owned_by(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<OwnedProxy>>;

    /// Draining assignments of `worker`, at most `limit`.
    async fn draining_of(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<Assignment>>;

    /// The current global ownership epoch. `now` dates what a store keeps of the read (a
    /// sharded store raising its groups' copies to one value sets their native TTLs by it).
    async fn current_epoch(&self, now: UnixMillis) -> PoolResult<u64>;
}

/// Worker sessions, snapshot references and runtime reports (the worker control API's port).
#[async_trait]
pub trait WorkerRuntimeStore: Send + Sync + Debug {
    /// Opens a session; a different session id replaces and fences the current one and
    /// forgets its runtime. The same id renews it.
    async fn open_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession>;

    /// Extends the current session; a replaced one is `Conflict(Fenced)`.
    async fn renew_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        ttl_ms: u64,
    ) -> PoolResult<WorkerSession>;

    /// Ends the current session and its runtime (a worker shutting down cleanly).
    async fn close_session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<()>;

    async fn session(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<WorkerSession>>;

    /// Live sessions, at most `limit`.
    async fn live_sessions(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<WorkerSession>>;

    /// Records the snapshot just issued to the session (the one it must acknowledge).
    async fn issue_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<()>;

    /// The session applied `snapshot`; it must be the issued one.
    async fn ack_snapshot(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        session_id: &str,
        snapshot: SnapshotRef,
    ) -> PoolResult<WorkerSession>;

    /// Stores a full sparse report: current session, the acknowledged snapshot, a strictly
    /// increasing sequence (same sequence and content = replay, answered as the first
    /// time). An entry with non-zero counts on a proxy the worker does not own with a live
    /// lease at or before the snapshot's epoch is stale: it is left out of what is stored
    /// and returned, and the rest of the report applies. An accepted or replayed report
    /// renews the session to at least `now + ttl_ms`; the stored runtime lives `ttl_ms`.
    async fn report_runtime(
        &self,
        now: UnixMillis,
        report: RuntimeReport,
        ttl_ms: u64,
    ) -> PoolResult<ReportReceipt>;

    /// The worker's live runtime; `None` = capacity unknown.
    async fn runtime(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<Option<StoredRuntime>>;

    /// The worker's [`SnapshotVersion`]: one small read, so a waiting snapshot long-poll
    /// can tell whether anything it would list may have changed without re-reading it.
    /// A worker nothing was ever written for is at zero. The counters carry no time; `now`
    /// dates what a read may write (a sharded store raising its groups to one value).
    async fn snapshot_version(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
    ) -> PoolResult<SnapshotVersion>;

    /// The proxies whose place in the worker's snapshot may have changed since its counter
    /// was at `after` (every write that moves the counter for a proxy names it), together
    /// with `also` (proxies the caller wants read again, e.g. because time ended something
    /// about them), each read at `now` as [`Holding`], in one atomic step with the
    /// counters. `changed` is `None` when the store cannot say (it forgot changes that far
    /// back: it remembers at most [`SNAPSHOT_JOURNAL_CAP`](crate::SNAPSHOT_JOURNAL_CAP)
    /// proxies per worker) or when more than `limit` proxies would be returned.
    async fn snapshot_changes(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        after: u64,
        also: &[ProxyId],
        limit: usize,
    ) -> PoolResult<SnapshotChanges>;
}

/// Per-upstream inventory (the API's and the reconciler's port).
#[async_trait]
pub trait InventoryReader: Send + Sync + Debug {
    async fn inventory(&self, now: UnixMillis, upstream: &UpstreamId) -> PoolResult<InventoryView>;
}

/// Bounded cleanup of expired state.
#[async_trait]
pub trait Maintenance: Send + Sync + Debug {
    /// Removes expired records (with their indexes and assignments), lapsed sessions,
    /// runtimes and stored results, at most `limit` of each kind per call.
    async fn sweep(&self, now: UnixMillis, limit: usize) -> PoolResult<SweepReport>;

    /// Counts of what the store holds.
    async fn footprint(&self) -> PoolResult<Footprint>;
}

/// Everything an activity-pool adapter implements.
/// Usage per client and upstream (`crate::usage`): accounted by the store itself when it
/// accepts a runtime report (the gateways' counters) and when it extracts (proxies handed
/// out); this port reads it.
#[async_trait]
pub trait UsageReader: Send + Sync + Debug {
    /// The usage of each of `clients`, in order: totals, the last hour by minute and the
    /// last day by hour, as of `now`. A client with no usage gets empty lists.
    async fn usage(&self, now: UnixMillis, clients: &[ClientId]) -> PoolResult<Vec<ClientUsage>>;
}

/// A read-only page of the pool's proxies, for operators (`crate::listing`).
#[async_trait]
pub trait ProxyLister: Send + Sync + Debug {
    /// At most `limit` proxies matching `filter`, in ascending id order, with the cursor
    /// of the next page. A `limit` of zero or over `MAX_LIST_LIMIT` is `InvalidInput`; a
    /// pool larger than the store's scan budget is `Unavailable` (never a partial page).
    async fn list_proxies(
        &self,
        now: UnixMillis,
        filter: &ProxyListFilter,
        limit: usize,
    ) -> PoolResult<ProxyPage>;
}

/// The key of the gateways' feedback tickets (`crate::ticket`), kept by the pool store so
/// every controller ships the same one to its gateways and every client API checks with it.
#[async_trait]
pub trait TicketKeyStore: Send + Sync + Debug {
    /// The store's ticket key, created on the first call (from the operating system's
    /// CSPRNG) and the same for every later one: callers racing on a store without a key
    /// all get the one that was stored first. One key per store incarnation: a store that
    /// is lost comes back with a new one.
    async fn ticket_key(&self, now: UnixMillis) -> PoolResult<TicketKey>;
}

/// A handle on the same store whose every call is fenced by a leader term (see
/// [`crate::lease`]): the call is refused, atomically and with nothing changed, with
/// `Conflict::StaleTerm` unless the named lease is live with the fence's token.
pub trait Fencing {
    fn fenced(&self, fence: Fence) -> std::sync::Arc<dyn ActivityPool>;
}

pub trait ActivityPool:
    Upserter
    + HealthStore
    + Extractor
    + OwnershipRepository
    + WorkerRuntimeStore
    + InventoryReader
    + Maintenance
    + UsageReader
    + AdminStore
    + ProxyLister
    + CooldownStore
    + TicketKeyStore
    + StoreIdentity
    + Fencing
    + 'static
{
}

impl<T> ActivityPool for T where
    T: Upserter
        + HealthStore
        + Extractor
        + OwnershipRepository
        + WorkerRuntimeStore
        + InventoryReader
        + Maintenance
        + UsageReader
        + AdminStore
        + ProxyLister
        + CooldownStore
        + TicketKeyStore
        + StoreIdentity
        + Fencing
        + 'static
{
}
