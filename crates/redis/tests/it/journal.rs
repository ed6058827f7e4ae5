//! The snapshot change journal as stored: one sorted set per worker under the pool's
//! keyspace, with a native TTL, and its floor kept in the counters' own hash, so a journal
//! that lapsed by its TTL while the counters lived on is answered as forgotten (rebuild
//! whole), never as "nothing changed".

use crate::support;

use proxypool_core::ports::*;
use proxypool_core::{
    Holding, ProxyId, ProxyRuntime, RuntimeReport, SNAPSHOT_JOURNAL_CAP, SnapshotRef, UnixMillis,
    WorkerId,
};
use proxypool_pool::contract::fixtures::{T0, candidate_id, seed_range, worker};
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisServer, RespValue};

const LEASE_MS: u64 = 10_000;

fn pool(server: &RedisServer) -> RedisPool {
    support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "journal".to_owned(),
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    )
}

fn text(server: &RedisServer, args: &[&str]) -> Option<String> {
    match server.command(args).unwrap() {
        RespValue::Nil => None,
        other => Some(other.as_text().unwrap()),
    }
}

async fn changed(
    pool: &RedisPool,
    now: UnixMillis,
    worker: &WorkerId,
    after: u64,
) -> Option<Vec<(ProxyId, Holding)>> {
    pool.snapshot_changes(now, worker, after, &[], 100)
        .await
        .unwrap()
        .changed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_is_a_sorted_set_per_worker_with_a_ttl() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = pool(server);
    let base = pool.keyspace().to_owned();
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let (w1, w3) = (worker("gw-1"), worker("gw-3"));
    pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    let version = pool.snapshot_version(T0, &w1).await.unwrap().worker;

    let key = format!("{base}snapshot-journal:gw-1");
    let score = text(server, &["ZSCORE", &key, ids[0].as_str()]);
    assert_eq!(
        score,
        Some(version.to_string()),
        "at the latest change's value"
    );
    assert!(
        support::integer(server, &["PTTL", &key]) > 0,
        "a native TTL"
    );
    let versions = format!("{base}snapshot-versions");
    assert_eq!(
        text(server, &["HGET", &versions, "*floor:gw-1"]).as_deref(),
        Some("0"),
        "a first journal forgot nothing"
    );

    // A worker whose counter only moved for its session has no journal at all.
    pool.open_session(T0, &w3, "s3", 15_000).await.unwrap();
    let journals = support::scan_keys(server, &format!("{base}snapshot-journal:*"));
    assert_eq!(journals, vec![key]);
    assert_eq!(text(server, &["HGET", &versions, "*floor:gw-3"]), None);
    assert_eq!(changed(&pool, T0, &w3, 0).await, Some(Vec::new()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_lapsed_is_forgotten_not_empty() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = pool(server);
    let base = pool.keyspace().to_owned();
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let assigned = pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    let built = pool.snapshot_version(T0, &w1).await.unwrap().worker;
    pool.renew(T0 + 1, &ids[0], &w1, assigned.epoch, LEASE_MS)
        .await
        .unwrap();
    let current = pool.snapshot_version(T0 + 1, &w1).await.unwrap().worker;
    assert_eq!(
        changed(&pool, T0 + 2, &w1, built).await.map(|c| c.len()),
        Some(1),
        "the renewal is named"
    );

    // What the key's TTL running out does, without waiting for the wall clock.
    let key = format!("{base}snapshot-journal:gw-1");
    assert_eq!(support::integer(server, &["DEL", &key]), 1);
    assert_eq!(
        changed(&pool, T0 + 2, &w1, built).await,
        None,
        "the renewal was forgotten, not undone"
    );
    assert_eq!(
        changed(&pool, T0 + 2, &w1, current).await,
        Some(Vec::new()),
        "nothing happened after the current version"
    );

    // The next change starts a new journal that still cannot reach back past itself.
    pool.renew(T0 + 3, &ids[0], &w1, assigned.epoch, LEASE_MS)
        .await
        .unwrap();
    let named = changed(&pool, T0 + 4, &w1, current).await.unwrap();
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].0, ids[0]);
    assert!(matches!(named[0].1, Holding::Serving(_)));
    assert_eq!(changed(&pool, T0 + 4, &w1, built).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_keeps_the_cap_and_raises_its_floor() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = pool(server);
    let base = pool.keyspace().to_owned();
    let w1 = worker("gw-1");
    let snap = SnapshotRef {
        version: 1,
        epoch: 0,
        checksum: "sum".into(),
    };
    pool.open_session(T0, &w1, "s1", 15_000).await.unwrap();
    pool.issue_snapshot(T0, &w1, "s1", snap.clone())
        .await
        .unwrap();
    pool.ack_snapshot(T0, &w1, "s1", snap.clone())
        .await
        .unwrap();
    // Busy entries on proxies w1 does not hold are stale, and each is named: two more
    // distinct proxies than the journal keeps.
    let stale: Vec<ProxyId> = (0..SNAPSHOT_JOURNAL_CAP + 2).map(candidate_id).collect();
    let report = RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        usage: None,
        worker: w1.clone(),
        session_id: "s1".into(),
        sequence: 1,
        snapshot: snap,
        entries: stale
            .iter()
            .map(|id| ProxyRuntime {
                proxy_id: id.clone(),
                active: 1,
                reserved: 0,
                draining: false,
            })
            .collect(),
    };
    let receipt = pool.report_runtime(T0 + 1, report, 15_000).await.unwrap();
    assert_eq!(receipt.stale_proxies.len(), stale.len());

    let key = format!("{base}snapshot-journal:gw-1");
    let kept = support::integer(server, &["ZCARD", &key]);
    assert_eq!(kept, SNAPSHOT_JOURNAL_CAP as i64, "trimmed to the cap");
    for gone in &stale[..2] {
        assert_eq!(text(server, &["ZSCORE", &key, gone.as_str()]), None);
    }
    let third = text(server, &["ZSCORE", &key, stale[2].as_str()]).unwrap();
    let floor = text(
        server,
        &["HGET", &format!("{base}snapshot-versions"), "*floor:gw-1"],
    );
    let floor: u64 = floor.unwrap().parse().unwrap();
    let third: u64 = third.parse().unwrap();
    assert!(floor < third, "the kept changes are above the floor");
    assert_eq!(changed(&pool, T0 + 2, &w1, floor - 1).await, None);
    let kept = pool
        .snapshot_changes(T0 + 2, &w1, floor, &[], usize::MAX)
        .await
        .unwrap()
        .changed
        .expect("everything after the floor is remembered");
    assert_eq!(kept.len(), SNAPSHOT_JOURNAL_CAP);
}
