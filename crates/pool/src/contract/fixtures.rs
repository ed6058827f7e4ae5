//! Shared fixtures of the contract suite: a fixed clock origin, batches, candidates and
//! small helpers that bring proxies into a known state.

use super::factory::{PoolFactory, ScanLimits};
// Every contract module imports the fixtures with a glob; the port traits come along so
// their methods are callable on any `PoolFactory::Pool`.
use crate::{MemoryPool, MemoryPoolOptions};
use async_trait::async_trait;
pub use proxypool_core::ports::{
    Extractor, HealthStore, InventoryReader, Maintenance, OwnershipRepository, Upserter,
    WorkerRuntimeStore,
};
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, ClientId, Credentials, ExtractMode, ExtractRequest,
    FetchedBatch, HealthBatch, HealthObservation, Protocol, ProxyFilter, ProxyId, UnixMillis,
    UpstreamId, WorkerId, proxy_id_for,
};

/// The suite's "now" origin: any fixed instant works, time only moves forward from it.
pub const T0: UnixMillis = 1_700_000_000_000;
/// Proxy lifetime used by the suite (the shortest vendor lifetime the pool serves).
pub const TTL_MS: u64 = 30_000;
/// Safety margin used by the suite.
pub const MARGIN_MS: u64 = 5_000;
/// Default per-proxy gateway capacity used by the suite.
pub const SESSIONS: u32 = 4;

/// MemoryPool as a [`PoolFactory`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryFactory;

#[async_trait]
impl PoolFactory for MemoryFactory {
    type Pool = MemoryPool;

    async fn create(&self, limits: ScanLimits) -> Option<MemoryPool> {
        Some(MemoryPool::new(MemoryPoolOptions {
            extract_scan_budget: limits.extract_scan_budget,
            inventory_scan_budget: limits.inventory_scan_budget,
            ..MemoryPoolOptions::default()
        }))
    }
}

/// A fresh pool with default limits, or return from the test (the factory skipped).
#[macro_export]
#[doc(hidden)]
macro_rules! fresh_pool {
    ($factory:expr) => {
        $crate::fresh_pool!($factory, $crate::contract::ScanLimits::default())
    };
    ($factory:expr, $limits:expr) => {
        match $factory.create($limits).await {
            Some(pool) => pool,
            None => return,
        }
    };
}

pub fn upstream(name: &str) -> UpstreamId {
    UpstreamId::new(name).unwrap()
}

pub fn worker(name: &str) -> WorkerId {
    WorkerId::new(name).unwrap()
}

pub fn client(name: &str) -> ClientId {
    ClientId::new(name).unwrap()
}

/// Candidate number `i`: an HTTP proxy with credentials (the password is unique and
/// recognizable so leak scans can look for it).
pub fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(
        Protocol::Http,
        format!("p{i}.vendor.test"),
        8000 + (i % 1000) as u16,
    );
    c.credentials = Some(Credentials::new(
        format!("user{i}"),
        format!("pw-secret-{i}"),
    ));
    c
}

/// The id `candidate(i)` gets.
pub fn candidate_id(i: usize) -> ProxyId {
    let c = candidate(i);
    proxy_id_for(
        c.protocol,
        &c.host,
        c.port,
        c.credentials.as_ref().map(|c| c.username.as_str()),
    )
}

pub fn batch(upstream_name: &str, candidates: Vec<Candidate>) -> FetchedBatch {
    FetchedBatch {
        upstream: upstream(upstream_name),
        operation_id: None,
        ttl_ms: TTL_MS,
        safety_margin_ms: MARGIN_MS,
        max_size: 10_000,
        default_max_sessions: SESSIONS,
        candidates,
    }
}

/// Marks every id healthy at `now`.
pub async fn mark_healthy<P: ActivityPool + ?Sized>(pool: &P, now: UnixMillis, ids: &[ProxyId]) {
    let observations = ids
        .iter()
        .map(|id| HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 50 },
        })
        .collect();
    let report = pool
        .apply_health(
            now,
            HealthBatch {
                observations,
                unhealthy_after_failures: 3,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        report.applied as usize,
        ids.len(),
        "all observations must apply"
    );
}

/// Upserts the candidates into `upstream_name` and marks them healthy; returns their ids.
pub async fn seed_available<P: ActivityPool + ?Sized>(
    pool: &P,
    now: UnixMillis,
    upstream_name: &str,
    candidates: Vec<Candidate>,
) -> Vec<ProxyId> {
    let ids: Vec<ProxyId> = candidates
        .iter()
        .map(|c| {
            proxy_id_for(
                c.protocol,
                &c.host,
                c.port,
                c.credentials.as_ref().map(|c| c.username.as_str()),
            )
        })
        .collect();
    let report = pool
        .upsert(now, batch(upstream_name, candidates))
        .await
        .unwrap();
    assert_eq!(
        report.inserted as usize,
        ids.len(),
        "seeded candidates must all insert"
    );
    mark_healthy(pool, now, &ids).await;
    ids
}

/// `n` available proxies `candidate(first..first+n)` in `upstream_name`.
pub async fn seed_range<P: ActivityPool + ?Sized>(
    pool: &P,
    now: UnixMillis,
    upstream_name: &str,
    first: usize,
    n: usize,
) -> Vec<ProxyId> {
    seed_available(
        pool,
        now,
        upstream_name,
        (first..first + n).map(candidate).collect(),
    )
    .await
}

/// An extraction request with the suite's defaults.
pub fn extract_request(client_name: &str, count: u32, mode: ExtractMode) -> ExtractRequest {
    ExtractRequest {
        project: None,
        for_domain: None,
        client: client(client_name),
        idempotency_key: None,
        request_id: format!("req-{client_name}-{count}-{}", next_request_number()),
        count,
        mode,
        filter: ProxyFilter::default(),
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 600_000,
        key_held_ms: 0,
    }
}

fn next_request_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The live, checkable record `id` (FETCHED, SUSPECT, AVAILABLE or UNHEALTHY), read through
/// the public ports.
pub async fn find_record<P: ActivityPool + ?Sized>(
    pool: &P,
    now: UnixMillis,
    id: &ProxyId,
) -> Option<proxypool_core::ProxyRecord> {
    let query = proxypool_core::DueQuery {
        limit: usize::MAX,
        recheck_after_ms: 0,
    };
    pool.due_for_check(now, query)
        .await
        .unwrap()
        .into_iter()
        .find(|r| &r.id == id)
}
