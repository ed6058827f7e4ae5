//! The gateway fleet's membership as the control API answers it: the live worker sessions
//! whose stored runtime report (of that same session) names a fleet endpoint, sorted by
//! worker id. Computed from the store and cached for a short while per controller process,
//! so a fleet of gateways reporting every few seconds costs the store one scan per
//! [`FLEET_CACHE_FOR`], not one per report. Served in every report's answer
//! (`ReportAck.fleet`) and at `GET /control/v1/fleet?worker=W` (`handlers::fleet`).

use arc_swap::ArcSwapOption;
use proxypool_core::fleet::{FleetEndpoint, FleetMember};
use proxypool_core::{ActivityPool, PoolResult, UnixMillis, WorkerId, WorkerSession};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How long a computed list answers before the store is read again.
pub const FLEET_CACHE_FOR: Duration = Duration::from_millis(500);

/// Most sessions one computation reads (the store's `live_sessions` limit).
const MAX_SESSIONS: usize = 1024;

/// Runtime reads in flight at once while computing.
const CONCURRENT_READS: usize = 32;

/// One computed list and when (monotonic) it was computed.
#[derive(Debug)]
struct Cached {
    at: Instant,
    /// The invalidation count the computation started at: a list computed before an
    /// invalidation never answers after it.
    generation: u64,
    members: Arc<Vec<FleetMember>>,
}

/// The fleet list of one controller process, cached for [`FLEET_CACHE_FOR`].
#[derive(Debug, Default)]
pub struct FleetCache {
    cached: ArcSwapOption<Cached>,
    generation: AtomicU64,
}

impl FleetCache {
    /// The cached list if it is fresh (and, when `must_show` is given, shows that worker
    /// exactly with that endpoint or not at all), else a new one read from the store.
    /// No lock is held while the store is read: concurrent callers may each compute, and
    /// the last one in is kept.
    pub async fn members(
        &self,
        pool: &Arc<dyn ActivityPool>,
        now: UnixMillis,
        must_show: Option<(&WorkerId, Option<&FleetEndpoint>)>,
    ) -> PoolResult<Arc<Vec<FleetMember>>> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(cached) = self.cached.load_full()
            && cached.generation == generation
            && cached.at.elapsed() < FLEET_CACHE_FOR
            && must_show.is_none_or(|(worker, endpoint)| shows(&cached.members, worker, endpoint))
        {
            return Ok(Arc::clone(&cached.members));
        }
        let members = Arc::new(compute(pool, now).await?);
        // Kept only if nothing invalidated the cache while the store was read.
        if self.generation.load(Ordering::Acquire) == generation {
            self.cached.store(Some(Arc::new(Cached {
                at: Instant::now(),
                generation,
                members: Arc::clone(&members),
            })));
        }
        Ok(members)
    }

    /// The last list computed, however old (what a report's answer carries when the store
    /// could not be read for a new one).
    pub fn last(&self) -> Arc<Vec<FleetMember>> {
        self.cached
            .load_full()
            .map_or_else(Arc::default, |cached| Arc::clone(&cached.members))
    }

    /// The next call reads the store (a session closed on this controller).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether `members` lists `worker` with exactly `endpoint`, or not at all when `None`.
fn shows(members: &[FleetMember], worker: &WorkerId, endpoint: Option<&FleetEndpoint>) -> bool {
    let listed = members.iter().find(|m| &m.worker == worker);
    match (listed, endpoint) {
        (None, None) => true,
        (Some(m), Some(e)) => m.address == e.address && m.spki_sha256 == e.spki_sha256,
        _ => false,
    }
}

/// The live sessions whose stored runtime, of the same session, names an endpoint.
async fn compute(pool: &Arc<dyn ActivityPool>, now: UnixMillis) -> PoolResult<Vec<FleetMember>> {
    let sessions = pool.live_sessions(now, MAX_SESSIONS).await?;
    let mut members = Vec::new();
    for chunk in sessions.chunks(CONCURRENT_READS) {
        let mut reads = JoinSet::new();
        for session in chunk.iter().cloned() {
            let pool = Arc::clone(pool);
            reads.spawn(async move {
                let runtime = pool.runtime(now, &session.worker).await?;
                Ok::<_, proxypool_core::PoolError>(member(session, runtime))
            });
        }
        while let Some(read) = reads.join_next().await {
            let read = read.map_err(|e| {
                proxypool_core::PoolError::store_down(format!("fleet read failed: {e}"))
            })?;
            members.extend(read?);
        }
    }
    members.sort_by(|a, b| a.worker.cmp(&b.worker));
    Ok(members)
}

/// The member a session and its stored runtime make, if the runtime is that session's and
/// names a well-formed endpoint.
fn member(
    session: WorkerSession,
    runtime: Option<proxypool_core::StoredRuntime>,
) -> Option<FleetMember> {
    let report = runtime?.report;
    if report.session_id != session.session_id {
        return None;
    }
    let endpoint = report.fleet?;
    endpoint.validate().ok()?;
    Some(FleetMember {
        worker: session.worker,
        address: endpoint.address,
        spki_sha256: endpoint.spki_sha256,
        since_ms: session.opened_at_ms,
    })
}
