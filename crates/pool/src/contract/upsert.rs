//! Contract: Upserter (vendor TTL, safety margin, max size, dedupe, incumbents, retries).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    Candidate, DropReason, ExtractMode, PoolError, Protocol, ProxyStatus, Upserter,
};

pub async fn upsert_applies_ttl_and_safety_margin<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut own_expiry = candidate(2);
    own_expiry.expires_at_ms = Some(T0 + 20_000);
    let report = pool
        .upsert(T0, batch("acme", vec![candidate(1), own_expiry]))
        .await
        .unwrap();
    assert_eq!(report.inserted, 2);

    let plain = find_record(&pool, T0, &candidate_id(1))
        .await
        .expect("stored");
    assert_eq!(plain.status, ProxyStatus::Fetched);
    assert_eq!(plain.hard_expiry_ms, T0 + TTL_MS);
    assert_eq!(plain.usable_until_ms, T0 + TTL_MS - MARGIN_MS);
    let vendor = find_record(&pool, T0, &candidate_id(2))
        .await
        .expect("stored");
    assert_eq!(vendor.hard_expiry_ms, T0 + 20_000);
    assert_eq!(vendor.usable_until_ms, T0 + 20_000 - MARGIN_MS);
    assert!(
        find_record(&pool, T0 + TTL_MS, &candidate_id(1))
            .await
            .is_none(),
        "gone at hard expiry"
    );
}

pub async fn upsert_rejects_bad_batch_without_writing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut bad = batch("acme", vec![candidate(1)]);
    bad.safety_margin_ms = bad.ttl_ms;
    assert!(matches!(
        pool.upsert(T0, bad).await,
        Err(PoolError::InvalidInput(_))
    ));
    let mut bad = batch("acme", vec![candidate(1)]);
    bad.max_size = 0;
    assert!(matches!(
        pool.upsert(T0, bad).await,
        Err(PoolError::InvalidInput(_))
    ));
    let inventory = pool.inventory(T0, &upstream("acme")).await.unwrap();
    assert_eq!(inventory.unextracted, 0);
    assert_eq!(pool.footprint().await.unwrap().records, 0);
}

pub async fn upsert_drops_bad_candidates_by_reason<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut bad_port = candidate(2);
    bad_port.port = 0;
    let mut bad_host = candidate(3);
    bad_host.host = "not a host".into();
    let mut dying = candidate(4);
    dying.expires_at_ms = Some(T0 + MARGIN_MS);
    let report = pool
        .upsert(
            T0,
            batch(
                "acme",
                vec![candidate(1), bad_port, bad_host, dying, candidate(1)],
            ),
        )
        .await
        .unwrap();
    assert_eq!(report.inserted, 1);
    assert_eq!(report.dropped[&DropReason::InvalidPort], 1);
    assert_eq!(report.dropped[&DropReason::InvalidHost], 1);
    assert_eq!(report.dropped[&DropReason::ExpiresTooSoon], 1);
    assert_eq!(report.dropped[&DropReason::DuplicateInBatch], 1);
    assert_eq!(report.dropped_total(), 4);
    assert_eq!(
        pool.inventory(T0, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        1
    );
}

pub async fn upsert_enforces_max_size<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut first = batch("acme", (0..8).map(candidate).collect());
    first.max_size = 5;
    let report = pool.upsert(T0, first).await.unwrap();
    assert_eq!((report.inserted, report.over_max_size), (5, 3));

    // Refreshing what is there is allowed at the cap; new ones still are not.
    let mut second = batch("acme", (0..10).map(candidate).collect());
    second.max_size = 5;
    let report = pool.upsert(T0 + 1_000, second).await.unwrap();
    assert_eq!(
        (report.inserted, report.refreshed, report.over_max_size),
        (0, 5, 5)
    );

    // Extraction frees room under the cap.
    let ids: Vec<_> = (0..5).map(candidate_id).collect();
    mark_healthy(&pool, T0 + 1_000, &ids).await;
    let out = pool
        .extract(T0 + 1_000, extract_request("c1", 2, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(out.response.returned, 2);
    let mut third = batch("acme", (10..20).map(candidate).collect());
    third.max_size = 5;
    let report = pool.upsert(T0 + 2_000, third).await.unwrap();
    assert_eq!((report.inserted, report.over_max_size), (2, 8));
    assert_eq!(
        pool.inventory(T0 + 2_000, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        5
    );
}

pub async fn upsert_refreshes_without_double_counting<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    pool.upsert(T0, batch("acme", vec![candidate(1), candidate(2)]))
        .await
        .unwrap();
    mark_healthy(&pool, T0, &[candidate_id(1)]).await;

    let mut rotated = candidate(1);
    rotated.credentials = Some(proxypool_core::Credentials::new(
        "user1",
        "rotated-password",
    ));
    let report = pool
        .upsert(T0 + 10_000, batch("acme", vec![rotated, candidate(2)]))
        .await
        .unwrap();
    assert_eq!((report.inserted, report.refreshed), (0, 2));
    let inventory = pool
        .inventory(T0 + 10_000, &upstream("acme"))
        .await
        .unwrap();
    assert_eq!(inventory.unextracted, 2);

    let record = find_record(&pool, T0 + 10_000, &candidate_id(1))
        .await
        .unwrap();
    assert_eq!(
        record.hard_expiry_ms,
        T0 + 10_000 + TTL_MS,
        "expiry extended"
    );
    assert_eq!(
        record.status,
        ProxyStatus::Available,
        "health survives a refresh"
    );
    assert_eq!(
        record.credentials.unwrap().password.expose(),
        "rotated-password"
    );
}

pub async fn upsert_incumbent_upstream_keeps_proxy<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    pool.upsert(T0, batch("acme", vec![candidate(1)]))
        .await
        .unwrap();
    let report = pool
        .upsert(T0 + 1_000, batch("other", vec![candidate(1), candidate(2)]))
        .await
        .unwrap();
    assert_eq!((report.inserted, report.foreign_duplicates), (1, 1));
    let record = find_record(&pool, T0 + 1_000, &candidate_id(1))
        .await
        .unwrap();
    assert_eq!(record.upstream, upstream("acme"));
    assert_eq!(
        record.hard_expiry_ms,
        T0 + TTL_MS,
        "a foreign duplicate does not refresh"
    );
    assert_eq!(
        pool.inventory(T0 + 1_000, &upstream("other"))
            .await
            .unwrap()
            .unextracted,
        1
    );
    assert_eq!(
        pool.inventory(T0 + 1_000, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        1
    );
}

pub async fn upsert_never_refreshes_extracted_back<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 1, 1).await;
    let out = pool
        .extract(T0, extract_request("c1", 1, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(out.response.returned, 1);

    let report = pool
        .upsert(T0 + 1_000, batch("acme", vec![candidate(1)]))
        .await
        .unwrap();
    assert_eq!(
        (report.inserted, report.refreshed, report.extracted_ignored),
        (0, 0, 1)
    );
    mark_healthy_ignored(&pool, T0 + 1_000).await;
    let again = pool
        .extract(T0 + 1_000, extract_request("c2", 1, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(
        again.response.returned, 0,
        "an extracted proxy never comes back this lifetime"
    );
    let inventory = pool.inventory(T0 + 1_000, &upstream("acme")).await.unwrap();
    assert_eq!(inventory.unextracted, 0);
    assert_eq!(inventory.by_status.get(&ProxyStatus::Extracted), Some(&1));
}

/// A success observation for an extracted proxy is ignored, not applied.
async fn mark_healthy_ignored<P: proxypool_core::ActivityPool>(pool: &P, now: u64) {
    let report = pool
        .apply_health(
            now,
            proxypool_core::HealthBatch {
                observations: vec![proxypool_core::HealthObservation {
                    proxy_id: candidate_id(1),
                    checked_at_ms: now,
                    outcome: proxypool_core::CheckOutcome::Success { latency_ms: 5 },
                }],
                unhealthy_after_failures: 3,
            },
        )
        .await
        .unwrap();
    assert_eq!((report.applied, report.ignored), (0, 1));
}

pub async fn upsert_operation_id_replay_counts_once<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut first = batch("acme", (0..10).map(candidate).collect());
    first.operation_id = Some("fetch-42".into());
    let report = pool.upsert(T0, first.clone()).await.unwrap();
    assert_eq!(report.inserted, 10);
    // The same operation retried (its reply was lost): same report, no second effect.
    let replay = pool.upsert(T0 + 100, first).await.unwrap();
    assert_eq!(replay, report);
    let record = find_record(&pool, T0 + 100, &candidate_id(0))
        .await
        .unwrap();
    assert_eq!(
        record.hard_expiry_ms,
        T0 + TTL_MS,
        "a replay does not refresh"
    );
    assert_eq!(
        pool.inventory(T0 + 100, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        10
    );
}

pub async fn upsert_new_lifetime_after_hard_expiry<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 1, 1).await;
    pool.extract(T0, extract_request("c1", 1, ExtractMode::Partial))
        .await
        .unwrap();
    let later = T0 + TTL_MS + 1;
    // After the hard expiry the proxy is a new lifetime, possibly of another upstream.
    let mut socks = Candidate::new(Protocol::Socks5, "s.vendor.test", 1080);
    socks.region = Some("US".into());
    let report = pool
        .upsert(later, batch("other", vec![candidate(1), socks]))
        .await
        .unwrap();
    assert_eq!(report.inserted, 2);
    let record = find_record(&pool, later, &candidate_id(1)).await.unwrap();
    assert_eq!(record.upstream, upstream("other"));
    assert_eq!(record.status, ProxyStatus::Fetched);
    assert_eq!(
        pool.inventory(later, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        0
    );
    assert_eq!(
        pool.inventory(later, &upstream("other"))
            .await
            .unwrap()
            .unextracted,
        2
    );
}
