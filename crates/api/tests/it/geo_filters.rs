//! The geo filters of an extraction over HTTP: `country` as the region's other name (and
//! authorized as the region), `city`, `state` and `asn` matched whatever the case and
//! separators, the extracted proxies showing their labels, and bad values refused as input
//! errors: 400 naming the field, nothing charged, nothing extracted, the key left free.
//! Each test runs on the memory and the SQLite quota.

use crate::common::*;
use proxypool_core::{
    Candidate, CheckOutcome, FetchedBatch, HealthBatch, HealthObservation, Protocol, now_millis,
    proxy_id_for,
};
use proxypool_quota::Operation;
use serde_json::{Value, json};
use std::collections::BTreeSet;

on_memory_and_sqlite!(
    country_is_the_region_under_another_name,
    city_state_and_asn_select_whatever_the_spelling,
    a_bad_geo_value_is_refused_before_any_charge,
);

/// Seeds into `acme`, healthy: two proxies in New York (spelt two ways), one in Los
/// Angeles, one with no geo labels; regions `us`.
async fn seed_places(server: &TestServer) {
    let located = |host: &str, labels: &[(&str, &str)]| {
        let mut c = Candidate::new(Protocol::Http, host, 8080);
        c.region = Some("us".into());
        for (key, value) in labels {
            c.labels.insert((*key).into(), (*value).into());
        }
        c
    };
    let candidates = vec![
        located(
            "ny1.vendor.test",
            &[("city", "New York"), ("state", "NY"), ("asn", "AS7922")],
        ),
        located(
            "ny2.vendor.test",
            &[("city", "new+york"), ("state", "ny"), ("asn", "701")],
        ),
        located(
            "la.vendor.test",
            &[("city", "Los Angeles"), ("state", "CA"), ("asn", "7922")],
        ),
        located("plain.vendor.test", &[]),
    ];
    let now = now_millis();
    let observations = candidates
        .iter()
        .map(|c| HealthObservation {
            proxy_id: proxy_id_for(c.protocol, &c.host, c.port, None),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 20 },
        })
        .collect();
    let batch = FetchedBatch {
        upstream: upstream("acme"),
        operation_id: None,
        ttl_ms: 600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000,
        default_max_sessions: 4,
        candidates,
    };
    assert_eq!(server.pool.upsert(now, batch).await.unwrap().inserted, 4);
    let health = HealthBatch {
        observations,
        unhealthy_after_failures: 3,
    };
    assert_eq!(
        server.pool.apply_health(now, health).await.unwrap().applied,
        4
    );
}

fn hosts(extraction: &Value) -> BTreeSet<String> {
    extraction["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap().to_owned())
        .collect()
}

async fn extracted(server: &TestServer) -> u32 {
    server
        .quota
        .consumed("p-alice", "alice", Operation::Extract)
        .await
}

async fn country_is_the_region_under_another_name(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 6).await; // regions us, de, us, de, us, de
    let de = server
        .extract(
            ALICE,
            None,
            &json!({"count": 10, "filters": {"country": "DE"}}),
        )
        .await;
    assert_eq!(de.status, 200, "{}", de.text());
    let de = de.json();
    assert_eq!(de["returned"], 3);
    assert!(
        de["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["region"] == "de")
    );

    // Both names at once: which one was meant? Refused, costing nothing.
    let both = json!({"count": 1, "filters": {"region": "us", "country": "us"}});
    let message = server
        .extract(ALICE, Some("both"), &both)
        .await
        .assert_error(400, "invalid_request");
    assert!(
        message.starts_with("filters: ")
            && message.contains("country")
            && message.contains("region"),
        "{message}"
    );
    assert_eq!(
        extracted(&server).await,
        1,
        "only the first request is charged"
    );
    assert_eq!(server.unextracted("acme").await, 3);

    // A client held to region us may name it either way, and no other.
    server
        .extract(
            NARROW,
            None,
            &json!({"count": 1, "filters": {"country": "de"}}),
        )
        .await
        .assert_error(403, "forbidden");
    let us = server
        .extract(
            NARROW,
            None,
            &json!({"count": 1, "filters": {"country": "us"}}),
        )
        .await;
    assert_eq!(us.status, 200, "{}", us.text());
    assert_eq!(us.json()["proxies"][0]["region"], "us");
}

async fn city_state_and_asn_select_whatever_the_spelling(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    seed_places(&server).await;
    let probe = async |filters: Value| {
        // All-or-nothing with an impossible count: a read-only look at what matches.
        let body = json!({"count": 50, "mode": "all_or_nothing", "filters": filters});
        let reply = server.extract(ALICE, None, &body).await;
        reply.assert_error(409, "insufficient_inventory")
    };
    for (filters, matching) in [
        (json!({"city": "NEW YORK"}), 2),
        (json!({"city": "new-york", "asn": "AS7922"}), 1),
        (json!({"state": "ca"}), 1),
        (json!({"asn": "7922"}), 2),
        (json!({"country": "us", "city": "Boston"}), 0),
    ] {
        let message = probe(filters.clone()).await;
        assert!(
            message.contains(&format!("only {matching} matching")),
            "{filters}: {message}"
        );
    }

    let reply = server
        .extract(
            ALICE,
            None,
            &json!({"count": 5, "filters": {"country": "US", "city": "New_York"}}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let extraction = reply.json();
    assert_eq!(
        hosts(&extraction),
        BTreeSet::from(["ny1.vendor.test".to_owned(), "ny2.vendor.test".to_owned()])
    );
    for proxy in extraction["proxies"].as_array().unwrap() {
        assert_eq!(proxy["city"], "new_york", "{proxy}");
        assert_eq!(proxy["state"], "ny", "{proxy}");
    }
    let asns: BTreeSet<&str> = extraction["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["asn"].as_str().unwrap())
        .collect();
    assert_eq!(asns, BTreeSet::from(["701", "7922"]));

    // A proxy without geo labels shows them as null.
    let plain = server
        .extract(
            ALICE,
            None,
            &json!({"count": 5, "filters": {"region": "us"}}),
        )
        .await
        .json();
    assert_eq!(hosts(&plain).len(), 2);
    let unlabelled = plain["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == "plain.vendor.test")
        .expect("the unlabelled proxy");
    assert!(unlabelled["city"].is_null() && unlabelled["asn"].is_null());
}

async fn a_bad_geo_value_is_refused_before_any_charge(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    seed_places(&server).await;
    let long = "a".repeat(65);
    for (field, value) in [
        ("city", json!("new;york")),
        ("city", json!("")),
        ("city", json!(long)),
        ("city", json!("new\tyork")),
        ("state", json!("  -_ ")),
        ("asn", json!("AS-7922")),
        ("asn", json!("4294967296")),
        ("asn", json!(7922)),
    ] {
        let body = json!({"count": 1, "filters": {field: value}});
        let message = server
            .extract(ALICE, Some("geo-key"), &body)
            .await
            .assert_error(400, "invalid_request");
        assert!(
            message.starts_with(&format!("filters.{field}: ")),
            "{body}: {message}"
        );
    }
    assert_eq!(extracted(&server).await, 0, "input errors cost nothing");
    assert_eq!(server.unextracted("acme").await, 4);

    // Nothing was stored for the key: it still buys the extraction it names, and another
    // place under it is a conflict.
    let good = json!({"count": 1, "filters": {"city": "Los Angeles"}});
    let reply = server.extract(ALICE, Some("geo-key"), &good).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("idempotent-replayed"), Some("false"));
    assert_eq!(
        hosts(&reply.json()),
        BTreeSet::from(["la.vendor.test".to_owned()])
    );
    let same_place = json!({"count": 1, "filters": {"city": "LOS-ANGELES"}});
    let replay = server.extract(ALICE, Some("geo-key"), &same_place).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    let elsewhere = json!({"count": 1, "filters": {"city": "New York"}});
    server
        .extract(ALICE, Some("geo-key"), &elsewhere)
        .await
        .assert_error(409, "idempotency_conflict");
    assert_eq!(server.unextracted("acme").await, 3);
}
