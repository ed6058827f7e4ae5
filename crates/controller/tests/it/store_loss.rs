//! The store guard on a private Redis: a store that comes back empty, or from an older
//! copy, is recognised from the first call after it, a new incarnation is put in place
//! once, and a leader paused across the loss has every write refused when it resumes:
//! first because its store is not the one it remembers, then, once it caught up, because
//! its term is not the new leader's.

use crate::common::eventually_async;
use proxypool_controller::{SharedClock, StoreGuard, SystemClock};
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, ExtractMode, ExtractRequest, Fence, FetchedBatch,
    HealthBatch, HealthObservation, LeaseStore, LossReason, Maintenance, PoolError, Protocol,
    ProviderStatus, ProxyFilter, StoreLedger, StoreStatus, Unavailable, UpstreamId, WorkerId,
};
use proxypool_quota::MemoryQuota;
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use std::sync::Arc;
use std::time::Duration;

const HOLD_MS: u64 = 60_000;

fn pool(redis: &proxypool_testkit::RedisServer, prefix: &str) -> Arc<RedisPool> {
    Arc::new(
        RedisPool::new(
            RedisClient::open(redis.url()).unwrap(),
            RedisPoolOptions {
                key_prefix: prefix.to_owned(),
                call_timeout: Duration::from_secs(2),
                ..RedisPoolOptions::default()
            },
        )
        .unwrap(),
    )
}

fn batch(first: usize, n: usize) -> FetchedBatch {
    FetchedBatch {
        upstream: UpstreamId::new("sim").unwrap(),
        operation_id: None,
        ttl_ms: 600_000,
        safety_margin_ms: 1_000,
        max_size: 1_000,
        default_max_sessions: 4,
        candidates: (first..first + n)
            .map(|i| Candidate::new(Protocol::Http, format!("p{i}.vendor.test"), 8000 + i as u16))
            .collect(),
    }
}

fn extract_request(n: u32) -> ExtractRequest {
    ExtractRequest {
        project: None,
        for_domain: None,
        client: proxypool_core::ClientId::new("c1").unwrap(),
        idempotency_key: None,
        request_id: format!("req-{n}-{}", proxypool_core::random::u64().unwrap()),
        count: n,
        mode: ExtractMode::Partial,
        filter: ProxyFilter::default(),
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 60_000,
        key_held_ms: 0,
    }
}

/// The first answer of a read once Redis answers again (a restart breaks the connection,
/// which the next call makes again).
async fn first_answer(
    pool: &Arc<dyn ActivityPool>,
) -> Result<proxypool_core::Footprint, PoolError> {
    eventually_async(
        "Redis answered again",
        Duration::from_secs(10),
        async || match pool.footprint().await {
            Err(PoolError::Unavailable(Unavailable::Store(_))) => None,
            other => Some(other),
        },
    )
    .await
}

fn lost<T: std::fmt::Debug>(result: Result<T, PoolError>, call: &str) -> LossReason {
    match result {
        Err(PoolError::Unavailable(Unavailable::StoreLost(reason))) => reason,
        other => panic!("{call} must be refused as a lost store, got {other:?}"),
    }
}

fn stale<T: std::fmt::Debug>(result: Result<T, PoolError>, call: &str) {
    match result {
        Err(PoolError::Conflict(proxypool_core::Conflict::StaleTerm)) => {}
        other => panic!("{call} of an old term must be refused, got {other:?}"),
    }
}

/// Every kind of write a leader's loops make, through `store`; each must fail, and
/// `check` says how.
async fn every_write(
    store: &Arc<dyn ActivityPool>,
    now: u64,
    check: impl Fn(&str, Result<(), PoolError>),
) {
    let id = batch(0, 1).candidates[0].clone();
    let proxy = proxypool_core::proxy::proxy_id_for(id.protocol, &id.host, id.port, None);
    check("upsert", store.upsert(now, batch(100, 3)).await.map(|_| ()));
    check(
        "health",
        store
            .apply_health(
                now,
                HealthBatch {
                    observations: vec![HealthObservation {
                        proxy_id: proxy.clone(),
                        checked_at_ms: now,
                        outcome: CheckOutcome::Success { latency_ms: 5 },
                    }],
                    unhealthy_after_failures: 3,
                },
            )
            .await
            .map(|_| ()),
    );
    check(
        "assign",
        store
            .assign(now, &proxy, &WorkerId::new("gw-a").unwrap(), 20_000)
            .await
            .map(|_| ()),
    );
    check(
        "extract",
        store.extract(now, extract_request(2)).await.map(|_| ()),
    );
    check(
        "provider status",
        store
            .put_provider_status(
                now,
                &ProviderStatus {
                    upstream: Some(UpstreamId::new("sim").unwrap()),
                    ..ProviderStatus::default()
                },
            )
            .await,
    );
    check("sweep", store.sweep(now, 10).await.map(|_| ()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_across_a_store_loss_has_every_write_refused() {
    let Some(mut redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let clock: SharedClock = Arc::new(SystemClock);
    // The durable ledger both controllers share (the quota's database).
    let ledger: Arc<dyn StoreLedger> = Arc::new(MemoryQuota::new());
    let (redis_a, redis_b) = (pool(&redis, "loss"), pool(&redis, "loss"));
    let (pool_a, pool_b): (Arc<dyn ActivityPool>, Arc<dyn ActivityPool>) =
        (redis_a.clone(), redis_b.clone());
    let guard_a = StoreGuard::new(
        pool_a.clone(),
        ledger.clone(),
        "loss",
        clock.clone(),
        HOLD_MS,
    );
    let guard_b = StoreGuard::new(
        pool_b.clone(),
        ledger.clone(),
        "loss",
        clock.clone(),
        HOLD_MS,
    );
    let first = guard_a.establish().await.unwrap();
    assert!(matches!(first, StoreStatus::Ok { .. }), "{first:?}");
    assert_eq!(
        guard_b.establish().await.unwrap(),
        first,
        "both adopt one store"
    );

    // A leads and writes under its term.
    let now = clock.now();
    let lease_a = redis_a
        .try_acquire(now, "controller", "ctl-a", 10_000)
        .await
        .unwrap()
        .unwrap();
    let fenced_a = pool_a.fenced(Fence::new("controller", "ctl-a", lease_a.token));
    assert_eq!(fenced_a.upsert(now, batch(0, 5)).await.unwrap().inserted, 5);

    // A is paused; the store comes back empty (nothing was persisted).
    redis.restart().unwrap();

    // B notices on its very next call that Redis answers (the connection the restart
    // broke is made again first), and puts a new incarnation in place once.
    assert_eq!(
        lost(first_answer(&pool_b).await, "B's first call"),
        LossReason::Missing
    );
    let recovered = guard_b.round().await.unwrap();
    let StoreStatus::Recovering { loss, identity, .. } = &recovered else {
        panic!("expected a recovery, got {recovered:?}");
    };
    assert_eq!(*loss, Some(LossReason::Missing));
    let StoreStatus::Ok {
        identity: before, ..
    } = &first
    else {
        unreachable!()
    };
    assert_ne!(identity, before, "a new incarnation");
    let entry = ledger.load("loss").await.unwrap().unwrap();
    assert_eq!((&entry.identity, entry.installed), (identity, true));
    // Asked again, it finds nothing more to do.
    assert_eq!(
        guard_b.round().await.unwrap().identity(),
        Some(identity.as_str())
    );

    // B takes the leadership: its token is not below the time, so it is not A's.
    let later = clock.now() + 1;
    let lease_b = redis_b
        .try_acquire(later, "controller", "ctl-b", 10_000)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(lease_b.token, lease_a.token);
    assert!(lease_b.token >= later);
    let fenced_b = pool_b.fenced(Fence::new("controller", "ctl-b", lease_b.token));
    fenced_b.upsert(later, batch(0, 2)).await.unwrap();
    let footprint = pool_b.footprint().await.unwrap();

    // A resumes: every write is refused, as a store it does not know ...
    assert_eq!(
        lost(first_answer(&pool_a).await, "A's first call"),
        LossReason::Replaced
    );
    let at = clock.now();
    every_write(&fenced_a, at, |call, result| {
        assert_eq!(lost(result, call), LossReason::Replaced, "{call}");
    })
    .await;
    // ... and once its guard caught up with the new store, as a term that is over.
    let caught_up = guard_a.round().await.unwrap();
    assert_eq!(caught_up.identity(), Some(identity.as_str()));
    every_write(&fenced_a, clock.now(), |call, result| stale(result, call)).await;
    assert_eq!(
        pool_b.footprint().await.unwrap(),
        footprint,
        "nothing A tried landed"
    );
    // B's term writes on.
    fenced_b.upsert(clock.now(), batch(10, 1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_copy_is_a_loss_and_a_restart_with_its_data_is_not() {
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let clock: SharedClock = Arc::new(SystemClock);
    let ledger: Arc<dyn StoreLedger> = Arc::new(MemoryQuota::new());
    let store = pool(&redis, "copy");
    let guard = StoreGuard::new(
        store.clone(),
        ledger.clone(),
        "copy",
        clock.clone(),
        HOLD_MS,
    );
    guard.establish().await.unwrap();
    // A few rounds move the generation; the ledger follows.
    for _ in 0..3 {
        assert!(matches!(
            guard.round().await.unwrap(),
            StoreStatus::Ok { .. }
        ));
    }
    let entry = ledger.load("copy").await.unwrap().unwrap();
    assert!(entry.generation >= 4, "{entry:?}");
    // The mark as it was a moment ago: what a copy taken then holds.
    let mark_key = "copy:{activity}:v3:mark";
    let mut conn = redis.connect().unwrap();
    let older = entry.generation - 2;
    conn.command(&["HSET", mark_key, "generation", &older.to_string()])
        .unwrap();
    assert_eq!(
        lost(store.footprint().await, "a call on the older copy"),
        LossReason::RolledBack
    );
    let status = guard.round().await.unwrap();
    assert!(
        matches!(
            status,
            StoreStatus::Recovering {
                loss: Some(LossReason::RolledBack),
                ..
            }
        ),
        "{status:?}"
    );
    // A second guard (another controller, or this one restarted) adopts it as it is.
    let again = StoreGuard::new(store.clone(), ledger, "copy", clock, HOLD_MS);
    assert_eq!(
        again.establish().await.unwrap().identity(),
        status.identity()
    );
}

/// Controllers of a new deployment start at once on an empty store: every one of them
/// adopts the same first incarnation, and none takes another's fresh mark for a loss
/// (which would withhold every proxy for the recovery's hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_starting_together_on_an_empty_store_agree_on_its_first_incarnation() {
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let clock: SharedClock = Arc::new(SystemClock);
    for attempt in 0..20 {
        let name = format!("together{attempt}");
        let ledger: Arc<dyn StoreLedger> = Arc::new(MemoryQuota::new());
        let guards: Vec<StoreGuard> = (0..6)
            .map(|_| {
                StoreGuard::new(
                    pool(&redis, &name),
                    ledger.clone(),
                    name.as_str(),
                    clock.clone(),
                    HOLD_MS,
                )
            })
            .collect();
        let tasks: Vec<_> = guards
            .iter()
            .cloned()
            .map(|guard| tokio::spawn(async move { guard.establish().await }))
            .collect();
        let mut identities = Vec::new();
        for task in tasks {
            let status = task.await.unwrap().unwrap();
            assert!(
                matches!(status, StoreStatus::Ok { .. }),
                "attempt {attempt}: a controller saw {status:?}"
            );
            identities.push(status.identity().map(str::to_owned));
        }
        identities.dedup();
        assert_eq!(identities.len(), 1, "attempt {attempt}: {identities:?}");
        let entry = ledger.load(&name).await.unwrap().unwrap();
        assert_eq!(entry.loss, None, "attempt {attempt}: {entry:?}");
        assert!(entry.installed, "attempt {attempt}: {entry:?}");
    }
}
