//! Redis-only failure semantics: scripts flushed mid-run, replies lost after a commit,
//! a server that is down, frozen or restarted. Each test owns a private redis-server so
//! it can break it.

use crate::support::{self, until_available};

use proxypool_core::{
    Candidate, CheckOutcome, Credentials, ExtractMode, ExtractRequest, Extractor, FetchedBatch,
    HealthBatch, HealthObservation, HealthStore, InventoryReader, PoolError, Protocol, ProxyFilter,
    ProxyId, Unavailable, UnixMillis, Upserter, UpstreamId, proxy_id_for,
};
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::RedisServer;
use std::time::{Duration, Instant};

const T0: UnixMillis = 1_700_000_000_000;

fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(Protocol::Http, format!("f{i}.vendor.test"), 9000);
    c.credentials = Some(Credentials::new(format!("u{i}"), format!("fault-pw-{i}")));
    c
}

fn id_of(c: &Candidate) -> ProxyId {
    proxy_id_for(
        c.protocol,
        &c.host,
        c.port,
        Some(&c.credentials.as_ref().unwrap().username),
    )
}

fn batch(range: std::ops::Range<usize>, operation: Option<&str>) -> FetchedBatch {
    FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: operation.map(str::to_owned),
        ttl_ms: 60_000,
        safety_margin_ms: 5_000,
        max_size: 100_000,
        default_max_sessions: 4,
        candidates: range.map(candidate).collect(),
    }
}

async fn seed(pool: &RedisPool, now: UnixMillis, range: std::ops::Range<usize>) {
    let ids: Vec<ProxyId> = range.clone().map(|i| id_of(&candidate(i))).collect();
    until_available(|| pool.upsert(now, batch(range.clone(), None))).await;
    let observations = ids
        .into_iter()
        .map(|proxy_id| HealthObservation {
            proxy_id,
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 10 },
        })
        .collect();
    let checks = HealthBatch {
        observations,
        unhealthy_after_failures: 3,
    };
    until_available(|| pool.apply_health(now, checks.clone())).await;
}

fn request(key: &str, count: u32) -> ExtractRequest {
    ExtractRequest {
        project: None,
        for_domain: None,
        client: proxypool_core::ClientId::new("c1").unwrap(),
        idempotency_key: Some(key.to_owned()),
        request_id: format!("r-{key}"),
        count,
        mode: ExtractMode::Partial,
        filter: ProxyFilter::default(),
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 600_000,
        key_held_ms: 0,
    }
}

fn private_pool(timeout: Duration) -> Option<(RedisServer, RedisPool)> {
    let server = proxypool_testkit::private_redis_or_skip()?;
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "fault".to_owned(),
            call_timeout: timeout,
            ..RedisPoolOptions::default()
        },
    );
    Some((server, pool))
}

/// Waits until the server answers a fresh connection again: a `CLIENT PAUSE` is over, and
/// the commands it held, queued before this one, have run. The probe blocks while the
/// server is paused, so the test's worker thread is handed over to the runtime's others.
fn until_unpaused(server: &RedisServer) {
    tokio::task::block_in_place(|| {
        proxypool_testkit::eventually(
            "the paused server answering",
            Duration::from_secs(10),
            || server.command(&["PING"]).is_ok(),
        );
    });
}

async fn unextracted(pool: &RedisPool, now: UnixMillis) -> u64 {
    let upstream = UpstreamId::new("acme").unwrap();
    until_available(|| pool.inventory(now, &upstream))
        .await
        .unextracted
}

/// A private server: the flush must not race the shared server's other tests' probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_reloads_transparently() {
    let Some((server, pool)) = private_pool(support::TEST_TIMEOUT) else {
        return;
    };
    seed(&pool, T0, 0..10).await;
    let first = pool.extract(T0 + 1, request("flush-1", 3)).await.unwrap();
    assert_eq!(first.response.returned, 3);

    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    // Every script is gone from the server (port calls are library functions, which a
    // script flush leaves alone; the probe is a script and reloads on NOSCRIPT).
    pool.probe().await.unwrap();
    let second = pool.extract(T0 + 2, request("flush-2", 3)).await.unwrap();
    assert_eq!(second.response.returned, 3);
    seed(&pool, T0 + 3, 10..12).await;
    assert_eq!(unextracted(&pool, T0 + 3).await, 6);
}

/// A private server: the flush must not race the shared server's other tests' first loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_flush_mid_run_reloads_the_library() {
    let Some((server, pool)) = private_pool(support::TEST_TIMEOUT) else {
        return;
    };
    seed(&pool, T0, 0..10).await;
    let first = pool.extract(T0 + 1, request("fflush-1", 3)).await.unwrap();
    assert_eq!(first.response.returned, 3);
    // The calls loaded the library by themselves.
    let listed = server
        .command(&["FUNCTION", "LIST", "LIBRARYNAME", "proxypool_*"])
        .unwrap();
    assert!(
        matches!(&listed, proxypool_testkit::RespValue::Array(libraries) if libraries.len() == 1),
        "one proxypool library expected"
    );

    // As a restarted Redis without persistence (or a fresh replica) would be: no library.
    server.command(&["FUNCTION", "FLUSH"]).unwrap();
    let second = pool.extract(T0 + 2, request("fflush-2", 3)).await.unwrap();
    assert_eq!(second.response.returned, 3);
    seed(&pool, T0 + 3, 10..12).await;
    assert_eq!(unextracted(&pool, T0 + 3).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_lost_after_commit_replays_with_one_effect() {
    let Some((server, pool)) = private_pool(Duration::from_millis(150)) else {
        return;
    };
    // Warm up (the library is loaded), so the paused calls below are a single FCALL that commits.
    seed(&pool, T0, 0..10).await;
    until_available(|| pool.extract(T0, request("warm-up", 1))).await;

    // The server holds every command for 600 ms: the client gives up after 150 ms, the
    // server then runs the script anyway. The reply is lost, the effect is committed.
    server.command(&["CLIENT", "PAUSE", "600", "ALL"]).unwrap();
    let lost = pool.upsert(T0 + 1, batch(10..20, Some("op-7"))).await;
    assert!(
        matches!(lost, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{lost:?}"
    );
    let lost = pool.extract(T0 + 1, request("order-9", 4)).await;
    assert!(
        matches!(lost, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{lost:?}"
    );
    until_unpaused(&server);

    // The caller retries with the same operation id / idempotency key: the stored first
    // result comes back and nothing is applied twice.
    let replay = until_available(|| pool.upsert(T0 + 2, batch(10..20, Some("op-7")))).await;
    assert_eq!((replay.inserted, replay.refreshed), (10, 0), "{replay:?}");
    let again = until_available(|| pool.extract(T0 + 2, request("order-9", 4))).await;
    assert!(again.replayed, "the committed extraction is replayed");
    assert_eq!(again.response.returned, 4);
    // 20 upserted, 1 + 4 extracted, once each.
    assert_eq!(unextracted(&pool, T0 + 2).await, 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_upsert_interrupted_then_retried_counts_once() {
    let Some(server) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            upsert_chunk: 7,
            call_timeout: Duration::from_millis(150),
            ..RedisPoolOptions::default()
        },
    );
    until_available(|| pool.upsert(T0, batch(100..101, None))).await; // loads the script
    // The first chunk commits while its reply is lost; the batch stops there.
    server.command(&["CLIENT", "PAUSE", "600", "ALL"]).unwrap();
    let interrupted = pool.upsert(T0 + 1, batch(0..30, Some("big-1"))).await;
    assert!(interrupted.is_err(), "{interrupted:?}");
    until_unpaused(&server);
    assert_eq!(
        unextracted(&pool, T0 + 1).await,
        1 + 7,
        "only chunk 0 landed"
    );

    // The retry replays chunk 0 from its stored result and applies the rest once.
    let retried = until_available(|| pool.upsert(T0 + 2, batch(0..30, Some("big-1")))).await;
    assert_eq!(
        (retried.inserted, retried.refreshed),
        (30, 0),
        "{retried:?}"
    );
    let replay = until_available(|| pool.upsert(T0 + 3, batch(0..30, Some("big-1")))).await;
    assert_eq!(replay, retried, "the whole batch's report is stored");
    assert_eq!(unextracted(&pool, T0 + 3).await, 31);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_is_unavailable_within_the_timeout_and_recovers() {
    let Some((mut server, pool)) = private_pool(Duration::from_millis(500)) else {
        return;
    };
    seed(&pool, T0, 0..5).await;
    server.stop().unwrap();
    for attempt in 0..3 {
        let started = Instant::now();
        let down = pool
            .extract(T0 + 1, request(&format!("down-{attempt}"), 1))
            .await;
        let elapsed = started.elapsed();
        assert!(
            matches!(down, Err(PoolError::Unavailable(Unavailable::Store(_)))),
            "{down:?}"
        );
        assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    }

    // Same port, empty data (no persistence): the same pool object works again.
    server.start_again().unwrap();
    let report = until_available(|| pool.upsert(T0 + 2, batch(0..5, None))).await;
    assert_eq!(report.inserted, 5, "the restarted server is empty");
    seed(&pool, T0 + 3, 5..8).await;
    let out = until_available(|| pool.extract(T0 + 4, request("after-restart", 2))).await;
    assert_eq!(out.response.returned, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_server_is_unavailable_not_a_hang() {
    let Some((server, pool)) = private_pool(Duration::from_millis(300)) else {
        return;
    };
    seed(&pool, T0, 0..3).await;
    let pid = server.pid().expect("private server runs").to_string();
    std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap();
    let started = Instant::now();
    let frozen = pool.extract(T0 + 1, request("frozen", 1)).await;
    let elapsed = started.elapsed();
    std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap();
    assert!(
        matches!(frozen, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{frozen:?}"
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    // Thawed: the queued command ran late (its reply was dropped); the key replays it. A
    // caller retries what was unavailable, so does this one (the thawed server may be slow
    // on a loaded machine).
    let again = until_available(|| pool.extract(T0 + 2, request("frozen", 1))).await;
    assert_eq!(again.response.returned, 1);
    assert_eq!(
        unextracted(&pool, T0 + 2).await,
        2,
        "one extraction, not two"
    );
}
