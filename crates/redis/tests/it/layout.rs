//! The key layout (version 2, see `src/keys.rs`) as stored: a record keeps neither its id
//! nor absolute copies of its other times and still reads back exactly; ids are 16 bytes
//! in the per-proxy keys; the candidate registry names exactly the non-empty candidate
//! indexes as proxies come and go, and a filtered extraction merges the matching indexes
//! in MemoryPool's order.

use crate::support;

use proxypool_core::ports::*;
use proxypool_core::{
    Candidate, CheckOutcome, ClientId, ExtractMode, ExtractRequest, FetchedBatch, HealthBatch,
    HealthObservation, Label, Protocol, ProxyFilter, ProxyId, UnixMillis, UpstreamId, proxy_id_for,
};
use proxypool_redis::{RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisServer, RespValue};
use std::collections::BTreeSet;

const TTL: u64 = 60_000;
const MARGIN: u64 = 3_000;

fn candidate(host: &str, region: &str, carrier: Option<&str>) -> Candidate {
    let mut c = Candidate::new(Protocol::Http, host, 3128);
    c.region = Some(region.into());
    c.carrier = carrier.map(Into::into);
    c
}

fn id_of(c: &Candidate) -> ProxyId {
    proxy_id_for(c.protocol, &c.host, c.port, None)
}

fn pool(server: &RedisServer) -> RedisPool {
    support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "layout".to_owned(),
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    )
}

/// Upserts `candidates` at `now` and checks them healthy at `now + 1`.
async fn make_available(pool: &RedisPool, now: UnixMillis, candidates: Vec<Candidate>) {
    let ids: Vec<ProxyId> = candidates.iter().map(id_of).collect();
    let batch = FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: TTL,
        safety_margin_ms: MARGIN,
        max_size: 1_000,
        default_max_sessions: 2,
        candidates,
    };
    pool.upsert(now, batch).await.unwrap();
    let observations = ids
        .into_iter()
        .map(|proxy_id| HealthObservation {
            proxy_id,
            checked_at_ms: now + 1,
            outcome: CheckOutcome::Success { latency_ms: 7 },
        })
        .collect();
    let batch = HealthBatch {
        observations,
        unhealthy_after_failures: 2,
    };
    pool.apply_health(now + 1, batch).await.unwrap();
}

fn request(name: &str, count: u32, filter: ProxyFilter) -> ExtractRequest {
    ExtractRequest {
        project: None,
        for_domain: None,
        client: ClientId::new("c1").unwrap(),
        idempotency_key: None,
        request_id: name.to_owned(),
        count,
        mode: ExtractMode::Partial,
        filter,
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 10_000,
        key_held_ms: 0,
    }
}

fn region(value: &str) -> ProxyFilter {
    ProxyFilter {
        region: Some(Label::new(value).unwrap()),
        ..ProxyFilter::default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The stored record fields of `id` (looked up by its 16 bytes).
fn stored_fields(server: &RedisServer, pool: &RedisPool, id: &ProxyId) -> Vec<String> {
    let bytes: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&id.as_str()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let key = format!("{}records", pool.keyspace());
    let reply = server
        .command(&[b"HGET".as_slice(), key.as_bytes(), &bytes[..]])
        .unwrap();
    let text = reply
        .as_text()
        .expect("the record is stored under its 16 bytes");
    text.split('\t').map(str::to_owned).collect()
}

fn binary_members(server: &RedisServer, key: &str) -> BTreeSet<String> {
    match server.command(&["ZRANGE", key, "0", "-1"]).unwrap() {
        RespValue::Array(items) => items
            .iter()
            .map(|item| match item {
                RespValue::Bulk(bytes) if bytes.len() == 16 => hex(bytes),
                other => panic!("{key}: {other:?} is not a 16-byte id"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_store_no_id_and_relative_times_yet_read_back_exactly() {
    let Some(server) = support::shared_server() else {
        return;
    };
    // A 13-digit clock (relative times) and a 16-digit one (kept absolute behind '=').
    for now in [1_700_000_000_000u64, 1_000_000_000_000_000] {
        let pool = pool(server);
        let c = candidate("p.vendor.test", "us", None);
        let id = id_of(&c);
        make_available(&pool, now, vec![c]).await;

        let stored = stored_fields(server, &pool, &id);
        assert_eq!(stored[14], "", "no id in the stored record");
        if now < 1_000_000_000_000_000 {
            assert_eq!(
                stored[2],
                MARGIN.to_string(),
                "usable_until below hard expiry"
            );
            assert_eq!(stored[13], TTL.to_string(), "fetched_at below hard expiry");
            assert_eq!(
                stored[9],
                (TTL - 1).to_string(),
                "checked_at below hard expiry"
            );
        } else {
            assert_eq!(stored[2], format!("={}", now + TTL - MARGIN));
            assert_eq!(stored[13], format!("={now}"));
        }

        let records = pool.assignable(now + 2, 10).await.unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(r.id, id);
        assert_eq!(r.fetched_at_ms, now);
        assert_eq!(r.hard_expiry_ms, now + TTL);
        assert_eq!(r.usable_until_ms, now + TTL - MARGIN);
        assert_eq!(r.health.checked_at_ms, Some(now + 1));
        assert_eq!(r.health.succeeded_at_ms, Some(now + 1));
        assert_eq!(r.health.latency_ms, Some(7));

        let base = pool.keyspace();
        assert!(base.ends_with(":{activity}:v3:"), "{base}");
        let ids = BTreeSet::from([id.to_string()]);
        assert_eq!(binary_members(server, &format!("{base}expiry")), ids);
        assert_eq!(binary_members(server, &format!("{base}checks")), ids);
        assert_eq!(
            binary_members(server, &format!("{base}cand:http/acme/us/")),
            ids
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_follows_the_candidate_indexes_and_extraction_merges_them() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = pool(server);
    let t0: UnixMillis = 1_700_000_000_000;
    // Three "us" indexes (no carrier, att, orange) and one "de", filled at different times
    // so usable_until interleaves across the indexes.
    let us_plain = candidate("a.vendor.test", "us", None);
    let us_att = candidate("b.vendor.test", "us", Some("att"));
    let de = candidate("c.vendor.test", "de", None);
    let us_orange = candidate("d.vendor.test", "us", Some("orange"));
    let us_att_late = candidate("e.vendor.test", "us", Some("att"));
    let order = [&us_plain, &us_att, &de, &us_orange, &us_att_late];
    for (i, c) in order.iter().enumerate() {
        make_available(&pool, t0 + 10 * i as u64, vec![(*c).clone()]).await;
    }
    let base = pool.keyspace();
    // Each registry member is its index's head (16 bytes) followed by the index suffix.
    let registry = |server: &RedisServer| -> BTreeSet<String> {
        let key = format!("{base}candidates");
        match server.command(&["ZRANGE", &key, "0", "-1"]).unwrap() {
            RespValue::Array(items) => items
                .iter()
                .map(|item| match item {
                    RespValue::Bulk(bytes) if bytes.len() > 16 => {
                        String::from_utf8(bytes[16..].to_vec()).unwrap()
                    }
                    other => panic!("{key}: {other:?} is not a head and a suffix"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    let all = [
        "http/acme/us/",
        "http/acme/us/att",
        "http/acme/de/",
        "http/acme/us/orange",
    ];
    assert_eq!(
        registry(server),
        all.iter().map(|s| s.to_string()).collect()
    );

    // Longest-lived first across the three "us" indexes; "de" is not touched.
    let now = t0 + 100;
    let out = pool
        .extract(now, request("us-1", 3, region("us")))
        .await
        .unwrap();
    let got: Vec<ProxyId> = out.response.proxies.iter().map(|p| p.id.clone()).collect();
    assert_eq!(
        got,
        vec![id_of(&us_att_late), id_of(&us_orange), id_of(&us_att)]
    );
    // The emptied indexes left the registry, and their keys are gone.
    assert_eq!(
        registry(server),
        ["http/acme/us/", "http/acme/de/"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let heads = server
        .command(&["HLEN", &format!("{base}candidate-heads")])
        .unwrap();
    assert_eq!(heads, RespValue::Integer(2));
    for gone in ["http/acme/us/att", "http/acme/us/orange"] {
        let exists = server
            .command(&["EXISTS", &format!("{base}cand:{gone}")])
            .unwrap();
        assert_eq!(exists, RespValue::Integer(0), "{gone}");
    }

    // A filter no index matches finds nothing; an unfiltered one takes the rest in order.
    let none = pool
        .extract(now, request("fr", 1, region("fr")))
        .await
        .unwrap();
    assert_eq!(none.response.returned, 0);
    let rest = pool
        .extract(now, request("any", 5, ProxyFilter::default()))
        .await
        .unwrap();
    let got: Vec<ProxyId> = rest.response.proxies.iter().map(|p| p.id.clone()).collect();
    assert_eq!(got, vec![id_of(&de), id_of(&us_plain)]);
    assert!(registry(server).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_usable_until_across_indexes_is_decided_by_id() {
    let Some(server) = support::shared_server() else {
        return;
    };
    let pool = pool(server);
    let t0: UnixMillis = 1_700_000_000_000;
    // One batch: every proxy has the same usable_until, spread over four indexes.
    let regions = ["us", "de", "fr", "gb"];
    let candidates: Vec<Candidate> = (0..12)
        .map(|i| {
            let carrier = (i % 3 == 0).then_some("att");
            candidate(&format!("t{i}.vendor.test"), regions[i % 4], carrier)
        })
        .collect();
    let mut expected: Vec<ProxyId> = candidates.iter().map(id_of).collect();
    expected.sort();
    expected.reverse();
    make_available(&pool, t0, candidates).await;

    // One at a time (each call starts from the registry's heads), then the rest at once.
    let mut got = Vec::new();
    for n in 0..5 {
        let one = pool
            .extract(
                t0 + 10,
                request(&format!("one-{n}"), 1, ProxyFilter::default()),
            )
            .await
            .unwrap();
        got.extend(one.response.proxies.iter().map(|p| p.id.clone()));
    }
    let rest = pool
        .extract(t0 + 10, request("rest", 20, ProxyFilter::default()))
        .await
        .unwrap();
    got.extend(rest.response.proxies.iter().map(|p| p.id.clone()));
    assert_eq!(got, expected);
}
