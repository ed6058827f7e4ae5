//! Contract: the store's identity, generation and recovery (`proxypool_core::store_mark`).
//! A pool that expects an identity refuses, with `Unavailable::StoreLost` and nothing
//! changed, a store that carries another identity or a lower generation; a new identity
//! starts an empty pool; during a recovery a record first stored is withheld from
//! extraction and assignment unless the vendor says it was issued after the loss, and is
//! released by the sweep when its hold ends or the recovery is acknowledged.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::store_mark::new_identity;
use proxypool_core::{
    Expectation, ExtractMode, LossReason, PoolError, Recovery, StoreIdentity, StoreMark,
    Unavailable,
};

fn mark(generation: u64, recovery: Option<Recovery>) -> StoreMark {
    StoreMark::fresh(generation, recovery).unwrap()
}

fn expecting(mark: &StoreMark) -> Option<Expectation> {
    Some(Expectation {
        identity: mark.identity.clone(),
        generation: mark.generation,
    })
}

fn lost<T: std::fmt::Debug>(result: Result<T, PoolError>, reason: LossReason, call: &str) {
    match result {
        Err(PoolError::Unavailable(Unavailable::StoreLost(r))) if r == reason => {}
        other => panic!("{call} on a lost store must be StoreLost({reason:?}), got {other:?}"),
    }
}

pub async fn identity_install_and_read_the_mark<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    assert_eq!(pool.read_mark().await.unwrap(), None);
    let first = mark(3, None);
    assert_eq!(pool.install_mark(T0, &first).await.unwrap(), first);
    assert_eq!(pool.read_mark().await.unwrap(), Some(first.clone()));
    // The same identity only ever raises the generation.
    let mut lower = first.clone();
    lower.generation = 1;
    assert_eq!(pool.install_mark(T0, &lower).await.unwrap(), first);
    let mut higher = first.clone();
    higher.generation = 9;
    assert_eq!(pool.install_mark(T0, &higher).await.unwrap(), higher);
    // A recovery comes with a new identity, whole.
    let recovering = mark(
        10,
        Some(Recovery {
            lost_at_ms: T0,
            hold_ms: 60_000,
        }),
    );
    assert_eq!(
        pool.install_mark(T0, &recovering).await.unwrap(),
        recovering
    );
    assert_eq!(pool.read_mark().await.unwrap(), Some(recovering));
    // Bad input changes nothing.
    let mut bad = mark(11, None);
    bad.identity = "not-hex".into();
    assert!(matches!(
        pool.install_mark(T0, &bad).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert_eq!(pool.read_mark().await.unwrap().unwrap().generation, 10);
}

pub async fn identity_another_identity_is_lost_and_starts_empty<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let first = mark(1, None);
    pool.install_mark(T0, &first).await.unwrap();
    pool.expect(expecting(&first));
    let ids = seed_range(&pool, T0, "sim", 0, 3).await;
    assert_eq!(pool.footprint().await.unwrap().records, 3);

    // Another incarnation takes the store's place (another controller recovered it).
    let second = mark(2, None);
    pool.install_mark(T0 + 1, &second).await.unwrap();
    lost(
        pool.extract(T0 + 2, extract_request("c1", 1, ExtractMode::Partial))
            .await,
        LossReason::Replaced,
        "extract",
    );
    lost(
        pool.upsert(T0 + 2, batch("sim", vec![candidate(7)])).await,
        LossReason::Replaced,
        "upsert",
    );
    lost(pool.footprint().await, LossReason::Replaced, "footprint");
    lost(
        pool.advance_generation(T0 + 2).await,
        LossReason::Replaced,
        "advance",
    );

    // The new incarnation is empty: nothing of the old one is handed out again.
    pool.expect(expecting(&second));
    assert_eq!(pool.footprint().await.unwrap().records, 0);
    assert!(find_record(&pool, T0 + 3, &ids[0]).await.is_none());
    // Unchecked again, the pool reads the plain keyspace (what tools and tests use).
    pool.expect(None);
    pool.footprint().await.unwrap();
}

pub async fn identity_generation_going_back_is_lost<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let first = mark(5, None);
    pool.install_mark(T0, &first).await.unwrap();
    pool.expect(expecting(&first));
    assert_eq!(pool.advance_generation(T0).await.unwrap(), 6);
    assert_eq!(pool.read_mark().await.unwrap().unwrap().generation, 6);
    // A role that saw generation 7 meets a store at 6: an older copy.
    pool.expect(Some(Expectation {
        identity: first.identity.clone(),
        generation: 7,
    }));
    lost(
        pool.upsert(T0 + 1, batch("sim", vec![candidate(1)])).await,
        LossReason::RolledBack,
        "upsert",
    );
    lost(
        pool.advance_generation(T0 + 1).await,
        LossReason::RolledBack,
        "advance",
    );
    assert_eq!(pool.read_mark().await.unwrap().unwrap().generation, 6);
    pool.expect(Some(Expectation {
        identity: first.identity.clone(),
        generation: 6,
    }));
    assert_eq!(pool.footprint().await.unwrap().records, 0);
    // A store without any mark is missing.
    let fresh = fresh_pool!(factory);
    fresh.expect(Some(Expectation {
        identity: new_identity().unwrap(),
        generation: 1,
    }));
    lost(fresh.footprint().await, LossReason::Missing, "footprint");
    lost(
        fresh.advance_generation(T0).await,
        LossReason::Missing,
        "advance",
    );
}

/// Candidates 0..3 carry no issue time, 3..5 one at the loss, 5..8 one after it.
fn recovery_candidates(lost_at: u64) -> Vec<proxypool_core::Candidate> {
    (0..8)
        .map(|i| {
            let mut c = candidate(i);
            c.issued_at_ms = match i {
                0..3 => None,
                3..5 => Some(lost_at),
                _ => Some(lost_at + 1),
            };
            c
        })
        .collect()
}

pub async fn recovery_withholds_all_but_provably_new_proxies<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let hold = 10_000;
    let recovering = mark(
        2,
        Some(Recovery {
            lost_at_ms: T0,
            hold_ms: hold,
        }),
    );
    pool.install_mark(T0, &recovering).await.unwrap();
    pool.expect(expecting(&recovering));
    let now = T0 + 100;
    let ids = seed_available(&pool, now, "sim", recovery_candidates(T0)).await;

    // Only the provably new ones are assignable or extractable.
    let assignable = pool.assignable(now, 100).await.unwrap();
    let mut offered: Vec<_> = assignable.iter().map(|r| r.id.clone()).collect();
    offered.sort();
    let mut new_ids = ids[5..].to_vec();
    new_ids.sort();
    assert_eq!(offered, new_ids, "only proxies issued after the loss");
    for id in &ids[..5] {
        let record = find_record(&pool, now, id).await.unwrap();
        assert_eq!(record.withheld_until_ms, Some(T0 + hold), "{id}");
        assert!(
            pool.assign(now, id, &worker("gw-1"), 20_000).await.is_err(),
            "a withheld proxy is not assigned"
        );
    }
    let got = pool
        .extract(now, extract_request("c1", 8, ExtractMode::Partial))
        .await
        .unwrap();
    let mut handed: Vec<_> = got.response.proxies.iter().map(|p| p.id.clone()).collect();
    handed.sort();
    assert_eq!(handed, new_ids);

    // Nothing else to hand out: the answer says the store is recovering, and when.
    match pool
        .extract(now, extract_request("c2", 1, ExtractMode::Partial))
        .await
    {
        Err(PoolError::Unavailable(Unavailable::StoreRecovering { retry_after_ms })) => {
            assert_eq!(retry_after_ms, T0 + hold - now);
        }
        other => panic!("expected StoreRecovering, got {other:?}"),
    }
    match pool
        .extract(now, extract_request("c2", 2, ExtractMode::AllOrNothing))
        .await
    {
        Err(PoolError::Unavailable(Unavailable::StoreRecovering { .. })) => {}
        other => panic!("expected StoreRecovering, got {other:?}"),
    }

    // A refresh keeps the hold.
    pool.upsert(now + 1, batch("sim", vec![candidate(0)]))
        .await
        .unwrap();
    let record = find_record(&pool, now + 1, &ids[0]).await.unwrap();
    assert_eq!(record.withheld_until_ms, Some(T0 + hold));

    // Before the hold ends the sweep releases nothing; at its end, everything.
    let early = pool.sweep(T0 + hold - 1, 100).await.unwrap();
    assert_eq!(early.records_released, 0);
    assert!(
        pool.assignable(T0 + hold - 1, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let swept = pool.sweep(T0 + hold, 100).await.unwrap();
    assert_eq!(swept.records_released, 5);
    let got = pool
        .extract(
            T0 + hold,
            extract_request("c3", 8, ExtractMode::AllOrNothing),
        )
        .await
        .unwrap_err();
    // Five left, eight asked: plain insufficiency once nothing is withheld.
    assert!(
        matches!(got, PoolError::InsufficientInventory { matching: 5, .. }),
        "{got:?}"
    );
    let got = pool
        .extract(
            T0 + hold,
            extract_request("c3", 5, ExtractMode::AllOrNothing),
        )
        .await
        .unwrap();
    assert_eq!(got.response.proxies.len(), 5);
}

pub async fn recovery_hold_never_outlives_the_proxy<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    // A hold longer than the proxies live: they are withheld until their own expiry.
    let recovering = mark(
        2,
        Some(Recovery {
            lost_at_ms: T0,
            hold_ms: 10 * TTL_MS,
        }),
    );
    pool.install_mark(T0, &recovering).await.unwrap();
    let ids = seed_available(&pool, T0 + 5, "sim", vec![candidate(1)]).await;
    let record = find_record(&pool, T0 + 5, &ids[0]).await.unwrap();
    assert_eq!(record.withheld_until_ms, Some(record.hard_expiry_ms));
}

pub async fn recovery_ends_when_acknowledged<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let recovering = mark(
        2,
        Some(Recovery {
            lost_at_ms: T0,
            hold_ms: 20_000,
        }),
    );
    pool.install_mark(T0, &recovering).await.unwrap();
    pool.expect(expecting(&recovering));
    let ids = seed_available(&pool, T0 + 1, "sim", recovery_candidates(T0)).await;
    assert_eq!(pool.assignable(T0 + 2, 100).await.unwrap().len(), 3);
    pool.end_recovery(T0 + 2).await.unwrap();
    assert_eq!(pool.read_mark().await.unwrap().unwrap().recovery, None);
    let swept = pool.sweep(T0 + 3, 100).await.unwrap();
    assert_eq!(swept.records_released, 5);
    assert_eq!(pool.assignable(T0 + 3, 100).await.unwrap().len(), ids.len());
    // Records first stored after the acknowledgement are not withheld.
    let more = seed_available(&pool, T0 + 4, "sim", vec![candidate(20)]).await;
    let record = find_record(&pool, T0 + 4, &more[0]).await.unwrap();
    assert_eq!(record.withheld_until_ms, None);
}
