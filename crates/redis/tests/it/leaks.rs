//! Credentials never leave the record values: no key ever names a password, errors and
//! debug output never print one, and once the proxies expired and were swept no key or
//! value anywhere in Redis holds one.

use crate::support;

use proxypool_core::ports::*;
use proxypool_core::{
    ActivityPool, Candidate, Credentials, ExtractMode, ExtractOutcome, ExtractRequest, PoolError,
    ProxyId, UnixMillis, UpstreamId, WorkerId, proxy_id_for,
};
use proxypool_pool::contract::fixtures;
use proxypool_redis::{RedisClient, RedisPoolOptions};

const T0: UnixMillis = 1_700_000_000_000;

fn password(i: usize) -> String {
    format!("Leak-Secret-{i}-zq")
}

fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(
        proxypool_core::Protocol::Socks5,
        format!("l{i}.vendor.test"),
        1080,
    );
    c.credentials = Some(Credentials::new(format!("user{i}"), password(i)));
    c
}

/// Which of the test's two runs a load belongs to: each uses its own operation id, client
/// and idempotency key.
#[derive(Clone, Copy)]
enum LoadRun {
    First,
    Second,
}

/// Upserts the 50 leak candidates, marks them healthy and extracts 10 of them.
async fn load_and_extract<P: ActivityPool>(
    pool: &P,
    upstream: &UpstreamId,
    ids: &[ProxyId],
    run: LoadRun,
) -> (ExtractRequest, ExtractOutcome) {
    let (operation, client, key, request_id) = match run {
        LoadRun::First => ("leak-op", "c1", "order-1", "r1"),
        LoadRun::Second => ("leak-op-2", "c2", "order-2", "r2"),
    };
    let mut batch = fixtures::batch(upstream.as_str(), (0..50).map(candidate).collect());
    batch.operation_id = Some(operation.into());
    batch.max_size = 1_000;
    pool.upsert(T0, batch).await.unwrap();
    fixtures::mark_healthy(pool, T0, ids).await;
    let mut request = fixtures::extract_request(client, 10, ExtractMode::Partial);
    request.idempotency_key = Some(key.into());
    request.request_id = request_id.into();
    let out = pool.extract(T0 + 1, request.clone()).await.unwrap();
    (request, out)
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        !text.contains("Leak-Secret-"),
        "a password leaked into {what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_in_keys_errors_or_leftover_values() {
    let Some(mut server) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "leak".to_owned(),
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    let upstream = UpstreamId::new("acme").unwrap();
    let ids: Vec<_> = (0..50)
        .map(|i| {
            proxy_id_for(
                proxypool_core::Protocol::Socks5,
                &format!("l{i}.vendor.test"),
                1080,
                Some(&format!("user{i}")),
            )
        })
        .collect();
    let (request, out) = load_and_extract(&pool, &upstream, &ids, LoadRun::First).await;
    assert!(
        out.response.proxies[0].password.is_some(),
        "the client gets its credentials"
    );
    let worker = WorkerId::new("gw-1").unwrap();
    let spare = pool.assignable(T0 + 1, 1).await.unwrap();
    pool.assign(T0 + 1, &spare[0].id, &worker, 10_000)
        .await
        .unwrap();
    assert!(!pool.owned_by(T0 + 2, &worker, 10).await.unwrap().is_empty());

    // Keys hold ids and digests only, at every point of the run.
    for key in support::scan_keys(&server, "*") {
        assert_clean("a key name", key.as_bytes());
    }
    // Errors and debug output print no credentials (and no URL password).
    let mut other = request.clone();
    other.count = 11;
    let conflict = pool.extract(T0 + 2, other).await.unwrap_err();
    assert_clean("an error", format!("{conflict} {conflict:?}").as_bytes());
    assert_clean("the pool's debug output", format!("{pool:?}").as_bytes());
    let client = RedisClient::open("redis+sentinel://:Leak-Secret-url-zq@127.0.0.1/m").unwrap();
    assert_clean(
        "the client's debug output",
        format!("{client:?}").as_bytes(),
    );
    server.stop().unwrap();
    let down = pool.extract(T0 + 3, request).await.unwrap_err();
    assert!(matches!(down, PoolError::Unavailable(_)));
    assert_clean(
        "an unavailable error",
        format!("{down} {down:?}").as_bytes(),
    );
    server.start_again().unwrap();

    // Second run on the restarted (empty) server, then everything expires and is swept.
    let pool2 = support::pool_on(
        server.url(),
        RedisPoolOptions {
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    run_to_expiry(&pool2, &upstream, &ids).await;
    for key in support::scan_keys(&server, "*") {
        assert_clean("a key name", key.as_bytes());
        assert_clean(
            &format!("the value of {key}"),
            &support::dump_key(&server, &key),
        );
    }
    if let Some(log) = server.log_path() {
        assert_clean("the redis log", &std::fs::read(log).unwrap_or_default());
    }
}

async fn run_to_expiry<P: ActivityPool>(pool: &P, upstream: &UpstreamId, ids: &[ProxyId]) {
    let (_, out) = load_and_extract(pool, upstream, ids, LoadRun::Second).await;
    assert_eq!(out.response.returned, 10);
    let later = T0 + 30_000 + 600_001;
    for _ in 0..100 {
        if !pool.sweep(later, 100).await.unwrap().more_pending {
            break;
        }
    }
    let footprint = pool.footprint().await.unwrap();
    assert_eq!(
        (footprint.records, footprint.results),
        (0, 0),
        "{footprint:?}"
    );
}
