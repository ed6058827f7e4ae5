//! 30 s-TTL churn on a private redis-server with explicit `now`: ten simulated minutes of a
//! vendor rotating proxies that are checked, extracted, assigned, reported on and swept.
//! The number of keys (DBSIZE) and of hash fields / sorted-set members stays bounded, and
//! once everything expired the pool holds (almost) nothing.

use crate::support;

use proxypool_core::ports::*;
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, ClientId, Credentials, ExtractMode, ExtractRequest,
    FetchedBatch, HealthBatch, HealthObservation, ProxyFilter, ProxyRuntime, RuntimeReport,
    SnapshotRef, UnixMillis, UpstreamId, WorkerId, proxy_id_for,
};
use proxypool_redis::RedisPoolOptions;
use proxypool_testkit::{RedisServer, RespValue};

const T0: UnixMillis = 1_700_000_000_000;
const STEP: u64 = 2_500;
const TICKS: u64 = 240;
const NEW_PER_TICK: usize = 20;

fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(
        proxypool_core::Protocol::Http,
        format!("c{i}.vendor.test"),
        7000,
    );
    c.region = Some(["us", "de", "fr"][i % 3].into());
    c.credentials = Some(Credentials::new(format!("u{i}"), format!("churn-pw-{i}")));
    c
}

#[derive(Debug, Default, Clone, Copy)]
struct Sizes {
    keys: i64,
    records: i64,
    expiry: i64,
    checks: i64,
    available: i64,
    inventory: i64,
    owners: i64,
    results: i64,
}

/// Entries of every candidate index the registry names.
fn candidate_entries(server: &RedisServer, base: &str) -> i64 {
    let suffixes: Vec<String> = match server
        .command(&["ZRANGE", &format!("{base}candidates"), "0", "-1"])
        .unwrap()
    {
        RespValue::Array(items) => items.iter().filter_map(RespValue::as_text).collect(),
        other => panic!("{other:?}"),
    };
    suffixes
        .iter()
        .map(|suffix| support::integer(server, &["ZCARD", &format!("{base}cand:{suffix}")]))
        .sum()
}

fn measure(server: &RedisServer, base: &str) -> Sizes {
    let k = |name: &str| format!("{base}{name}");
    Sizes {
        keys: support::integer(server, &["DBSIZE"]),
        records: support::integer(server, &["HLEN", &k("records")]),
        expiry: support::integer(server, &["ZCARD", &k("expiry")]),
        checks: support::integer(server, &["ZCARD", &k("checks")]),
        available: candidate_entries(server, base),
        inventory: support::integer(server, &["HLEN", &k("inventory")]),
        owners: support::integer(server, &["HLEN", &k("owners")]),
        results: support::integer(server, &["ZCARD", &k("idem-expiry")])
            + support::integer(server, &["ZCARD", &k("op-expiry")]),
    }
}

fn peak(a: Sizes, b: Sizes) -> Sizes {
    Sizes {
        keys: a.keys.max(b.keys),
        records: a.records.max(b.records),
        expiry: a.expiry.max(b.expiry),
        checks: a.checks.max(b.checks),
        available: a.available.max(b.available),
        inventory: a.inventory.max(b.inventory),
        owners: a.owners.max(b.owners),
        results: a.results.max(b.results),
    }
}

async fn sweep_all<P: ActivityPool>(pool: &P, now: UnixMillis) {
    for _ in 0..1_000 {
        if !pool.sweep(now, 64).await.unwrap().more_pending {
            return;
        }
    }
    panic!("sweep never finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_churn_keeps_keys_and_fields_bounded() {
    let Some(server) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "churn".to_owned(),
            // Operation results are kept one minute: at one fetch per tick, 24 of them.
            operation_ttl_ms: 60_000,
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    let base = pool.keyspace().to_owned();
    let upstream = UpstreamId::new("acme").unwrap();
    let worker = WorkerId::new("gw-1").unwrap();
    let (mut first_half, mut second_half) = (Sizes::default(), Sizes::default());
    let mut next = 0usize;

    for tick in 0..TICKS {
        let now = T0 + tick * STEP;
        // The vendor lists 20 new proxies and the 20 of the previous tick (a refresh).
        let listed: Vec<Candidate> = (next.saturating_sub(NEW_PER_TICK)..next + NEW_PER_TICK)
            .map(candidate)
            .collect();
        let fresh: Vec<_> = (next..next + NEW_PER_TICK)
            .map(|i| {
                let c = candidate(i);
                proxy_id_for(c.protocol, &c.host, c.port, Some(&format!("u{i}")))
            })
            .collect();
        next += NEW_PER_TICK;
        let batch = FetchedBatch {
            upstream: upstream.clone(),
            operation_id: Some(format!("fetch-{tick}")),
            ttl_ms: 30_000,
            safety_margin_ms: 5_000,
            max_size: 10_000,
            default_max_sessions: 4,
            candidates: listed,
        };
        pool.upsert(now, batch).await.unwrap();
        let observations = fresh
            .iter()
            .enumerate()
            .map(|(n, id)| HealthObservation {
                proxy_id: id.clone(),
                checked_at_ms: now,
                outcome: if n % 5 == 0 {
                    CheckOutcome::Failure {
                        error: "connect_timeout".into(),
                    }
                } else {
                    CheckOutcome::Success { latency_ms: 30 }
                },
            })
            .collect();
        pool.apply_health(
            now,
            HealthBatch {
                observations,
                unhealthy_after_failures: 2,
            },
        )
        .await
        .unwrap();
        let request = ExtractRequest {
            project: None,
            for_domain: None,
            client: ClientId::new("c1").unwrap(),
            idempotency_key: Some(format!("tick-{tick}")),
            request_id: format!("req-{tick}"),
            count: 3,
            mode: ExtractMode::Partial,
            filter: ProxyFilter::default(),
            min_health_freshness_ms: None,
            reserve_for_gateway: 2,
            idempotency_ttl_ms: 60_000,
            key_held_ms: 0,
        };
        pool.extract(now, request).await.unwrap();

        // One worker keeps a session, takes two proxies per tick and reports on them.
        pool.open_session(now, &worker, "s1", 10_000).await.unwrap();
        let mut assigned = Vec::new();
        for record in pool.assignable(now, 2).await.unwrap() {
            assigned.push(pool.assign(now, &record.id, &worker, 8_000).await.unwrap());
        }
        let snapshot = SnapshotRef {
            version: tick + 1,
            epoch: pool.current_epoch(now).await.unwrap(),
            checksum: format!("sum-{tick}"),
        };
        pool.issue_snapshot(now, &worker, "s1", snapshot.clone())
            .await
            .unwrap();
        pool.ack_snapshot(now, &worker, "s1", snapshot.clone())
            .await
            .unwrap();
        let entries = assigned
            .iter()
            .map(|a| ProxyRuntime {
                proxy_id: a.proxy_id.clone(),
                active: 1,
                reserved: 0,
                draining: false,
            })
            .collect();
        let report = RuntimeReport {
            fleet: None,
            cooldowns: Vec::new(),
            usage: None,
            worker: worker.clone(),
            session_id: "s1".into(),
            sequence: tick + 1,
            snapshot,
            entries,
        };
        pool.report_runtime(now, report, 5_000).await.unwrap();
        pool.expire(now, 100).await.unwrap();
        pool.inventory(now, &upstream).await.unwrap();
        sweep_all(&pool, now).await;

        let sizes = measure(&server, &base);
        if tick < TICKS / 2 {
            first_half = peak(first_half, sizes);
        } else {
            second_half = peak(second_half, sizes);
        }
    }

    // Lives are 30 s + one 2.5 s refresh: at most ~14 ticks of 20 proxies are alive.
    assert!(second_half.records <= 14 * 20, "{second_half:?}");
    assert!(second_half.expiry <= 14 * 20 && second_half.checks <= 14 * 20);
    // 24 operation results (one minute) + extraction responses (capped by proxy expiry).
    assert!(second_half.results <= 24 + 14, "{second_half:?}");
    // Nothing grows with time: the second five minutes peak no higher than the first.
    assert!(
        second_half.keys <= first_half.keys + 2,
        "{first_half:?} {second_half:?}"
    );
    assert!(
        second_half.records <= first_half.records,
        "{first_half:?} {second_half:?}"
    );
    assert!(second_half.inventory <= first_half.inventory);
    assert!(second_half.owners <= first_half.owners + 2);
    // ~26 structural keys + one string key per stored result.
    assert!(second_half.keys <= 26 + 24 + 14, "{second_half:?}");

    // Every key carries a native TTL (the memory safety net: an abandoned pool frees
    // itself), except the lease tokens, which must only ever grow.
    for key in support::scan_keys(&server, &format!("{base}*")) {
        let ttl = support::integer(&server, &["PTTL", &key]);
        assert!(ttl > 0 || key.ends_with("lease-tokens"), "{key} has no TTL");
    }

    // Ten minutes after the last tick everything has expired and is swept away.
    let end = T0 + TICKS * STEP + 600_000;
    pool.close_session(end, &worker, "s1").await.unwrap();
    pool.expire(end, 1_000).await.unwrap();
    sweep_all(&pool, end).await;
    let footprint = pool.footprint().await.unwrap();
    assert_eq!(
        (
            footprint.records,
            footprint.assignments,
            footprint.sessions,
            footprint.results
        ),
        (0, 0, 0, 0),
        "{footprint:?}"
    );
    let left = support::scan_keys(&server, "*");
    // The worker's change journal outlives the session by its TTL, a slack of wall-clock
    // time past its latest change.
    let allowed = [
        format!("{base}epoch"),
        format!("{base}keys"),
        format!("{base}snapshot-versions"),
        format!("{base}snapshot-journal:gw-1"),
    ];
    // Usage is kept on purpose past the records it counted (an hour by minute, a day by
    // hour, the totals a year): one key of each per client that extracted.
    let usage = [
        format!("{base}usage-total:c1"),
        format!("{base}usage-m:c1"),
        format!("{base}usage-h:c1"),
    ];
    assert!(
        left.iter()
            .all(|k| allowed.contains(k) || usage.contains(k)),
        "only the epoch, the key registry, the snapshot versions and journal and the usage may remain: {left:?}"
    );
}

/// A pool nobody writes to any more frees itself: every key's native TTL runs out shortly
/// after the latest logical expiry it holds (plus the configured slack). Uses the wall
/// clock, with lifetimes of a few hundred milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_pool_frees_itself() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "abandoned".to_owned(),
            key_ttl_slack_ms: 50,
            operation_ttl_ms: 300,
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    let now = proxypool_core::now_millis();
    let candidates: Vec<Candidate> = (0..20).map(candidate).collect();
    let ids: Vec<_> = (0..20)
        .map(|i| {
            let c = candidate(i);
            proxy_id_for(c.protocol, &c.host, c.port, Some(&format!("u{i}")))
        })
        .collect();
    let batch = FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: Some("last-fetch".into()),
        ttl_ms: 300,
        safety_margin_ms: 100,
        max_size: 100,
        default_max_sessions: 4,
        candidates,
    };
    pool.upsert(now, batch).await.unwrap();
    let observations = ids
        .iter()
        .map(|id| HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 1 },
        })
        .collect();
    pool.apply_health(
        now,
        HealthBatch {
            observations,
            unhealthy_after_failures: 1,
        },
    )
    .await
    .unwrap();
    let worker = WorkerId::new("gw-9").unwrap();
    let spare = pool.assignable(now, 1).await.unwrap();
    pool.assign(now, &spare[0].id, &worker, 200).await.unwrap();
    pool.open_session(now, &worker, "s", 200).await.unwrap();
    let pattern = format!("{}*", pool.keyspace());
    assert!(support::scan_keys(server, &pattern).len() > 5);

    // Nobody sweeps: the keys go by themselves once the latest expiry plus slack passed.
    let gone = tokio::task::block_in_place(|| {
        proxypool_testkit::poll_until(std::time::Duration::from_secs(5), || {
            support::scan_keys(server, &pattern)
                .is_empty()
                .then_some(())
        })
    });
    assert!(
        gone.is_some(),
        "still there: {:?}",
        support::scan_keys(server, &pattern)
    );
}
