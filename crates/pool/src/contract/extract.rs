//! Contract: Extractor (exclusivity, filters, reserve, idempotency, budgets).

use super::factory::{PoolFactory, ScanLimits};
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    Candidate, Conflict, ExtractMode, Label, PoolError, Protocol, ProxyFilter, ProxyId,
    ProxyStatus, Unavailable,
};
use std::collections::HashSet;
use std::sync::Arc;

pub async fn extract_partial_returns_what_exists<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 3).await;
    let out = pool
        .extract(T0 + 1, extract_request("c1", 5, ExtractMode::Partial))
        .await
        .unwrap();
    assert!(!out.replayed);
    assert_eq!((out.response.requested, out.response.returned), (5, 3));
    let got: HashSet<ProxyId> = out.response.proxies.iter().map(|p| p.id.clone()).collect();
    assert_eq!(got, ids.into_iter().collect());
    let proxy = &out.response.proxies[0];
    assert!(
        proxy.password.is_some() && proxy.username.is_some(),
        "credentials are handed out"
    );
    let inventory = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    assert_eq!(inventory.unextracted, 0);
    assert_eq!(inventory.by_status.get(&ProxyStatus::Extracted), Some(&3));
}

pub async fn extract_all_or_nothing_changes_nothing_on_shortfall<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 3).await;
    let before = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    let err = pool
        .extract(T0 + 1, extract_request("c1", 4, ExtractMode::AllOrNothing))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        PoolError::InsufficientInventory {
            requested: 4,
            matching: 3
        }
    );
    assert_eq!(
        pool.inventory(T0 + 1, &upstream("acme")).await.unwrap(),
        before
    );
    let out = pool
        .extract(T0 + 1, extract_request("c1", 3, ExtractMode::AllOrNothing))
        .await
        .unwrap();
    assert_eq!(out.response.returned, 3);
}

pub async fn extract_applies_each_filter<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut socks_de = Candidate::new(Protocol::Socks5, "de.vendor.test", 1080);
    socks_de.region = Some("de".into());
    socks_de.carrier = Some("vodafone".into());
    let mut http_us = Candidate::new(Protocol::Http, "us.vendor.test", 8080);
    http_us.region = Some("us".into());
    http_us.carrier = Some("att".into());
    let mut https_us = Candidate::new(Protocol::Https, "us2.vendor.test", 8443);
    https_us.region = Some("us".into());
    https_us.carrier = Some("vodafone".into());
    seed_available(&pool, T0, "acme", vec![socks_de, http_us]).await;
    seed_available(&pool, T0, "other", vec![https_us]).await;

    let cases: Vec<(ProxyFilter, Vec<&str>)> = vec![
        (
            ProxyFilter {
                protocol: Some(Protocol::Socks5),
                ..Default::default()
            },
            vec!["de.vendor.test"],
        ),
        (
            ProxyFilter {
                region: Some(Label::new("us").unwrap()),
                ..Default::default()
            },
            vec!["us.vendor.test", "us2.vendor.test"],
        ),
        (
            ProxyFilter {
                carrier: Some(Label::new("vodafone").unwrap()),
                ..Default::default()
            },
            vec!["de.vendor.test", "us2.vendor.test"],
        ),
        (
            ProxyFilter {
                upstream: Some(upstream("other")),
                ..Default::default()
            },
            vec!["us2.vendor.test"],
        ),
        (
            ProxyFilter {
                region: Some(Label::new("us").unwrap()),
                carrier: Some(Label::new("vodafone").unwrap()),
                ..Default::default()
            },
            vec!["us2.vendor.test"],
        ),
        (
            ProxyFilter {
                region: Some(Label::new("fr").unwrap()),
                ..Default::default()
            },
            vec![],
        ),
    ];
    for (filter, expected) in cases {
        // All-or-nothing with an impossible count is a read-only probe of what matches.
        let mut probe = extract_request("c1", 100, ExtractMode::AllOrNothing);
        probe.filter = filter.clone();
        let err = pool.extract(T0 + 1, probe).await.unwrap_err();
        assert_eq!(
            err,
            PoolError::InsufficientInventory {
                requested: 100,
                matching: expected.len() as u32
            },
            "{filter:?}"
        );
    }
    let mut request = extract_request("c1", 10, ExtractMode::Partial);
    request.filter = ProxyFilter {
        region: Some(Label::new("us").unwrap()),
        ..Default::default()
    };
    let out = pool.extract(T0 + 1, request).await.unwrap();
    let mut hosts: Vec<&str> = out
        .response
        .proxies
        .iter()
        .map(|p| p.host.as_str())
        .collect();
    hosts.sort();
    assert_eq!(hosts, vec!["us.vendor.test", "us2.vendor.test"]);
}

pub async fn extract_applies_health_freshness<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 1).await;
    let fresh = seed_range(&pool, T0 + 8_000, "acme", 1, 1).await;
    let mut request = extract_request("c1", 2, ExtractMode::Partial);
    request.min_health_freshness_ms = Some(5_000);
    let out = pool.extract(T0 + 10_000, request).await.unwrap();
    assert_eq!(out.response.returned, 1);
    assert_eq!(out.response.proxies[0].id, fresh[0]);
}

pub async fn extract_keeps_gateway_reserve<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 5).await;
    let mut request = extract_request("c1", 5, ExtractMode::Partial);
    request.reserve_for_gateway = 2;
    let out = pool.extract(T0 + 1, request).await.unwrap();
    assert_eq!(
        out.response.returned, 3,
        "two matching proxies stay for the gateway"
    );

    let mut request = extract_request("c2", 1, ExtractMode::AllOrNothing);
    request.reserve_for_gateway = 2;
    let err = pool.extract(T0 + 1, request).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::InsufficientInventory {
            requested: 1,
            matching: 0
        }
    );
    assert_eq!(pool.assignable(T0 + 1, 10).await.unwrap().len(), 2);
}

pub async fn extract_never_hands_out_past_usable_until<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 2).await;
    let usable_until = T0 + TTL_MS - MARGIN_MS;
    let out = pool
        .extract(usable_until, extract_request("c1", 2, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(out.response.returned, 0, "nothing inside the safety margin");
    let out = pool
        .extract(
            usable_until - 1,
            extract_request("c1", 2, ExtractMode::Partial),
        )
        .await
        .unwrap();
    assert_eq!(out.response.returned, 2);
    for proxy in &out.response.proxies {
        assert_eq!(proxy.usable_until_ms, usable_until);
        assert_eq!(proxy.expires_at_ms, T0 + TTL_MS);
    }
}

pub async fn extract_replay_is_identical<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 4).await;
    let mut request = extract_request("c1", 2, ExtractMode::Partial);
    request.idempotency_key = Some("order-1".into());
    let first = pool.extract(T0 + 1, request.clone()).await.unwrap();
    // A retry with a new request id (the first reply was lost) replays, charging nothing.
    request.request_id = "another-request-id".into();
    let replay = pool.extract(T0 + 2_000, request).await.unwrap();
    assert!(replay.replayed && !first.replayed);
    assert_eq!(replay.response, first.response);
    assert_eq!(
        pool.inventory(T0 + 2_000, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        2
    );
    let fetched = pool
        .get_extraction(T0 + 2_000, &client("c1"), &first.response.id)
        .await
        .unwrap();
    assert_eq!(fetched, first.response);
}

pub async fn extract_key_reuse_with_other_body_conflicts<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 4).await;
    let mut request = extract_request("c1", 1, ExtractMode::Partial);
    request.idempotency_key = Some("order-1".into());
    pool.extract(T0 + 1, request.clone()).await.unwrap();
    let mut other = request.clone();
    other.count = 2;
    let err = pool.extract(T0 + 2, other).await.unwrap_err();
    assert_eq!(err, PoolError::Conflict(Conflict::IdempotencyDigest));
    assert_eq!(
        pool.inventory(T0 + 2, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        3
    );
    // The same key of another client is another extraction.
    let mut foreign = request;
    foreign.client = client("c2");
    assert_eq!(
        pool.extract(T0 + 3, foreign)
            .await
            .unwrap()
            .response
            .returned,
        1
    );
}

pub async fn extract_replay_ttl_capped_by_earliest_expiry<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut short = candidate(0);
    short.expires_at_ms = Some(T0 + 12_000);
    seed_available(&pool, T0, "acme", vec![short, candidate(1)]).await;
    let mut request = extract_request("c1", 2, ExtractMode::Partial);
    request.idempotency_key = Some("k".into());
    request.idempotency_ttl_ms = 60_000;
    let first = pool.extract(T0 + 1, request.clone()).await.unwrap();
    assert_eq!(first.response.returned, 2);
    let id = first.response.id.clone();
    assert!(
        pool.get_extraction(T0 + 11_999, &client("c1"), &id)
            .await
            .is_ok()
    );
    assert_eq!(
        pool.get_extraction(T0 + 12_000, &client("c1"), &id)
            .await
            .unwrap_err(),
        PoolError::NotFound,
        "a replay never outlives the earliest proxy in it"
    );
    // After the cap the key is free again: a new extraction, not a replay of dead proxies.
    let again = pool.extract(T0 + 12_000, request).await.unwrap();
    assert!(!again.replayed);
    assert_eq!(again.response.returned, 0);
}

/// With `key_held_ms`, a key outlives its replay: once the response can no longer be
/// replayed, the same request is refused as expired and another body as a conflict (never
/// a fresh extraction, and a sweep keeps the hold); after the hold the key is free again.
pub async fn extract_held_key_is_refused_after_its_replay_ends<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 3).await;
    let mut request = extract_request("c1", 2, ExtractMode::Partial);
    request.idempotency_key = Some("held".into());
    request.idempotency_ttl_ms = 12_000;
    request.key_held_ms = 20_000;
    let first = pool.extract(T0 + 1, request.clone()).await.unwrap();
    assert_eq!(first.response.returned, 2);
    let unextracted = async |at| {
        pool.inventory(at, &upstream("acme"))
            .await
            .unwrap()
            .unextracted
    };
    assert_eq!(unextracted(T0 + 2).await, 1);

    let replay = pool.extract(T0 + 12_000, request.clone()).await.unwrap();
    assert!(replay.replayed);
    let expired = pool.extract(T0 + 12_001, request.clone()).await;
    assert_eq!(
        expired.unwrap_err(),
        PoolError::Conflict(Conflict::IdempotencyExpired),
        "the replay ended; the key is still held"
    );
    let mut other = request.clone();
    other.count = 1;
    let conflict = pool.extract(T0 + 12_001, other.clone()).await;
    assert_eq!(
        conflict.unwrap_err(),
        PoolError::Conflict(Conflict::IdempotencyDigest)
    );
    let shown = pool
        .get_extraction(T0 + 12_001, &client("c1"), &first.response.id)
        .await;
    assert_eq!(
        shown.unwrap_err(),
        PoolError::NotFound,
        "nothing to show once the replay ended"
    );
    pool.sweep(T0 + 15_000, 100).await.unwrap();
    let still = pool.extract(T0 + 20_000, request.clone()).await;
    assert_eq!(
        still.unwrap_err(),
        PoolError::Conflict(Conflict::IdempotencyExpired),
        "a sweep keeps a held key"
    );
    assert_eq!(
        unextracted(T0 + 20_000).await,
        1,
        "refusals extract nothing"
    );

    // The hold ends 20 s after the extraction: the key buys a new extraction.
    let again = pool.extract(T0 + 20_001, other).await.unwrap();
    assert!(!again.replayed);
    assert_eq!(again.response.returned, 1);
}

pub async fn extract_lookup_is_scoped_to_client<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 1).await;
    let out = pool
        .extract(T0 + 1, extract_request("c1", 1, ExtractMode::Partial))
        .await
        .unwrap();
    let id = out.response.id;
    assert!(
        pool.get_extraction(T0 + 2, &client("c1"), &id)
            .await
            .is_ok()
    );
    assert_eq!(
        pool.get_extraction(T0 + 2, &client("c2"), &id)
            .await
            .unwrap_err(),
        PoolError::NotFound
    );
    let unknown = proxypool_core::ExtractionId::derive(&client("c1"), Some("nope"), "r");
    assert_eq!(
        pool.get_extraction(T0 + 2, &client("c1"), &unknown)
            .await
            .unwrap_err(),
        PoolError::NotFound
    );
}

pub async fn extract_scan_budget_exhausted_is_unavailable<F: PoolFactory>(factory: &F) {
    let limits = ScanLimits {
        extract_scan_budget: 8,
        ..ScanLimits::default()
    };
    let pool = fresh_pool!(factory, limits);
    // 20 SOCKS5 proxies with a region, then 20 plain ones: a filter on protocol and region
    // drives from the smaller index and decides within budget; a filter whose driving index
    // is full of non-matching entries cannot.
    let socks: Vec<Candidate> = (0..20)
        .map(|i| {
            let mut c = Candidate::new(Protocol::Socks5, format!("s{i}.vendor.test"), 1080);
            c.region = Some(if i < 19 { "us" } else { "de" }.into());
            c
        })
        .collect();
    seed_available(&pool, T0, "acme", socks).await;
    let mut request = extract_request("c1", 1, ExtractMode::Partial);
    request.filter = ProxyFilter {
        region: Some(Label::new("de").unwrap()),
        ..Default::default()
    };
    let out = pool.extract(T0 + 1, request).await.unwrap();
    assert_eq!(
        out.response.returned, 1,
        "the small region index decides within budget"
    );

    let mut request = extract_request("c1", 1, ExtractMode::Partial);
    request.min_health_freshness_ms = Some(0);
    request.filter = ProxyFilter {
        protocol: Some(Protocol::Socks5),
        ..Default::default()
    };
    // Every candidate fails freshness (checked at T0, now is later), so the scan runs out.
    let err = pool.extract(T0 + 5, request).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::Unavailable(Unavailable::ScanBudget),
        "never reported as empty"
    );
    assert_eq!(
        pool.inventory(T0 + 5, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        19
    );
}

pub async fn extract_concurrent_rounds_never_intersect<F: PoolFactory>(factory: &F) {
    let pool = Arc::new(fresh_pool!(factory));
    for round in 0..100usize {
        let now = T0 + (round as u64) * 10;
        seed_range(&*pool, now, "acme", round * 40, 40).await;
        let mut tasks = Vec::new();
        for worker_index in 0..8 {
            let pool = Arc::clone(&pool);
            tasks.push(tokio::spawn(async move {
                let request = extract_request(&format!("c{worker_index}"), 6, ExtractMode::Partial);
                pool.extract(now, request).await.unwrap().response.proxies
            }));
        }
        let mut seen = HashSet::new();
        let mut total = 0;
        for task in tasks {
            for proxy in task.await.unwrap() {
                total += 1;
                assert!(
                    seen.insert(proxy.id.clone()),
                    "round {round}: {} handed out twice",
                    proxy.id
                );
            }
        }
        assert_eq!(
            total, 40,
            "round {round}: 8 x 6 requested from 40 plus leftovers"
        );
    }
}

pub async fn extract_rejects_invalid_request_without_change<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 2).await;
    let mut zero = extract_request("c1", 0, ExtractMode::Partial);
    zero.idempotency_key = Some("k1".into());
    assert!(matches!(
        pool.extract(T0 + 1, zero).await,
        Err(PoolError::InvalidInput(_))
    ));
    let mut too_many = extract_request("c1", 1_001, ExtractMode::Partial);
    too_many.idempotency_key = Some("k2".into());
    assert!(matches!(
        pool.extract(T0 + 1, too_many).await,
        Err(PoolError::InvalidInput(_))
    ));
    let mut bad_key = extract_request("c1", 1, ExtractMode::Partial);
    bad_key.idempotency_key = Some("bad key with spaces".into());
    assert!(matches!(
        pool.extract(T0 + 1, bad_key).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert_eq!(
        pool.inventory(T0 + 1, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        2
    );
    assert_eq!(
        pool.footprint().await.unwrap().results,
        0,
        "nothing stored for a bad request"
    );
}
