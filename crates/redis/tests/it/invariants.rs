//! The indexes and counters the scripts maintain incrementally always equal what a full
//! recomputation from the stored records and assignments gives, after a mixed workload
//! that refreshes (with changed filters), checks, extracts, assigns, drains, expires and
//! sweeps. This guards the scripts' shortcuts (indexes and counters touched only when
//! they change).

use crate::support;

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Members of a sorted set keyed by binary proxy id, as hex ids with their scores.
fn scored_ids(server: &RedisServer, key: &str) -> BTreeMap<String, f64> {
    match server
        .command(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
        .unwrap()
    {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|pair| match (&pair[0], pair[1].as_text()) {
                (RespValue::Bulk(id), Some(score)) => (hex(id), score.parse().unwrap()),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn ids(server: &RedisServer, key: &str) -> BTreeSet<String> {
    scored_ids(server, key).into_keys().collect()
}

/// Members of a sorted set of text members, with their scores.
fn scored_texts(server: &RedisServer, key: &str) -> BTreeMap<String, f64> {
    match server
        .command(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
        .unwrap()
    {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|pair| {
                (
                    pair[0].as_text().unwrap(),
                    pair[1].as_text().unwrap().parse().unwrap(),
                )
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// The candidate registry: suffix -> (head id in hex, score), from members that are the
/// head's 16 bytes followed by the suffix.
fn registry(server: &RedisServer, key: &str) -> BTreeMap<String, (String, f64)> {
    match server
        .command(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
        .unwrap()
    {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|pair| match &pair[0] {
                RespValue::Bulk(member) if member.len() > 16 => (
                    String::from_utf8(member[16..].to_vec()).unwrap(),
                    (
                        hex(&member[..16]),
                        pair[1].as_text().unwrap().parse().unwrap(),
                    ),
                ),
                other => panic!("{key}: {other:?} is not a head and a suffix"),
            })
            .collect(),
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

/// A hash whose values are binary proxy ids, with hex ids.
fn binary_hash(server: &RedisServer, key: &str) -> BTreeMap<String, String> {
    match server.command(&["HGETALL", key]).unwrap() {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|kv| match &kv[1] {
                RespValue::Bulk(id) => (kv[0].as_text().unwrap(), hex(id)),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// A hash keyed by binary proxy id, with hex ids.
fn records(server: &RedisServer, key: &str) -> BTreeMap<String, String> {
    match server.command(&["HGETALL", key]).unwrap() {
        RespValue::Array(items) => items
            .chunks(2)
            .map(|kv| match &kv[0] {
                RespValue::Bulk(id) => (hex(id), kv[1].as_text().unwrap()),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// Recomputes every index and counter from `records` and `owners` and compares.
fn check(server: &RedisServer, pool: &RedisPool, when: &str) {
    let base = pool.keyspace();
    let records = records(server, &format!("{base}records"));
    let owners = hash(server, &format!("{base}owners"));
    let mut candidates: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut checks = BTreeSet::new();
    let mut counters: BTreeMap<String, i64> = BTreeMap::new();
    for (id, value) in &records {
        let f: Vec<&str> = value.split('\t').collect();
        let (status, protocol, upstream, region, carrier) = (f[0], f[4], f[5], f[6], f[7]);
        assert_eq!(
            f[14], "",
            "{when}: a stored record leaves its id field empty"
        );
        if status == "A" && !owners.contains_key(id) {
            let max: i64 = f[8].parse().unwrap();
            *counters.entry(format!("{upstream}:slots")).or_default() += max;
            candidates
                .entry(format!("{protocol}/{upstream}/{region}/{carrier}"))
                .or_default()
                .insert(id.clone());
        }
        if matches!(status, "F" | "S" | "A" | "U") {
            checks.insert(id.clone());
        }
        if matches!(status, "F" | "C" | "A" | "S" | "U") {
            *counters.entry(upstream.to_owned()).or_default() += 1;
        }
        *counters.entry(format!("{upstream}:{status}")).or_default() += 1;
    }
    let all: BTreeSet<String> = records.keys().cloned().collect();
    assert_eq!(ids(server, &format!("{base}expiry")), all, "{when}: expiry");
    assert_eq!(
        ids(server, &format!("{base}checks")),
        checks,
        "{when}: checks"
    );
    // The registry names exactly the non-empty candidate indexes, each by its highest
    // member (ties by id, as the index orders) with that member's score, and the heads
    // hash names the same member.
    let registry = registry(server, &format!("{base}candidates"));
    let heads = binary_hash(server, &format!("{base}candidate-heads"));
    assert_eq!(
        heads.keys().cloned().collect::<BTreeSet<_>>(),
        candidates.keys().cloned().collect::<BTreeSet<_>>(),
        "{when}: candidate heads"
    );
    assert_eq!(
        registry.keys().cloned().collect::<BTreeSet<_>>(),
        candidates.keys().cloned().collect::<BTreeSet<_>>(),
        "{when}: candidate registry"
    );
    for (suffix, expected) in &candidates {
        let members = scored_ids(server, &format!("{base}cand:{suffix}"));
        assert_eq!(
            &members.keys().cloned().collect::<BTreeSet<_>>(),
            expected,
            "{when}: cand:{suffix}"
        );
        let head = members
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
            .unwrap();
        assert_eq!(registry[suffix].1, *head.1, "{when}: score of {suffix}");
        assert_eq!(
            &registry[suffix].0, head.0,
            "{when}: registry head of {suffix}"
        );
        assert_eq!(&heads[suffix], head.0, "{when}: head of {suffix}");
    }
    let stored: BTreeMap<String, i64> = hash(server, &format!("{base}inventory"))
        .into_iter()
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    assert_eq!(stored, counters, "{when}: inventory counters");
    let owned: BTreeSet<String> = owners.keys().cloned().collect();
    assert_eq!(
        scored_texts(server, &format!("{base}owner-expiry"))
            .into_keys()
            .collect::<BTreeSet<_>>(),
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
            project: None,
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
