//! Contract: HealthStore (status transitions and the available indexes).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    ActivityPool, CheckOutcome, DueQuery, ExtractMode, HealthBatch, HealthObservation, PoolError,
    ProxyId, ProxyStatus, UnixMillis,
};

async fn observe<P: ActivityPool>(pool: &P, at: UnixMillis, id: &ProxyId, outcome: CheckOutcome) {
    let batch = HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: at,
            outcome,
        }],
        unhealthy_after_failures: 2,
    };
    pool.apply_health(at, batch).await.unwrap();
}

fn failure() -> CheckOutcome {
    CheckOutcome::Failure {
        error: "connect_timeout".into(),
    }
}

async fn extractable<P: ActivityPool>(pool: &P, now: UnixMillis) -> u32 {
    let mut request = extract_request("probe", 1_000, ExtractMode::AllOrNothing);
    request.reserve_for_gateway = 0;
    match pool.extract(now, request).await {
        Err(PoolError::InsufficientInventory { matching, .. }) => matching,
        other => panic!("probe must not succeed: {other:?}"),
    }
}

pub async fn health_fetched_becomes_available_and_extractable<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    pool.upsert(T0, batch("acme", vec![candidate(1), candidate(2)]))
        .await
        .unwrap();
    assert_eq!(
        extractable(&pool, T0).await,
        0,
        "FETCHED is not extractable"
    );

    observe(
        &pool,
        T0 + 10,
        &candidate_id(1),
        CheckOutcome::Success { latency_ms: 42 },
    )
    .await;
    let record = find_record(&pool, T0 + 10, &candidate_id(1)).await.unwrap();
    assert_eq!(record.status, ProxyStatus::Available);
    assert_eq!(record.health.latency_ms, Some(42));
    assert_eq!(record.health.succeeded_at_ms, Some(T0 + 10));
    assert_eq!(extractable(&pool, T0 + 10).await, 1);
}

pub async fn health_failures_leave_available_indexes<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 2).await;
    observe(&pool, T0 + 10, &ids[0], failure()).await;
    let record = find_record(&pool, T0 + 10, &ids[0]).await.unwrap();
    assert_eq!(record.status, ProxyStatus::Suspect);
    assert_eq!(record.health.failures, 1);
    assert_eq!(record.health.last_error.as_deref(), Some("connect_timeout"));
    assert_eq!(extractable(&pool, T0 + 10).await, 1);

    observe(&pool, T0 + 20, &ids[0], failure()).await;
    assert_eq!(
        find_record(&pool, T0 + 20, &ids[0]).await.unwrap().status,
        ProxyStatus::Unhealthy
    );
    let out = pool
        .extract(T0 + 20, extract_request("c1", 2, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(out.response.returned, 1);
    assert_eq!(
        out.response.proxies[0].id, ids[1],
        "only the healthy one is handed out"
    );
}

pub async fn health_recovery_returns_to_indexes<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    observe(&pool, T0 + 10, &ids[0], failure()).await;
    observe(&pool, T0 + 20, &ids[0], failure()).await;
    assert_eq!(extractable(&pool, T0 + 20).await, 0);
    observe(
        &pool,
        T0 + 30,
        &ids[0],
        CheckOutcome::Success { latency_ms: 7 },
    )
    .await;
    let record = find_record(&pool, T0 + 30, &ids[0]).await.unwrap();
    assert_eq!(
        (record.status, record.health.failures),
        (ProxyStatus::Available, 0)
    );
    assert_eq!(extractable(&pool, T0 + 30).await, 1);
}

pub async fn health_ignores_stale_and_unknown_observations<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0 + 100, "acme", 1, 1).await;
    let stale = HealthBatch {
        observations: vec![
            HealthObservation {
                proxy_id: ids[0].clone(),
                checked_at_ms: T0 + 50,
                outcome: failure(),
            },
            HealthObservation {
                proxy_id: candidate_id(99),
                checked_at_ms: T0 + 150,
                outcome: failure(),
            },
        ],
        unhealthy_after_failures: 1,
    };
    let report = pool.apply_health(T0 + 150, stale).await.unwrap();
    assert_eq!((report.applied, report.ignored), (0, 2));
    assert_eq!(
        find_record(&pool, T0 + 150, &ids[0]).await.unwrap().status,
        ProxyStatus::Available
    );
}

pub async fn health_due_for_check_orders_fetched_first<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let checked = seed_range(&pool, T0, "acme", 1, 2).await;
    pool.upsert(T0 + 500, batch("acme", vec![candidate(3)]))
        .await
        .unwrap();
    let query = DueQuery {
        limit: 10,
        recheck_after_ms: 1_000,
    };

    let due = pool.due_for_check(T0 + 600, query).await.unwrap();
    assert_eq!(
        due.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        vec![candidate_id(3)]
    );

    let due = pool.due_for_check(T0 + 1_000, query).await.unwrap();
    assert_eq!(
        due.len(),
        3,
        "AVAILABLE proxies are due again once their check is old"
    );
    assert_eq!(due[0].id, candidate_id(3), "FETCHED first");
    assert!(checked.contains(&due[1].id) && checked.contains(&due[2].id));
    let limited = pool
        .due_for_check(T0 + 1_000, DueQuery { limit: 1, ..query })
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
}

pub async fn health_rejects_bad_batch_without_writing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 1, 1).await;
    let zero_threshold = HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: ids[0].clone(),
            checked_at_ms: T0 + 1,
            outcome: failure(),
        }],
        unhealthy_after_failures: 0,
    };
    assert!(matches!(
        pool.apply_health(T0 + 1, zero_threshold).await,
        Err(PoolError::InvalidInput(_))
    ));
    let leaky_error = HealthBatch {
        observations: vec![
            HealthObservation {
                proxy_id: ids[0].clone(),
                checked_at_ms: T0 + 1,
                outcome: failure(),
            },
            HealthObservation {
                proxy_id: ids[0].clone(),
                checked_at_ms: T0 + 2,
                outcome: CheckOutcome::Failure {
                    error: "proxy said: user1:pw-secret-1".into(),
                },
            },
        ],
        unhealthy_after_failures: 3,
    };
    assert!(matches!(
        pool.apply_health(T0 + 2, leaky_error).await,
        Err(PoolError::InvalidInput(_))
    ));
    let record = find_record(&pool, T0 + 2, &ids[0]).await.unwrap();
    assert_eq!(
        (record.status, record.health.failures),
        (ProxyStatus::Available, 0)
    );
}
