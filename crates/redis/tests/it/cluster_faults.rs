//! RedisPool on a Redis Cluster whose primary of the pool's slot fails: killed, or frozen
//! (SIGSTOP) past the node timeout. Calls run throughout on one pool handle; each must end
//! within its timeout (never a hang) with a result or `Unavailable(Store)`, and after the
//! replica's promotion calls must succeed again within a bound, without a new handle.
//!
//! Replication is asynchronous: a write acknowledged just before the failover may be gone
//! on the promoted replica. The store-mark machinery detects a rolled-back store; these
//! tests do not assert that no write was lost. Each test owns a private cluster.

use crate::support::{self, until_available};

use proxypool_core::{
    Candidate, FetchedBatch, InventoryReader, PoolError, Protocol, Unavailable, UnixMillis,
    Upserter, UpstreamId,
};
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisCluster, RespValue};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T0: UnixMillis = 1_700_000_000_000;

/// The per-call timeout of these tests: short, so a hung primary costs little per call.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Longest a call may take, whatever happens to the cluster: its timeout and scheduling
/// slack on a loaded machine.
const NO_HANG: Duration = Duration::from_millis(1500);

/// Calls that start this long after the promotion must all succeed: the cluster client
/// reads the new slot map within a call or two.
const RECOVERY: Duration = Duration::from_secs(3);

/// How many calls of the load a phase of a test looks at: enough that a call that still
/// fails would be seen (`check` wants at least 10).
const CALLS_LOOKED_AT: usize = 15;

/// Bound of the waits for the load's calls: generous, for a loaded machine.
const CALLS_WAIT: Duration = Duration::from_secs(30);

/// How long the cluster may take to promote a replica (the node timeout is 1 s).
const FAILOVER_WAIT: Duration = Duration::from_secs(30);

fn batch(range: std::ops::Range<usize>) -> FetchedBatch {
    FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000_000,
        default_max_sessions: 4,
        candidates: range
            .map(|i| Candidate::new(Protocol::Http, format!("c{i}.vendor.test"), 8080))
            .collect(),
    }
}

fn cluster_pool() -> Option<(RedisCluster, Arc<RedisPool>)> {
    let cluster = proxypool_testkit::redis_cluster_or_skip(3, 1)?;
    let pool = support::pool_on(
        &support::cluster_url(&cluster),
        RedisPoolOptions {
            key_prefix: "cfault".to_owned(),
            call_timeout: CALL_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    Some((cluster, Arc::new(pool)))
}

/// The port of the primary that owns the pool's slot.
fn pool_primary(cluster: &RedisCluster, pool: &RedisPool) -> u16 {
    let slot = RedisCluster::key_slot(pool.keyspace());
    cluster.primary_of_slot(slot).unwrap()
}

/// One port call of the load.
#[derive(Debug)]
struct Outcome {
    what: &'static str,
    started: Instant,
    took: Duration,
    result: Result<(), PoolError>,
}

/// Port calls in a loop on one pool handle: a write (`FCALL` of an upsert), a read
/// (`FCALL` of the inventory) and the probe (`EVALSHA`, whose script a promoted replica
/// does not have: scripts do not replicate, so it is loaded there on NOSCRIPT).
#[derive(Debug)]
struct Load {
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<Vec<Outcome>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(pool: Arc<RedisPool>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let next = Arc::new(AtomicUsize::new(1_000));
        let task = tokio::spawn({
            let (stop, outcomes) = (stop.clone(), outcomes.clone());
            async move {
                let upstream = UpstreamId::new("acme").unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let now = T0 + i as u64;
                    let started = Instant::now();
                    let result = pool.upsert(now, batch(i..i + 1)).await.map(|_| ());
                    record(&outcomes, "upsert", started, result);
                    let started = Instant::now();
                    let result = pool.inventory(now, &upstream).await.map(|_| ());
                    record(&outcomes, "inventory", started, result);
                    let started = Instant::now();
                    let result = pool.probe().await;
                    record(&outcomes, "probe", started, result);
                    // Paces the load (the stimulus), so that it does not starve the cluster.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        Load {
            stop,
            outcomes,
            task,
        }
    }

    /// Waits until `count` calls that started at or after `since` have ended.
    async fn until_calls_since(&self, since: Instant, count: usize) {
        let outcomes = self.outcomes.clone();
        proxypool_testkit::eventually_async(
            &format!("{count} calls of the load since {since:?}"),
            CALLS_WAIT,
            || {
                let done = outcomes
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|o| o.started >= since)
                    .count();
                async move { (done >= count).then_some(()) }
            },
        )
        .await;
    }

    async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        std::mem::take(&mut *self.outcomes.lock().unwrap())
    }
}

fn record(
    outcomes: &Mutex<Vec<Outcome>>,
    what: &'static str,
    started: Instant,
    result: Result<(), PoolError>,
) {
    outcomes.lock().unwrap().push(Outcome {
        what,
        started,
        took: started.elapsed(),
        result,
    });
}

/// Every call ended within [`NO_HANG`], every failure was `Unavailable(Store)`, and every
/// call that started between `recovered_by` and `until` succeeded (at least a few did).
fn check(outcomes: &[Outcome], recovered_by: Instant, until: Instant) {
    let failures = outcomes.iter().filter(|o| o.result.is_err()).count();
    for outcome in outcomes {
        assert!(
            outcome.took < NO_HANG,
            "a call hung: {outcome:?} ({failures} failures of {})",
            outcomes.len()
        );
        if let Err(error) = &outcome.result {
            assert!(
                matches!(error, PoolError::Unavailable(Unavailable::Store(_))),
                "{outcome:?}"
            );
        }
    }
    let after: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.started >= recovered_by && o.started < until)
        .collect();
    assert!(
        after.len() >= 10,
        "too few calls after the recovery bound: {}",
        after.len()
    );
    let failed: Vec<&&Outcome> = after.iter().filter(|o| o.result.is_err()).collect();
    assert!(
        failed.is_empty(),
        "calls still failing {RECOVERY:?} after the promotion: {failed:?}"
    );
}

/// Failed calls by port call, for the report.
fn failures(outcomes: &[Outcome]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for outcome in outcomes.iter().filter(|o| o.result.is_err()) {
        match counts.iter_mut().find(|(what, _)| *what == outcome.what) {
            Some((_, n)) => *n += 1,
            None => counts.push((outcome.what, 1)),
        }
    }
    format!("{counts:?} of {} calls failed", outcomes.len())
}

/// When the first call after `since` succeeded, for the report.
fn first_success_after(outcomes: &[Outcome], since: Instant) -> Option<Duration> {
    outcomes
        .iter()
        .filter(|o| o.started >= since && o.result.is_ok())
        .map(|o| (o.started + o.took).duration_since(since))
        .min()
}

/// How many proxypool libraries the node on `port` holds.
fn libraries_on(cluster: &RedisCluster, port: u16) -> usize {
    let listed = cluster
        .connect(port)
        .unwrap()
        .command(&["FUNCTION", "LIST", "LIBRARYNAME", "proxypool_*"])
        .unwrap();
    match listed {
        RespValue::Array(libraries) => libraries.len(),
        other => panic!("FUNCTION LIST answered {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_primary_of_the_pool_slot_fails_over_and_calls_recover() {
    let Some((mut cluster, pool)) = cluster_pool() else {
        return;
    };
    until_available(|| pool.upsert(T0, batch(0..10))).await;
    let primary = pool_primary(&cluster, &pool);
    let load = Load::start(pool.clone());
    load.until_calls_since(Instant::now(), CALLS_LOOKED_AT)
        .await;

    let killed_at = Instant::now();
    let promoted = tokio::task::block_in_place(|| {
        cluster.kill(primary).unwrap();
        cluster.wait_for_failover(primary, FAILOVER_WAIT).unwrap()
    });
    let promoted_at = Instant::now();
    assert_ne!(promoted, primary);
    load.until_calls_since(promoted_at + RECOVERY, CALLS_LOOKED_AT)
        .await;
    let until = Instant::now();
    let outcomes = load.finish().await;

    assert!(
        outcomes
            .iter()
            .any(|o| o.started >= killed_at && o.started < promoted_at && o.result.is_err()),
        "no call failed while the slot had no primary: the test did not test the failover"
    );
    check(&outcomes, promoted_at + RECOVERY, until);
    eprintln!(
        "killed {primary}, {promoted} promoted after {:?}; first success {:?} after the \
         promotion; {}",
        promoted_at - killed_at,
        first_success_after(&outcomes, promoted_at),
        failures(&outcomes)
    );
    // The same handle keeps working on the promoted primary, which holds the library.
    until_available(|| pool.upsert(T0 + 1_000_000, batch(0..10))).await;
    assert_eq!(pool_primary(&cluster, &pool), promoted);
    assert_eq!(libraries_on(&cluster, promoted), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_primary_fails_fast_and_calls_recover_after_the_failover() {
    let Some((mut cluster, pool)) = cluster_pool() else {
        return;
    };
    until_available(|| pool.upsert(T0, batch(0..10))).await;
    let primary = pool_primary(&cluster, &pool);
    let load = Load::start(pool.clone());
    load.until_calls_since(Instant::now(), CALLS_LOOKED_AT)
        .await;

    // Frozen, its sockets open: calls to it get no answer, only their timeout. It stays
    // frozen through the failover and past the recovery bound.
    let paused_at = Instant::now();
    let promoted = tokio::task::block_in_place(|| {
        cluster.pause(primary).unwrap();
        cluster.wait_for_failover(primary, FAILOVER_WAIT).unwrap()
    });
    let promoted_at = Instant::now();
    assert!(
        promoted_at - paused_at > proxypool_testkit::CLUSTER_NODE_TIMEOUT,
        "frozen for less than the node timeout"
    );
    load.until_calls_since(promoted_at + RECOVERY, CALLS_LOOKED_AT)
        .await;
    let frozen_until = Instant::now();

    // Thawed, the old primary learns it was replaced and rejoins as a replica.
    tokio::task::block_in_place(|| {
        cluster.resume(primary).unwrap();
        assert_eq!(
            cluster.wait_for_replica(primary, FAILOVER_WAIT).unwrap(),
            promoted
        );
    });
    let rejoined_at = Instant::now();
    load.until_calls_since(rejoined_at + RECOVERY, CALLS_LOOKED_AT)
        .await;
    let until = Instant::now();
    let outcomes = load.finish().await;

    let while_frozen: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.started >= paused_at && o.started < promoted_at)
        .collect();
    assert!(
        while_frozen.iter().any(|o| o.result.is_err()),
        "no call failed while the primary was frozen: the test did not test the freeze"
    );
    check(&outcomes, promoted_at + RECOVERY, frozen_until);
    check(&outcomes, rejoined_at + RECOVERY, until);
    eprintln!(
        "froze {primary}, {promoted} promoted after {:?}; first success {:?} after the \
         promotion; {}",
        promoted_at - paused_at,
        first_success_after(&outcomes, promoted_at),
        failures(&outcomes)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_flushed_from_the_slot_owner_is_loaded_there_again() {
    let Some((cluster, pool)) = cluster_pool() else {
        return;
    };
    until_available(|| pool.upsert(T0, batch(0..10))).await;
    let primary = pool_primary(&cluster, &pool);
    assert_eq!(libraries_on(&cluster, primary), 1);
    // As a primary restarted without persistence would be; the flush replicates.
    cluster
        .connect(primary)
        .unwrap()
        .command(&["FUNCTION", "FLUSH", "SYNC"])
        .unwrap();
    cluster
        .connect(primary)
        .unwrap()
        .command(&["SCRIPT", "FLUSH", "SYNC"])
        .unwrap();
    assert_eq!(libraries_on(&cluster, primary), 0);

    let report = pool.upsert(T0 + 1, batch(10..12)).await.unwrap();
    assert_eq!(report.inserted, 2);
    pool.probe().await.unwrap();
    assert_eq!(libraries_on(&cluster, primary), 1);
    let upstream = UpstreamId::new("acme").unwrap();
    let inventory = pool.inventory(T0 + 2, &upstream).await.unwrap();
    assert_eq!(inventory.unextracted, 12);
}

/// `rediss+cluster://` as the controller opens it: every node verified against the store's
/// CA, the slot map read over TLS (so it names the TLS ports), a failover followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_calls_verify_the_nodes_and_follow_a_failover() {
    use proxypool_redis::RedisClient;

    let ca = proxypool_testkit::TestCa::new("cluster-pool").unwrap();
    let Some(mut cluster) = proxypool_testkit::redis_cluster_tls_or_skip(3, 1, &ca) else {
        return;
    };
    let seeds: Vec<(String, u16)> = cluster
        .tls_seed_urls()
        .iter()
        .map(|url| {
            let port = url.trim_end_matches('/').rsplit_once(':').unwrap().1;
            ("127.0.0.1".to_owned(), port.parse().unwrap())
        })
        .collect();
    let options = || RedisPoolOptions {
        key_prefix: support::unique_prefix("ctls"),
        call_timeout: CALL_TIMEOUT,
        ..RedisPoolOptions::default()
    };
    let certificates = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(std::fs::read(ca.ca_path()).unwrap()),
    };
    let client = RedisClient::cluster(
        &seeds,
        redis::RedisConnectionInfo::default(),
        true,
        Some(certificates),
    )
    .unwrap();
    let pool = RedisPool::new(client, options()).unwrap();
    until_available(|| pool.upsert(T0, batch(0..10))).await;
    pool.probe().await.unwrap();
    let primary = pool_primary(&cluster, &pool);
    assert_eq!(libraries_on(&cluster, primary), 1);

    // Without the CA the nodes' certificates are not trusted: no call gets through.
    let untrusted =
        RedisClient::cluster(&seeds, redis::RedisConnectionInfo::default(), true, None).unwrap();
    let untrusted = RedisPool::new(untrusted, options()).unwrap();
    let refused = untrusted.probe().await;
    assert!(
        matches!(refused, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{refused:?}"
    );

    let promoted = tokio::task::block_in_place(|| {
        cluster.kill(primary).unwrap();
        cluster.wait_for_failover(primary, FAILOVER_WAIT).unwrap()
    });
    let promoted_at = Instant::now();
    until_available(|| pool.upsert(T0 + 1, batch(10..12))).await;
    assert!(
        promoted_at.elapsed() < RECOVERY,
        "took {:?} after the promotion",
        promoted_at.elapsed()
    );
    assert_eq!(pool_primary(&cluster, &pool), promoted);
    let upstream = UpstreamId::new("acme").unwrap();
    until_available(|| pool.inventory(T0 + 2, &upstream)).await;
}

/// The store password goes to every node the cluster client connects to (seeds and the
/// nodes it learns), and a pool without it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_reaches_every_node() {
    use proxypool_redis::RedisClient;

    let Some(cluster) = proxypool_testkit::redis_cluster_or_skip(3, 1) else {
        return;
    };
    const PASSWORD: &str = "cluster-s3cret";
    for node in cluster.nodes() {
        let mut connection = cluster.connect(node.port).unwrap();
        connection
            .command(&["CONFIG", "SET", "masterauth", PASSWORD])
            .unwrap();
        connection
            .command(&["CONFIG", "SET", "requirepass", PASSWORD])
            .unwrap();
    }
    // One seed only: the other nodes are learned from the slot map and need it too.
    let seed = [("127.0.0.1".to_owned(), cluster.nodes()[0].port)];
    let open = |settings| {
        let client = RedisClient::cluster(&seed, settings, false, None).unwrap();
        let options = RedisPoolOptions {
            key_prefix: support::unique_prefix("cpw"),
            call_timeout: CALL_TIMEOUT,
            ..RedisPoolOptions::default()
        };
        RedisPool::new(client, options).unwrap()
    };
    let pool = open(redis::RedisConnectionInfo::default().set_password(PASSWORD));
    for i in 0..3 {
        until_available(|| pool.upsert(T0 + i, batch(i as usize..i as usize + 1))).await;
    }
    pool.probe().await.unwrap();
    assert!(pool.durability().await.unwrap().servers.len() == 3);

    let refused = open(redis::RedisConnectionInfo::default()).probe().await;
    assert!(
        matches!(refused, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{refused:?}"
    );
}
