//! Contract: extraction by the geo labels (`city`, `state`, `asn`) and by `country`, the
//! region's other name. Filters are written as a client writes them (JSON, any case, any
//! separator), so every store is shown to compare the one canonical form; no store indexes
//! the geo labels, so skipping proxies that lack them spends the scan budget.

use super::factory::{PoolFactory, ScanLimits};
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    Candidate, Conflict, ExtractMode, PoolError, Protocol, ProxyFilter, Unavailable,
};
use serde_json::json;
use std::collections::BTreeSet;

/// A filter as a client's JSON writes it.
fn filter(value: serde_json::Value) -> ProxyFilter {
    serde_json::from_value(value).unwrap()
}

/// A proxy at `host` in `region` with the labels as a vendor wrote them.
fn located(host: &str, region: &str, labels: &[(&str, &str)]) -> Candidate {
    let mut c = Candidate::new(Protocol::Http, host, 8080);
    c.region = Some(region.into());
    for (key, value) in labels {
        c.labels.insert((*key).into(), (*value).into());
    }
    c
}

/// Five proxies: two in New York written two ways, one in Los Angeles, one in Berlin, one
/// with no geo labels.
fn places() -> Vec<Candidate> {
    vec![
        located(
            "ny1.vendor.test",
            "us",
            &[("city", "New York"), ("state", "NY"), ("asn", "AS7922")],
        ),
        located(
            "ny2.vendor.test",
            "us",
            &[("city", "new_york"), ("state", "ny"), ("asn", "701")],
        ),
        located(
            "la.vendor.test",
            "us",
            &[("city", "Los-Angeles"), ("state", "CA"), ("asn", "7922")],
        ),
        located(
            "ber.vendor.test",
            "de",
            &[("city", "Berlin"), ("asn", "AS3320")],
        ),
        located("plain.vendor.test", "us", &[]),
    ]
}

pub async fn extract_filters_by_city_state_asn_and_country<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut candidates = places();
    // Its lower case carries a combining mark, which the canonical form drops.
    candidates.push(located("ist.vendor.test", "tr", &[("city", "İSTANBUL")]));
    seed_available(&pool, T0, "acme", candidates).await;

    let cases = [
        (json!({"city": "NEW YORK"}), vec!["ny1", "ny2"]),
        (json!({"city": "new-york", "asn": "7922"}), vec!["ny1"]),
        (json!({"state": "ca"}), vec!["la"]),
        (json!({"asn": "AS7922"}), vec!["la", "ny1"]),
        (json!({"city": "los angeles", "state": "NY"}), vec![]),
        (json!({"country": "DE"}), vec!["ber"]),
        (json!({"country": "us", "city": "Berlin"}), vec![]),
        (json!({"region": "us", "state": "ny"}), vec!["ny1", "ny2"]),
        (json!({"city": "Boston"}), vec![]),
        (json!({"city": "İstanbul"}), vec!["ist"]),
        (json!({"city": "Istanbul"}), vec!["ist"]),
    ];
    for (written, expected) in cases {
        // All-or-nothing with an impossible count is a read-only probe of what matches.
        let mut probe = extract_request("c1", 100, ExtractMode::AllOrNothing);
        probe.filter = filter(written.clone());
        let err = pool.extract(T0 + 1, probe).await.unwrap_err();
        assert_eq!(
            err,
            PoolError::InsufficientInventory {
                requested: 100,
                matching: expected.len() as u32
            },
            "{written}"
        );
    }

    let mut request = extract_request("c1", 10, ExtractMode::Partial);
    request.filter = filter(json!({"country": "US", "city": "New York"}));
    let out = pool.extract(T0 + 1, request).await.unwrap();
    // Each proxy as (host, city, state, asn).
    let got: BTreeSet<[Option<&str>; 4]> = out
        .response
        .proxies
        .iter()
        .map(|p| {
            [
                Some(p.host.as_str()),
                p.city.as_deref(),
                p.state.as_deref(),
                p.asn.as_deref(),
            ]
        })
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([
            [
                Some("ny1.vendor.test"),
                Some("new_york"),
                Some("ny"),
                Some("7922")
            ],
            [
                Some("ny2.vendor.test"),
                Some("new_york"),
                Some("ny"),
                Some("701")
            ],
        ]),
        "the extracted proxies show their labels as stored"
    );
    assert_eq!(
        pool.inventory(T0 + 1, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        4
    );
}

/// The geo labels are checked on each candidate examined: skipping proxies that lack them
/// spends the scan budget like any other filter, and a scan that runs out before it can
/// decide is unavailable (never "none found"), with nothing handed out, even what it had
/// already found.
pub async fn extract_geo_filter_over_scan_budget_is_unavailable<F: PoolFactory>(factory: &F) {
    let limits = ScanLimits {
        extract_scan_budget: 8,
        ..ScanLimits::default()
    };
    let pool = fresh_pool!(factory, limits);
    let paris = |i: usize| located(&format!("par{i}.vendor.test"), "fr", &[("city", "Paris")]);
    seed_available(&pool, T0, "acme", (0..5).map(paris).collect()).await;
    // Seeded later, so it lives longest: the first candidate of every scan.
    let berlin = located("ber.vendor.test", "de", &[("city", "Berlin")]);
    seed_available(&pool, T0 + 1_000, "acme", vec![berlin]).await;

    // Six candidates in all, within the budget: decided.
    let mut request = extract_request("c1", 2, ExtractMode::Partial);
    request.filter = filter(json!({"city": "berlin"}));
    let out = pool.extract(T0 + 1_001, request).await.unwrap();
    assert_eq!(out.response.returned, 1);
    assert_eq!(out.response.proxies[0].host, "ber.vendor.test");

    seed_available(&pool, T0 + 2_000, "acme", (5..25).map(paris).collect()).await;
    let seeded_last = located("ber2.vendor.test", "de", &[("city", "Berlin")]);
    seed_available(&pool, T0 + 3_000, "acme", vec![seeded_last]).await;
    let unextracted = async || {
        pool.inventory(T0 + 3_001, &upstream("acme"))
            .await
            .unwrap()
            .unextracted
    };
    assert_eq!(unextracted().await, 26);
    for (written, count) in [(json!({"city": "Lyon"}), 1), (json!({"city": "Berlin"}), 2)] {
        let mut request = extract_request("c1", count, ExtractMode::Partial);
        request.filter = filter(written.clone());
        let err = pool.extract(T0 + 3_001, request).await.unwrap_err();
        assert_eq!(
            err,
            PoolError::Unavailable(Unavailable::ScanBudget),
            "{written}: never reported as empty, nor cut short"
        );
    }
    assert_eq!(unextracted().await, 26, "nothing handed out");
}

/// The geo filters are part of what a key stands for: the same place written another way
/// replays, another place conflicts.
pub async fn extract_geo_filters_are_part_of_the_request_identity<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_available(&pool, T0, "acme", places()).await;
    let mut request = extract_request("c1", 1, ExtractMode::Partial);
    request.idempotency_key = Some("order-geo".into());
    request.filter = filter(json!({"city": "New York"}));
    let first = pool.extract(T0 + 1, request.clone()).await.unwrap();
    assert_eq!(first.response.returned, 1);

    let mut same = request.clone();
    same.request_id = "another-request-id".into();
    same.filter = filter(json!({"city": "new-york"}));
    let replay = pool.extract(T0 + 2, same).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.response, first.response);

    for written in [
        json!({"city": "Los Angeles"}),
        json!({"city": "New York", "state": "NY"}),
        json!({"city": "New York", "asn": "7922"}),
    ] {
        let mut other = request.clone();
        other.filter = filter(written.clone());
        let err = pool.extract(T0 + 3, other).await.unwrap_err();
        assert_eq!(
            err,
            PoolError::Conflict(Conflict::IdempotencyDigest),
            "{written}"
        );
    }
    assert_eq!(
        pool.inventory(T0 + 3, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        4
    );
}

/// A geo filter built in code in another form than the canonical one is refused by every
/// store, which changes nothing.
pub async fn extract_rejects_geo_filter_not_canonical<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_available(&pool, T0, "acme", places()).await;
    for (city, state, asn) in [
        (Some("New York"), None, None),
        (None, Some("n y"), None),
        (None, None, Some("AS7922")),
        (Some(""), None, None),
    ] {
        let mut request = extract_request("c1", 1, ExtractMode::Partial);
        request.idempotency_key = Some("bad-geo".into());
        request.filter.geo.city = city.map(str::to_owned);
        request.filter.geo.state = state.map(str::to_owned);
        request.filter.geo.asn = asn.map(str::to_owned);
        let err = pool.extract(T0 + 1, request).await.unwrap_err();
        assert!(
            matches!(&err, PoolError::InvalidInput(m) if m.starts_with("filters.")),
            "{err}"
        );
    }
    assert_eq!(
        pool.inventory(T0 + 1, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        5
    );
    assert_eq!(
        pool.footprint().await.unwrap().results,
        0,
        "nothing stored for a bad request"
    );
}
