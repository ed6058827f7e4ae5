//! Extractions over shard groups on a Redis Cluster (three groups, one per primary) while
//! the primary of one group is killed and its replica promoted. Two clients each take
//! all-or-nothing sets larger than one group holds (so most extractions gather parts from
//! several groups under a claim), give them back (the vendor then re-issues them, a new
//! generation) and take again, on one pool handle, throughout the failover. What must hold: no proxy is ever handed to one client while the
//! other holds it; every failure is `Unavailable` or too little stock, never a wrong
//! answer; extractions succeed again after the promotion.

use crate::support;

use proxypool_core::Candidate;
use proxypool_core::{
    CheckOutcome, ClientId, CooldownStore, ExtractMode, Extractor, FetchedBatch, HealthBatch,
    HealthObservation, HealthStore, PoolError, Protocol, ProxyId, Unavailable, UnixMillis,
    Upserter, UpstreamId, proxy_id_for,
};
use proxypool_pool::contract::fixtures::extract_request;
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::RedisCluster;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T0: UnixMillis = 1_700_000_000_000;
const STOCK: usize = 120;
/// More than one group holds (about 40 each).
const SET: u32 = 45;
const FAILOVER_WAIT: Duration = Duration::from_secs(30);
/// Bound of the waits for the clients' progress: generous, for a loaded machine.
const SERVED_WAIT: Duration = Duration::from_secs(30);

fn host(i: usize) -> String {
    format!("g{i}.vendor.test")
}

/// Marks `ids` healthy at `now` (so they are AVAILABLE again).
async fn healthy(pool: &RedisPool, now: UnixMillis, ids: &[ProxyId]) -> Result<(), PoolError> {
    let observations = ids
        .iter()
        .map(|id| HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 5 },
        })
        .collect();
    pool.apply_health(
        now,
        HealthBatch {
            observations,
            unhealthy_after_failures: 3,
        },
    )
    .await
    .map(|_| ())
}

/// The vendor lists `proxies` (given back) again at `now` with a later issue time: a new
/// generation of each, which a passing check makes AVAILABLE again.
async fn reissue(
    pool: &RedisPool,
    now: UnixMillis,
    proxies: &[(String, u16)],
) -> Result<(), PoolError> {
    let mut candidates = Vec::with_capacity(proxies.len());
    for (host, port) in proxies {
        let mut c = Candidate::new(Protocol::Http, host.clone(), *port);
        c.issued_at_ms = Some(now);
        candidates.push(c);
    }
    let batch = FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 3_600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000_000,
        default_max_sessions: 4,
        candidates,
    };
    pool.upsert(now, batch).await?;
    let ids: Vec<ProxyId> = proxies
        .iter()
        .map(|(host, port)| proxy_id_for(Protocol::Http, host, *port, None))
        .collect();
    healthy(pool, now, &ids).await
}

/// Who holds which proxy now, and what went wrong.
#[derive(Default)]
struct Ledger {
    holder: HashMap<ProxyId, &'static str>,
    served: usize,
    served_after: Vec<Instant>,
    failures: Vec<PoolError>,
}

/// Takes a set, checks nobody else holds any of it, gives it back (returned, then re-issued
/// by the vendor and checked healthy), again and again until `stop`.
async fn client_loop(
    pool: Arc<RedisPool>,
    name: &'static str,
    clock: Arc<AtomicU64>,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    // Given back and not re-issued yet (a group was out): listed again at the start of
    // every round, also one whose extraction then fails (the stock may be all withheld).
    let mut given_back: Vec<(String, u16)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if !given_back.is_empty() {
            let now = clock.fetch_add(1, Ordering::Relaxed);
            if reissue(&pool, now, &given_back).await.is_ok() {
                given_back.clear();
            }
        }
        let now = clock.fetch_add(1, Ordering::Relaxed);
        let taken = match pool
            .extract(now, extract_request(name, SET, ExtractMode::AllOrNothing))
            .await
        {
            Ok(out) => out.response.proxies,
            Err(e) => {
                ledger.lock().unwrap().failures.push(e);
                // A client's pause before it tries again, not a wait for anything.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        {
            let mut ledger = ledger.lock().unwrap();
            for p in &taken {
                if let Some(other) = ledger.holder.insert(p.id.clone(), name) {
                    panic!("{} handed to {name} while {other} holds it", p.id);
                }
            }
            ledger.served += 1;
            ledger.served_after.push(Instant::now());
        }
        // Give the set back; what cannot be given back now stays held (and must then
        // never be handed to the other client).
        let mut back = Vec::new();
        for p in &taken {
            let now = clock.fetch_add(1, Ordering::Relaxed);
            if pool
                .return_extracted(now, &ClientId::new(name).unwrap(), &p.id)
                .await
                .is_ok()
            {
                back.push(p.id.clone());
                given_back.push((p.host.clone(), p.port));
            }
        }
        {
            let mut ledger = ledger.lock().unwrap();
            for id in &back {
                ledger.holder.remove(id);
            }
        }
        let now = clock.fetch_add(1, Ordering::Relaxed);
        if reissue(&pool, now, &given_back).await.is_ok() {
            given_back.clear();
        }
    }
}

/// Waits until the clients were served `count` sets in all (`since: None`) or after `since`.
async fn served_since(ledger: &Mutex<Ledger>, since: Option<Instant>, count: usize) {
    proxypool_testkit::eventually_async(
        &format!("{count} sets served since {since:?}"),
        SERVED_WAIT,
        || {
            let ledger = ledger.lock().unwrap();
            let served = match since {
                None => ledger.served,
                Some(since) => ledger.served_after.iter().filter(|at| **at > since).count(),
            };
            async move { (served >= count).then_some(()) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractions_over_groups_stay_exclusive_through_a_killed_primary() {
    let Some(mut cluster) = proxypool_testkit::redis_cluster_or_skip(3, 1) else {
        return;
    };
    let pool = Arc::new(support::pool_on(
        &support::cluster_url(&cluster),
        RedisPoolOptions {
            key_prefix: "gfault".to_owned(),
            call_timeout: Duration::from_millis(500),
            groups: 3,
            ..RedisPoolOptions::default()
        },
    ));
    let batch = FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 3_600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000_000,
        default_max_sessions: 4,
        candidates: (0..STOCK)
            .map(|i| Candidate::new(Protocol::Http, host(i), 8080))
            .collect(),
    };
    support::until_available(|| pool.upsert(T0, batch.clone())).await;
    let ids: Vec<ProxyId> = (0..STOCK)
        .map(|i| proxy_id_for(Protocol::Http, &host(i), 8080, None))
        .collect();
    healthy(&pool, T0, &ids).await.unwrap();

    let clock = Arc::new(AtomicU64::new(T0 + 1));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let loops: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            tokio::spawn(client_loop(
                pool.clone(),
                name,
                clock.clone(),
                ledger.clone(),
                stop.clone(),
            ))
        })
        .collect();
    served_since(&ledger, None, 2).await;

    // The primary of a group that is not the home group dies.
    let slot = RedisCluster::key_slot(&pool.group_keyspaces()[1]);
    let victim = cluster.primary_of_slot(slot).unwrap();
    let promoted_at = tokio::task::block_in_place(|| {
        cluster.kill(victim).unwrap();
        cluster.wait_for_failover(victim, FAILOVER_WAIT).unwrap();
        Instant::now()
    });
    // The assertion below wants two; a third makes sure the clients kept going.
    served_since(&ledger, Some(promoted_at + Duration::from_secs(1)), 3).await;
    stop.store(true, Ordering::Relaxed);
    for task in loops {
        task.await.unwrap();
    }

    let ledger = ledger.lock().unwrap();
    for failure in &ledger.failures {
        assert!(
            matches!(
                failure,
                PoolError::Unavailable(Unavailable::Store(_))
                    | PoolError::InsufficientInventory { .. }
            ),
            "{failure:?}"
        );
    }
    assert!(
        ledger
            .failures
            .iter()
            .any(|f| matches!(f, PoolError::Unavailable(_))),
        "no extraction failed while a group had no primary: the test did not test the failover"
    );
    let after = ledger
        .served_after
        .iter()
        .filter(|at| **at > promoted_at + Duration::from_secs(1))
        .count();
    assert!(after >= 2, "extractions succeed again after the promotion");
    let unavailable = ledger
        .failures
        .iter()
        .filter(|f| matches!(f, PoolError::Unavailable(_)))
        .count();
    eprintln!(
        "{} sets served, {} failures ({unavailable} unavailable), {} after the promotion, {} \
         proxies still held",
        ledger.served,
        ledger.failures.len(),
        after,
        ledger.holder.len()
    );
}
