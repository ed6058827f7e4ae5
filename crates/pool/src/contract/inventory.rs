//! Contract: InventoryReader (managed counts and available slots, exact or unavailable).

use super::factory::{PoolFactory, ScanLimits};
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    CheckOutcome, ExtractMode, HealthBatch, HealthObservation, PoolError, ProxyRuntime,
    ProxyStatus, RuntimeReport, SnapshotRef, Unavailable,
};

pub async fn inventory_counts_managed_and_slots<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let acme = upstream("acme");
    let ids = seed_range(&pool, T0, "acme", 0, 6).await;
    pool.upsert(T0, batch("acme", vec![candidate(10)]))
        .await
        .unwrap(); // FETCHED
    pool.upsert(T0, batch("other", vec![candidate(11)]))
        .await
        .unwrap(); // another upstream
    let unhealthy = HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: ids[5].clone(),
            checked_at_ms: T0 + 1,
            outcome: CheckOutcome::Failure {
                error: "refused".into(),
            },
        }],
        unhealthy_after_failures: 1,
    };
    pool.apply_health(T0 + 1, unhealthy).await.unwrap();
    let mut take_one = extract_request("c1", 1, ExtractMode::Partial);
    take_one.filter.upstream = Some(acme.clone());
    pool.extract(T0 + 1, take_one).await.unwrap();

    // Of the 4 AVAILABLE left: one owned with a fresh report (3 busy), one owned without any
    // report, one draining, one unowned.
    let owned: Vec<_> = pool
        .assignable(T0 + 1, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.upstream == acme)
        .collect();
    assert_eq!(owned.len(), 4);
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    let reported = pool
        .assign(T0 + 1, &owned[0].id, &w1, 20_000)
        .await
        .unwrap();
    pool.assign(T0 + 1, &owned[1].id, &w2, 20_000)
        .await
        .unwrap();
    let draining = pool
        .assign(T0 + 1, &owned[2].id, &w1, 20_000)
        .await
        .unwrap();
    pool.begin_drain(T0 + 1, &owned[2].id, &w1, draining.epoch)
        .await
        .unwrap();
    let snap = SnapshotRef {
        version: 1,
        epoch: pool.current_epoch(T0 + 1).await.unwrap(),
        checksum: "c".into(),
    };
    pool.open_session(T0 + 1, &w1, "s1", 30_000).await.unwrap();
    pool.issue_snapshot(T0 + 1, &w1, "s1", snap.clone())
        .await
        .unwrap();
    pool.ack_snapshot(T0 + 1, &w1, "s1", snap.clone())
        .await
        .unwrap();
    let entries = vec![ProxyRuntime {
        proxy_id: reported.proxy_id.clone(),
        active: 2,
        reserved: 1,
        draining: false,
    }];
    let report = RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        usage: None,
        worker: w1.clone(),
        session_id: "s1".into(),
        sequence: 1,
        snapshot: snap,
        entries,
    };
    pool.report_runtime(T0 + 1, report, 10_000).await.unwrap();

    let view = pool.inventory(T0 + 2, &acme).await.unwrap();
    assert_eq!(view.managed, 5, "4 AVAILABLE + 1 FETCHED");
    assert_eq!(view.unextracted, 6, "everything but the extracted one");
    assert_eq!(
        view.available_slots,
        u64::from(SESSIONS) + (u64::from(SESSIONS) - 3)
    );
    assert_eq!(view.by_status.get(&ProxyStatus::Available), Some(&4));
    assert_eq!(view.by_status.get(&ProxyStatus::Unhealthy), Some(&1));
    assert_eq!(view.by_status.get(&ProxyStatus::Extracted), Some(&1));
    assert_eq!(view.by_status.get(&ProxyStatus::Fetched), Some(&1));

    let past = pool
        .inventory(T0 + TTL_MS - MARGIN_MS, &acme)
        .await
        .unwrap();
    assert_eq!(
        past.available_slots, 0,
        "nothing is usable inside the safety margin"
    );
    let empty = pool.inventory(T0, &upstream("nobody")).await.unwrap();
    assert_eq!(
        (empty.managed, empty.available_slots, empty.unextracted),
        (0, 0, 0)
    );
}

pub async fn inventory_over_scan_budget_is_unavailable<F: PoolFactory>(factory: &F) {
    let limits = ScanLimits {
        inventory_scan_budget: 10,
        ..ScanLimits::default()
    };
    let pool = fresh_pool!(factory, limits);
    seed_range(&pool, T0, "small", 0, 10).await;
    seed_range(&pool, T0, "big", 100, 11).await;
    assert_eq!(
        pool.inventory(T0, &upstream("small"))
            .await
            .unwrap()
            .managed,
        10
    );
    let err = pool.inventory(T0, &upstream("big")).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::Unavailable(Unavailable::ScanBudget),
        "never an approximation"
    );
}
