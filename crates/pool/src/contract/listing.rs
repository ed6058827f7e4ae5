//! Contract: ProxyLister (the operators' read-only listing: id order, cursor pages,
//! filters, owners, statuses as of `now`, bounded input and work).

use super::factory::{PoolFactory, ScanLimits};
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    CheckFailure, CheckOutcome, ExtractMode, HealthBatch, HealthObservation, HealthStore,
    MAX_LIST_LIMIT, PoolError, ProxyId, ProxyListFilter, ProxyLister, ProxyPage, ProxyStatus,
    Unavailable, UnixMillis,
};

async fn all_pages<P: ProxyLister>(
    pool: &P,
    now: UnixMillis,
    mut filter: ProxyListFilter,
    limit: usize,
) -> Vec<ProxyPage> {
    let mut pages = Vec::new();
    loop {
        let page = pool.list_proxies(now, &filter, limit).await.unwrap();
        let next = page.next.clone();
        pages.push(page);
        match next {
            Some(after) => filter.after = Some(after),
            None => return pages,
        }
    }
}

pub async fn listing_pages_in_id_order_with_owners<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut ids = seed_range(&pool, T0, "acme", 0, 5).await;
    ids.extend(seed_range(&pool, T0, "other", 10, 2).await);
    ids.sort();

    let pages = all_pages(&pool, T0 + 1, ProxyListFilter::default(), 3).await;
    assert_eq!(
        pages.iter().map(|p| p.proxies.len()).collect::<Vec<_>>(),
        [3, 3, 1]
    );
    let listed: Vec<ProxyId> = pages
        .iter()
        .flat_map(|p| p.proxies.iter().map(|l| l.id.clone()))
        .collect();
    assert_eq!(listed, ids, "every proxy once, in ascending id order");
    assert_eq!(
        pages[0].next.as_ref(),
        Some(&ids[2]),
        "the cursor is the last id shown"
    );
    assert!(pages[2].next.is_none());

    // One extracted, one leased to a worker: the listing shows both as they are now.
    let mut take = extract_request("c1", 1, ExtractMode::Partial);
    take.filter.upstream = Some(upstream("other"));
    let extracted = pool.extract(T0 + 2, take).await.unwrap();
    let extracted = extracted.response.proxies[0].id.clone();
    let leased = ids.iter().find(|id| **id != extracted).unwrap().clone();
    let lease = pool
        .assign(T0 + 2, &leased, &worker("gw-1"), 10_000)
        .await
        .unwrap();
    let page = pool
        .list_proxies(T0 + 3, &ProxyListFilter::default(), MAX_LIST_LIMIT)
        .await
        .unwrap();
    assert_eq!(page.proxies.len(), 7);
    for row in &page.proxies {
        if row.id == extracted {
            assert_eq!(row.status, ProxyStatus::Extracted);
            assert_eq!(row.upstream, upstream("other"));
            assert_eq!(row.extracted_by, Some(client("c1")));
        } else {
            assert_eq!(row.status, ProxyStatus::Available, "{row:?}");
            assert_eq!(row.extracted_by, None, "{row:?}");
        }
        if row.id == leased {
            assert_eq!(row.owner, Some(worker("gw-1")));
            assert_eq!(row.lease_until_ms, Some(lease.lease_until_ms));
            assert!(!row.draining);
        } else {
            assert_eq!(row.owner, None, "{row:?}");
        }
        assert!(row.checked_at_ms.is_some(), "seeded proxies were checked");
    }

    // Past the lease the owner is gone from the row; past the hard expiry every row is
    // EXPIRED even before a sweep removes it.
    let page = pool
        .list_proxies(lease.lease_until_ms, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    assert!(page.proxies.iter().all(|row| row.owner.is_none()));
    let expired = ProxyListFilter {
        status: Some(ProxyStatus::Expired),
        ..ProxyListFilter::default()
    };
    let page = pool.list_proxies(T0 + TTL_MS, &expired, 10).await.unwrap();
    assert_eq!(page.proxies.len(), 7);

    // Swept and fetched again, the extracted proxy starts a new lifetime: nobody's yet.
    pool.sweep(T0 + TTL_MS, 100).await.unwrap();
    let again = (10..12).find(|i| candidate_id(*i) == extracted).unwrap();
    pool.upsert(T0 + TTL_MS + 1, batch("other", vec![candidate(again)]))
        .await
        .unwrap();
    let page = pool
        .list_proxies(T0 + TTL_MS + 1, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(page.proxies.len(), 1);
    assert_eq!(page.proxies[0].id, extracted);
    assert_eq!(page.proxies[0].status, ProxyStatus::Fetched);
    assert_eq!(page.proxies[0].extracted_by, None);
}

pub async fn listing_filters_by_upstream_and_status<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 4).await;
    let others = seed_range(&pool, T0, "other", 10, 3).await;
    pool.upsert(T0, batch("acme", vec![candidate(20)]))
        .await
        .unwrap(); // FETCHED, never checked

    let by_upstream = ProxyListFilter {
        upstream: Some(upstream("other")),
        ..ProxyListFilter::default()
    };
    let pages = all_pages(&pool, T0 + 1, by_upstream, 2).await;
    let mut listed: Vec<ProxyId> = pages
        .iter()
        .flat_map(|p| p.proxies.iter().map(|l| l.id.clone()))
        .collect();
    let mut expected = others.clone();
    expected.sort();
    listed.sort();
    assert_eq!(listed, expected);
    assert!(
        pages
            .iter()
            .flat_map(|p| &p.proxies)
            .all(|row| row.upstream == upstream("other"))
    );

    let fetched = ProxyListFilter {
        status: Some(ProxyStatus::Fetched),
        ..ProxyListFilter::default()
    };
    let page = pool.list_proxies(T0 + 1, &fetched, 10).await.unwrap();
    assert_eq!(page.proxies.len(), 1);
    assert_eq!(page.proxies[0].id, candidate_id(20));
    assert_eq!(page.proxies[0].checked_at_ms, None);
    assert!(page.next.is_none());

    let none = ProxyListFilter {
        upstream: Some(upstream("nobody")),
        ..ProxyListFilter::default()
    };
    assert_eq!(
        pool.list_proxies(T0 + 1, &none, 10).await.unwrap(),
        ProxyPage::default()
    );
}

/// The listing shows why each proxy's last check failed, cleared by a success; a kind an
/// older version stored that is no reason of today's shows as `other`.
pub async fn listing_shows_why_the_last_check_failed<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 3).await;
    let observe = |id: &ProxyId, at: UnixMillis, outcome: CheckOutcome| HealthObservation {
        proxy_id: id.clone(),
        checked_at_ms: at,
        outcome,
    };
    let apply = |observations| {
        pool.apply_health(
            T0 + 10,
            HealthBatch {
                observations,
                unhealthy_after_failures: 3,
            },
        )
    };
    apply(vec![
        observe(
            &ids[0],
            T0 + 10,
            CheckOutcome::failure(CheckFailure::ProxyTls),
        ),
        observe(
            &ids[1],
            T0 + 10,
            CheckOutcome::Failure {
                error: "connect_refused".into(),
            },
        ),
    ])
    .await
    .unwrap();
    let reasons = |page: ProxyPage| -> Vec<(ProxyId, Option<CheckFailure>)> {
        page.proxies
            .into_iter()
            .map(|row| (row.id, row.last_check_error))
            .collect()
    };
    let mut expected = vec![
        (ids[0].clone(), Some(CheckFailure::ProxyTls)),
        (ids[1].clone(), Some(CheckFailure::Other)),
        (ids[2].clone(), None),
    ];
    expected.sort();
    let page = pool
        .list_proxies(T0 + 11, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(reasons(page), expected);

    apply(vec![observe(
        &ids[0],
        T0 + 20,
        CheckOutcome::Success { latency_ms: 5 },
    )])
    .await
    .unwrap();
    let page = pool
        .list_proxies(T0 + 21, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    let row = page.proxies.iter().find(|row| row.id == ids[0]).unwrap();
    assert_eq!(row.last_check_error, None, "a success clears it");
    assert_eq!(row.failures, 0);
}

pub async fn listing_rejects_bad_limits_and_changes_nothing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "acme", 0, 3).await;
    let before = pool
        .list_proxies(T0 + 1, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    for limit in [0, MAX_LIST_LIMIT + 1, usize::MAX] {
        let refused = pool
            .list_proxies(T0 + 1, &ProxyListFilter::default(), limit)
            .await;
        assert!(
            matches!(refused, Err(PoolError::InvalidInput(_))),
            "limit {limit}: {refused:?}"
        );
    }
    let after = pool
        .list_proxies(T0 + 1, &ProxyListFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(before, after);
    assert_eq!(after.proxies.len(), 3);
}

pub async fn listing_over_scan_budget_is_unavailable<F: PoolFactory>(factory: &F) {
    let limits = ScanLimits {
        inventory_scan_budget: 10,
        ..ScanLimits::default()
    };
    let pool = fresh_pool!(factory, limits);
    seed_range(&pool, T0, "acme", 0, 10).await;
    let page = pool
        .list_proxies(T0 + 1, &ProxyListFilter::default(), 1)
        .await
        .unwrap();
    assert_eq!(
        page.proxies.len(),
        1,
        "at the budget the listing still answers"
    );
    seed_range(&pool, T0, "acme", 100, 1).await;
    assert!(matches!(
        pool.list_proxies(T0 + 1, &ProxyListFilter::default(), 1)
            .await,
        Err(PoolError::Unavailable(Unavailable::ScanBudget))
    ));
}
