//! The indexes and counters the scripts maintain incrementally always equal what a full
//! recomputation from the stored records and assignments gives, after a mixed workload
//! that refreshes (with changed filters), checks, extracts, assigns, drains, expires and
//! sweeps. This guards the scripts' shortcuts (indexes and counters touched only when
//! they change).

mod support;

use proxypool_core::ports::*;
use proxypool_core::{
    Candidate, CheckOutcome, ClientId, Credentials, ExtractMode, ExtractRequest, FetchedBatch,
    HealthBatch, HealthObservation, Protocol, ProxyFilter, ProxyId, UnixMillis, UpstreamId,
    WorkerId, proxy_id_for,
};
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisServer, RespValue};
use std::collections::{BTreeMap, BTreeSet};

const T0: UnixMillis = 1_700_000_000_000;

fn candidate(i: usize, round: usize) -> Candidate {
    let protocol = [Protocol::Http, Protocol::Https, Protocol::Socks5][i % 3];
    let mut c = Candidate::new(protocol, format!("i{i}.vendor.test"), 3128);
    c.credentials = Some(Credentials::new(format!("u{i}"), "pw"));
    c.max_sessions = Some(1 + ((i + round) % 3) as u32);
    // Regions and carriers move between refreshes.
    c.region = Some(["us", "de", "fr"][(i + round) % 3].into());
    if (i + round).is_multiple_of(2) {
        c.carrier = Some("att".into());
    }
    c
}

fn id(i: usize) -> ProxyId {
    let c = candidate(i, 0);
    proxy_id_for(c.protocol, &c.host, c.port, Some(&format!("u{i}")))
}

fn members(server: &RedisServer, key: &str) -> BTreeSet<String> {
    match server.command(&["ZRANGE", key, "0", "-1"]).unwrap() {
        RespValue::Array(items) => items.iter().filter_map(RespValue::as_text).collect(),
        other => panic!("{other:?}"),
    }
}

fn hash(server: &RedisServer, key: &str) -> BTreeMap<String, String> {
    match server.command(&["HGETALL", key]).unwrap() {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|kv| (kv[0].as_text().unwrap(), kv[1].as_text().unwrap()))
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// Recomputes every index and counter from `records` and `owners` and compares.
fn check(server: &RedisServer, pool: &RedisPool, when: &str) {
    let base = pool.keyspace();
    let records = hash(server, &format!("{base}records"));
    let owners = hash(server, &format!("{base}owners"));
    let mut available = BTreeSet::new();
    let mut filters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut checks = BTreeSet::new();
    let mut counters: BTreeMap<String, i64> = BTreeMap::new();
    for (id, value) in &records {
        let f: Vec<&str> = value.split('\t').collect();
        let (status, protocol, upstream, region, carrier) = (f[0], f[4], f[5], f[6], f[7]);
        if status == "A" && !owners.contains_key(id) {
            available.insert(id.clone());
            let max: i64 = f[8].parse().unwrap();
            *counters.entry(format!("{upstream}:slots")).or_default() += max;
            let mut keys = vec![
                format!("protocol:{protocol}"),
                format!("upstream:{upstream}"),
            ];
            if !region.is_empty() {
                keys.push(format!("region:{region}"));
            }
            if !carrier.is_empty() {
                keys.push(format!("carrier:{carrier}"));
            }
            for k in keys {
                filters.entry(k).or_default().insert(id.clone());
            }
        }
        if matches!(status, "F" | "S" | "A" | "U") {
            checks.insert(id.clone());
        }
        if matches!(status, "F" | "C" | "A" | "S" | "U") {
            *counters.entry(upstream.to_owned()).or_default() += 1;
        }
        *counters.entry(format!("{upstream}:{status}")).or_default() += 1;
    }
    let ids: BTreeSet<String> = records.keys().cloned().collect();
    assert_eq!(
        members(server, &format!("{base}expiry")),
        ids,
        "{when}: expiry"
    );
    assert_eq!(
        members(server, &format!("{base}checks")),
        checks,
        "{when}: checks"
    );
    assert_eq!(
        members(server, &format!("{base}available")),
        available,
        "{when}: available"
    );
    for value in ["http", "https", "socks5"] {
        filters.entry(format!("protocol:{value}")).or_default();
    }
    for value in ["us", "de", "fr"] {
        filters.entry(format!("region:{value}")).or_default();
    }
    filters.entry("carrier:att".into()).or_default();
    filters.entry("upstream:acme".into()).or_default();
    for (key, expected) in &filters {
        assert_eq!(
            &members(server, &format!("{base}{key}")),
            expected,
            "{when}: {key}"
        );
    }
    let stored: BTreeMap<String, i64> = hash(server, &format!("{base}inventory"))
        .into_iter()
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    assert_eq!(stored, counters, "{when}: inventory counters");
    let owned: BTreeSet<String> = owners.keys().cloned().collect();
    assert_eq!(
        members(server, &format!("{base}owner-expiry")),
        owned,
        "{when}: leases"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_indexes_equal_a_full_recomputation() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "inv".to_owned(),
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    );
    let upstream = UpstreamId::new("acme").unwrap();
    let worker = WorkerId::new("gw-1").unwrap();
    for round in 0..12usize {
        let now = T0 + round as u64 * 4_000;
        let first = round * 10;
        let batch = FetchedBatch {
            upstream: upstream.clone(),
            operation_id: None,
            ttl_ms: 20_000 + (round as u64 % 3) * 5_000,
            safety_margin_ms: 3_000,
            max_size: 45,
            default_max_sessions: 4,
            candidates: (first.saturating_sub(20)..first + 10)
                .map(|i| candidate(i, round))
                .collect(),
        };
        pool.upsert(now, batch).await.unwrap();
        check(server, &pool, &format!("round {round} upsert"));

        let observations = (first.saturating_sub(20)..first + 10)
            .map(|i| HealthObservation {
                proxy_id: id(i),
                checked_at_ms: now,
                outcome: if (i + round) % 4 == 0 {
                    CheckOutcome::Failure {
                        error: "refused".into(),
                    }
                } else {
                    CheckOutcome::Success { latency_ms: 5 }
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
        check(server, &pool, &format!("round {round} health"));

        let request = ExtractRequest {
            for_domain: None,
            client: ClientId::new("c1").unwrap(),
            idempotency_key: None,
            request_id: format!("r{round}"),
            count: 3,
            mode: ExtractMode::Partial,
            filter: ProxyFilter::default(),
            min_health_freshness_ms: None,
            reserve_for_gateway: 1,
            idempotency_ttl_ms: 10_000,
            key_held_ms: 0,
        };
        pool.extract(now, request).await.unwrap();
        check(server, &pool, &format!("round {round} extract"));

        for record in pool.assignable(now, 3).await.unwrap() {
            let a = pool.assign(now, &record.id, &worker, 6_000).await.unwrap();
            if round % 2 == 0 {
                pool.begin_drain(now, &record.id, &worker, a.epoch)
                    .await
                    .unwrap();
                if round % 4 == 0 {
                    pool.acknowledge_drain(now, &record.id, &worker, a.epoch, 0, 0)
                        .await
                        .unwrap();
                }
            }
        }
        check(server, &pool, &format!("round {round} ownership"));
        pool.expire(now, 2).await.unwrap();
        pool.sweep(now, 5).await.unwrap();
        check(server, &pool, &format!("round {round} expire and sweep"));
    }
}
