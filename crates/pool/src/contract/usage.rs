//! Contract: usage accounting (`UsageReader`, and the accounting inside report_runtime and
//! extract): cumulative gateway totals become exact deltas, nothing is counted twice or
//! from a refused report, extractions count per upstream, buckets age out.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::usage::{
    ClientUsage, GatewayCounters, GatewayUsage, GatewayUsageEntry, HOUR_MS, MINUTE_MS, UsageAmounts,
};
use proxypool_core::{
    ActivityPool, Conflict, ExtractMode, PoolError, ReportOutcome, RuntimeReport, SnapshotRef,
    UnixMillis, WorkerId,
};

const SESSION_TTL: u64 = 15_000;
const REPORT_TTL: u64 = 10_000;

fn snap() -> SnapshotRef {
    SnapshotRef {
        version: 1,
        epoch: 0,
        checksum: "sum-usage".into(),
    }
}

async fn ready<P: ActivityPool>(pool: &P, now: UnixMillis, worker: &WorkerId, session: &str) {
    pool.open_session(now, worker, session, SESSION_TTL)
        .await
        .unwrap();
    pool.issue_snapshot(now, worker, session, snap())
        .await
        .unwrap();
    pool.ack_snapshot(now, worker, session, snap())
        .await
        .unwrap();
}

fn counters(requests: u64, failures: u64, bytes_up: u64, bytes_down: u64) -> GatewayCounters {
    GatewayCounters {
        requests,
        failures,
        bytes_up,
        bytes_down,
    }
}

fn report(
    worker: &WorkerId,
    session: &str,
    sequence: u64,
    instance: &str,
    entries: &[(&str, &str, GatewayCounters)],
) -> RuntimeReport {
    RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        worker: worker.clone(),
        session_id: session.into(),
        sequence,
        snapshot: snap(),
        entries: vec![],
        usage: Some(GatewayUsage {
            instance: instance.into(),
            entries: entries
                .iter()
                .map(|(c, u, counters)| GatewayUsageEntry {
                    client: client(c),
                    upstream: upstream(u),
                    counters: *counters,
                })
                .collect(),
        }),
    }
}

async fn usage_of<P: ActivityPool>(pool: &P, now: UnixMillis, name: &str) -> ClientUsage {
    let mut all = pool.usage(now, &[client(name)]).await.unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

/// The totals of `name` per upstream, as (upstream, amounts).
async fn totals<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    name: &str,
) -> Vec<(String, UsageAmounts)> {
    usage_of(pool, now, name)
        .await
        .totals
        .into_iter()
        .map(|u| (u.upstream.to_string(), u.amounts))
        .collect()
}

fn gateway(requests: u64, failures: u64, bytes_up: u64, bytes_down: u64) -> UsageAmounts {
    UsageAmounts {
        requests,
        failures,
        bytes_up,
        bytes_down,
        extracted: 0,
    }
}

/// Cumulative totals in successive reports are counted once: the first report's totals,
/// then only what grew; a replayed report, a refused one and the same totals again add
/// nothing; a new session of the same process continues; another process starts afresh.
pub async fn usage_counts_cumulative_totals_once<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w = worker("gw-u");
    ready(&pool, T0, &w, "s1").await;
    let first = report(
        &w,
        "s1",
        1,
        "inst1",
        &[("alice", "acme", counters(3, 1, 100, 900))],
    );
    assert_eq!(
        pool.report_runtime(T0 + 1, first.clone(), REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Accepted
    );
    assert_eq!(
        pool.report_runtime(T0 + 2, first, REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Replayed
    );
    let expected = vec![("acme".to_owned(), gateway(3, 1, 100, 900))];
    assert_eq!(totals(&pool, T0 + 2, "alice").await, expected);

    // A stale sequence is refused and counts nothing, even with larger totals.
    let stale = report(
        &w,
        "s1",
        1,
        "inst1",
        &[("alice", "acme", counters(50, 1, 100, 900))],
    );
    assert_eq!(
        pool.report_runtime(T0 + 3, stale, REPORT_TTL)
            .await
            .unwrap_err(),
        PoolError::Conflict(Conflict::Sequence)
    );
    let same = report(
        &w,
        "s1",
        2,
        "inst1",
        &[("alice", "acme", counters(3, 1, 100, 900))],
    );
    pool.report_runtime(T0 + 4, same, REPORT_TTL).await.unwrap();
    assert_eq!(totals(&pool, T0 + 4, "alice").await, expected);

    let grown = report(
        &w,
        "s1",
        3,
        "inst1",
        &[
            ("alice", "acme", counters(5, 1, 150, 1000)),
            ("alice", "globex", counters(1, 0, 10, 20)),
        ],
    );
    pool.report_runtime(T0 + 5, grown, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(
        totals(&pool, T0 + 5, "alice").await,
        vec![
            ("acme".to_owned(), gateway(5, 1, 150, 1000)),
            ("globex".to_owned(), gateway(1, 0, 10, 20)),
        ]
    );

    // A new session of the same process: its totals go on from where they were.
    ready(&pool, T0 + 6, &w, "s2").await;
    let next = report(
        &w,
        "s2",
        4,
        "inst1",
        &[("alice", "acme", counters(6, 1, 160, 1000))],
    );
    pool.report_runtime(T0 + 7, next, REPORT_TTL).await.unwrap();
    // A restarted process (another instance) counts from zero: all of it is new.
    let restarted = report(
        &w,
        "s2",
        5,
        "inst2",
        &[("alice", "acme", counters(2, 0, 5, 5))],
    );
    pool.report_runtime(T0 + 8, restarted, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(
        totals(&pool, T0 + 8, "alice").await[0],
        ("acme".to_owned(), gateway(8, 1, 165, 1005))
    );

    // Another worker's usage adds up; another client's stays its own.
    let other = worker("gw-v");
    ready(&pool, T0 + 9, &other, "s-v").await;
    let theirs = report(
        &other,
        "s-v",
        1,
        "inst9",
        &[
            ("alice", "acme", counters(2, 0, 1, 1)),
            ("bob", "acme", counters(7, 0, 0, 0)),
        ],
    );
    pool.report_runtime(T0 + 10, theirs, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(
        totals(&pool, T0 + 10, "alice").await[0],
        ("acme".to_owned(), gateway(10, 1, 166, 1006))
    );
    assert_eq!(
        totals(&pool, T0 + 10, "bob").await,
        vec![("acme".to_owned(), gateway(7, 0, 0, 0))]
    );
    assert!(usage_of(&pool, T0 + 10, "carol").await.totals.is_empty());
}

/// Each proxy an extraction hands out counts one `extracted` for its (client, upstream);
/// a replay counts nothing.
pub async fn usage_counts_extracted_proxies_per_upstream<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 2).await;
    seed_range(&pool, T0, "globex", 10, 1).await;
    let mut request = extract_request("alice", 3, ExtractMode::Partial);
    request.idempotency_key = Some("usage-1".into());
    let out = pool.extract(T0 + 1, request.clone()).await.unwrap();
    assert_eq!(out.response.returned, 3);
    assert!(pool.extract(T0 + 2, request).await.unwrap().replayed);
    let extracted: Vec<(String, u64)> = totals(&pool, T0 + 2, "alice")
        .await
        .into_iter()
        .map(|(upstream, amounts)| (upstream, amounts.extracted))
        .collect();
    assert_eq!(
        extracted,
        vec![("acme".to_owned(), 2), ("globex".to_owned(), 1)]
    );
}

/// Usage lands in the current minute and hour; a minute bucket is kept for an hour, an
/// hour bucket for a day, the totals for good.
pub async fn usage_buckets_age_out_and_totals_stay<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w = worker("gw-b");
    // T0 is not aligned to a minute; start at the beginning of the next hour.
    let start = (T0 / HOUR_MS + 1) * HOUR_MS;
    ready(&pool, start, &w, "s1").await;
    let r = report(
        &w,
        "s1",
        1,
        "inst1",
        &[("alice", "acme", counters(4, 0, 40, 400))],
    );
    pool.report_runtime(start + 1, r, REPORT_TTL).await.unwrap();
    let now = usage_of(&pool, start + 2, "alice").await;
    assert_eq!(now.minutes.len(), 1);
    assert_eq!(now.minutes[0].start_ms, start);
    assert_eq!(now.minutes[0].upstreams[0].amounts, gateway(4, 0, 40, 400));
    assert_eq!(now.hours.len(), 1);
    assert_eq!(now.hours[0].start_ms, start);

    // Ten minutes later, more usage: two minute buckets, one hour bucket.
    let later = start + 10 * MINUTE_MS;
    ready(&pool, later, &w, "s2").await;
    let r = report(
        &w,
        "s2",
        2,
        "inst1",
        &[("alice", "acme", counters(5, 0, 50, 500))],
    );
    pool.report_runtime(later + 1, r, REPORT_TTL).await.unwrap();
    let seen = usage_of(&pool, later + 2, "alice").await;
    let minutes: Vec<(u64, u64)> = seen
        .minutes
        .iter()
        .map(|b| (b.start_ms, b.upstreams[0].amounts.requests))
        .collect();
    assert_eq!(minutes, vec![(start, 4), (later, 1)]);
    assert_eq!(seen.hours[0].upstreams[0].amounts.requests, 5);

    // An hour on, the first minute is gone; a day on, every bucket; the totals remain.
    let hour_on = usage_of(&pool, start + 60 * MINUTE_MS + 1, "alice").await;
    assert_eq!(
        hour_on
            .minutes
            .iter()
            .map(|b| b.start_ms)
            .collect::<Vec<_>>(),
        vec![later]
    );
    assert_eq!(hour_on.hours.len(), 1);
    let day_on = usage_of(&pool, start + 24 * HOUR_MS + 1, "alice").await;
    assert!(
        day_on.minutes.is_empty() && day_on.hours.is_empty(),
        "{day_on:?}"
    );
    assert_eq!(day_on.totals[0].amounts, gateway(5, 0, 50, 500));
}

/// Invalid usage in a report refuses the whole report and counts nothing.
pub async fn usage_invalid_report_counts_nothing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w = worker("gw-i");
    ready(&pool, T0, &w, "s1").await;
    let bad = report(
        &w,
        "s1",
        1,
        "inst 1",
        &[("alice", "acme", counters(1, 0, 0, 0))],
    );
    assert!(matches!(
        pool.report_runtime(T0 + 1, bad, REPORT_TTL).await,
        Err(PoolError::InvalidInput(_))
    ));
    let more_failures = report(
        &w,
        "s1",
        1,
        "inst1",
        &[("alice", "acme", counters(1, 2, 0, 0))],
    );
    assert!(matches!(
        pool.report_runtime(T0 + 1, more_failures, REPORT_TTL).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert!(usage_of(&pool, T0 + 2, "alice").await.totals.is_empty());
}
