//! Contract: OwnershipRepository (assign, renew, drain, acknowledge, expire, epochs).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{AssignmentState, Conflict, ExtractMode, PoolError};
use std::sync::Arc;

const LEASE: u64 = 10_000;

pub async fn ownership_assign_requires_available_unowned<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    pool.upsert(T0, batch("acme", vec![candidate(9)]))
        .await
        .unwrap();
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let spare = seed_range(&pool, T0, "acme", 10, 1).await;
    let w1 = worker("gw-1");

    let fetched = pool
        .assign(T0 + 1, &candidate_id(9), &w1, LEASE)
        .await
        .unwrap_err();
    assert_eq!(
        fetched,
        PoolError::Conflict(Conflict::Status),
        "FETCHED cannot be assigned"
    );
    let missing = pool
        .assign(T0 + 1, &candidate_id(77), &w1, LEASE)
        .await
        .unwrap_err();
    assert_eq!(missing, PoolError::NotFound);

    let epoch_before = pool.current_epoch(T0 + 1).await.unwrap();
    let assignment = pool.assign(T0 + 1, &ids[0], &w1, LEASE).await.unwrap();
    assert_eq!(assignment.worker, w1);
    assert_eq!(assignment.state, AssignmentState::Active);
    assert_eq!(assignment.lease_until_ms, T0 + 1 + LEASE);
    assert!(assignment.epoch > epoch_before);
    assert_eq!(pool.get(T0 + 2, &ids[0]).await.unwrap(), Some(assignment));

    let twice = pool
        .assign(T0 + 2, &ids[0], &worker("gw-2"), LEASE)
        .await
        .unwrap_err();
    assert_eq!(twice, PoolError::Conflict(Conflict::Ownership));
    let mut only_owned = extract_request("c1", 1, ExtractMode::Partial);
    only_owned.reserve_for_gateway = 1; // the spare stays back, so only the owned one could go
    let out = pool.extract(T0 + 2, only_owned).await.unwrap();
    assert_eq!(
        out.response.returned, 0,
        "an owned proxy is not extractable"
    );
    let late = pool
        .assign(T0 + TTL_MS - MARGIN_MS, &spare[0], &w1, LEASE)
        .await
        .unwrap_err();
    assert_eq!(
        late,
        PoolError::Conflict(Conflict::Status),
        "nothing is assigned past usable_until"
    );
    let cut = pool
        .assign(T0 + TTL_MS - MARGIN_MS - 100, &spare[0], &w1, LEASE)
        .await
        .unwrap();
    assert_eq!(
        cut.lease_until_ms,
        T0 + TTL_MS - MARGIN_MS,
        "lease cut at usable_until"
    );
}

pub async fn ownership_assign_and_extract_race_one_winner<F: PoolFactory>(factory: &F) {
    let pool = Arc::new(fresh_pool!(factory));
    for round in 0..50usize {
        let now = T0 + round as u64;
        let ids = seed_range(&*pool, now, "acme", round, 1).await;
        let assigner = {
            let pool = Arc::clone(&pool);
            let id = ids[0].clone();
            tokio::spawn(async move { pool.assign(now, &id, &worker("gw-1"), LEASE).await.is_ok() })
        };
        let extractor = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move {
                let out = pool
                    .extract(now, extract_request("c1", 1, ExtractMode::Partial))
                    .await
                    .unwrap();
                out.response.returned == 1
            })
        };
        let (assigned, extracted) = (assigner.await.unwrap(), extractor.await.unwrap());
        assert!(
            assigned ^ extracted,
            "round {round}: exactly one must win ({assigned}, {extracted})"
        );
    }
}

pub async fn ownership_renew_checks_worker_epoch_and_cuts_lease<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, LEASE).await.unwrap();

    let wrong_worker = pool
        .renew(T0 + 1, &ids[0], &worker("gw-2"), a.epoch, LEASE)
        .await
        .unwrap_err();
    assert_eq!(wrong_worker, PoolError::Conflict(Conflict::Ownership));
    let wrong_epoch = pool
        .renew(T0 + 1, &ids[0], &w1, a.epoch + 1, LEASE)
        .await
        .unwrap_err();
    assert_eq!(wrong_epoch, PoolError::Conflict(Conflict::Ownership));

    let renewed = pool
        .renew(T0 + 5_000, &ids[0], &w1, a.epoch, LEASE)
        .await
        .unwrap();
    assert_eq!(renewed.lease_until_ms, T0 + 5_000 + LEASE);
    let cut = pool
        .renew(T0 + 14_000, &ids[0], &w1, a.epoch, 60_000)
        .await
        .unwrap();
    assert_eq!(
        cut.lease_until_ms,
        T0 + TTL_MS - MARGIN_MS,
        "lease cut at usable_until"
    );

    let lapsed = pool
        .renew(T0 + TTL_MS - MARGIN_MS, &ids[0], &w1, a.epoch, LEASE)
        .await
        .unwrap_err();
    assert_eq!(lapsed, PoolError::Conflict(Conflict::LeaseExpired));
}

pub async fn ownership_drain_is_idempotent_and_bumps_epoch<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, LEASE).await.unwrap();
    let epoch_before = pool.current_epoch(T0).await.unwrap();

    let drained = pool
        .begin_drain(T0 + 1, &ids[0], &w1, a.epoch)
        .await
        .unwrap();
    let AssignmentState::Draining { drain_epoch } = drained.state else {
        panic!("not draining")
    };
    assert!(drain_epoch > epoch_before);
    assert_eq!(pool.current_epoch(T0).await.unwrap(), drain_epoch);
    let again = pool
        .begin_drain(T0 + 2, &ids[0], &w1, a.epoch)
        .await
        .unwrap();
    assert_eq!(again, drained, "a repeated drain changes nothing");
    assert_eq!(pool.current_epoch(T0).await.unwrap(), drain_epoch);
    let foreign = pool
        .begin_drain(T0 + 2, &ids[0], &worker("gw-2"), a.epoch)
        .await
        .unwrap_err();
    assert_eq!(foreign, PoolError::Conflict(Conflict::Ownership));
    assert!(
        pool.owned_by(T0 + 2, &w1, 10).await.unwrap().is_empty(),
        "draining is not served"
    );
    assert_eq!(
        pool.draining_of(T0 + 2, &w1, 10).await.unwrap(),
        vec![drained]
    );
}

pub async fn ownership_ack_requires_idle<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, LEASE).await.unwrap();

    let active_state = pool
        .acknowledge_drain(T0 + 1, &ids[0], &w1, a.epoch, 0, 0)
        .await
        .unwrap_err();
    assert_eq!(
        active_state,
        PoolError::Conflict(Conflict::Status),
        "only a draining proxy is acked"
    );
    pool.begin_drain(T0 + 1, &ids[0], &w1, a.epoch)
        .await
        .unwrap();
    for (active, reserved) in [(1, 0), (0, 1)] {
        let busy = pool
            .acknowledge_drain(T0 + 2, &ids[0], &w1, a.epoch, active, reserved)
            .await
            .unwrap_err();
        assert_eq!(busy, PoolError::Conflict(Conflict::NotDrained));
    }
    assert!(pool.get(T0 + 2, &ids[0]).await.unwrap().is_some());
    pool.acknowledge_drain(T0 + 3, &ids[0], &w1, a.epoch, 0, 0)
        .await
        .unwrap();
    assert_eq!(pool.get(T0 + 3, &ids[0]).await.unwrap(), None);
    let out = pool
        .extract(T0 + 3, extract_request("c1", 1, ExtractMode::Partial))
        .await
        .unwrap();
    assert_eq!(
        out.response.returned, 1,
        "a released proxy is available again"
    );
}

pub async fn ownership_expire_is_batched_and_returns_to_pool<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 5).await;
    let w1 = worker("gw-1");
    for id in &ids {
        pool.assign(T0, id, &w1, LEASE).await.unwrap();
    }
    assert!(pool.expire(T0 + LEASE - 1, 10).await.unwrap().is_empty());
    let first = pool.expire(T0 + LEASE, 3).await.unwrap();
    assert_eq!(first.len(), 3, "never more than the limit");
    let rest = pool.expire(T0 + LEASE, 10).await.unwrap();
    assert_eq!(rest.len(), 2);
    assert!(pool.expire(T0 + LEASE, 10).await.unwrap().is_empty());
    assert_eq!(pool.assignable(T0 + LEASE, 10).await.unwrap().len(), 5);
    let reassigned = pool
        .assign(T0 + LEASE, &ids[0], &worker("gw-2"), LEASE)
        .await
        .unwrap();
    assert_eq!(reassigned.worker, worker("gw-2"));
}

pub async fn ownership_owned_by_lists_serving_only<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 3).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    pool.assign(T0, &ids[0], &w1, LEASE).await.unwrap();
    pool.assign(T0, &ids[1], &w1, 2_000).await.unwrap();
    pool.assign(T0, &ids[2], &w2, LEASE).await.unwrap();

    let owned = pool.owned_by(T0 + 1, &w1, 10).await.unwrap();
    assert_eq!(owned.len(), 2);
    assert!(
        owned
            .iter()
            .all(|o| o.assignment.worker == w1 && o.record.credentials.is_some())
    );
    let later = pool.owned_by(T0 + 2_000, &w1, 10).await.unwrap();
    assert_eq!(later.len(), 1, "a lapsed lease is not served");
    assert_eq!(later[0].record.id, ids[0]);
    assert_eq!(
        pool.owned_by(T0 + 1, &w1, 1).await.unwrap().len(),
        1,
        "limit holds"
    );
}

/// A crashed worker's proxies (serving and draining) come back once its session lapses;
/// a worker whose session is live keeps them, also one that registered a new session
/// after its old one lapsed.
pub async fn ownership_release_orphaned_spares_live_sessions<F: PoolFactory>(factory: &F) {
    const SESSION: u64 = 5_000;
    const LONG_LEASE: u64 = 60_000;
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 5).await;
    let (crashed, live, blip) = (worker("gw-1"), worker("gw-2"), worker("gw-3"));
    for (worker, session) in [(&crashed, "c"), (&live, "l"), (&blip, "b")] {
        pool.open_session(T0, worker, session, SESSION)
            .await
            .unwrap();
    }
    let serving = pool
        .assign(T0, &ids[0], &crashed, LONG_LEASE)
        .await
        .unwrap();
    let busy = pool
        .assign(T0, &ids[1], &crashed, LONG_LEASE)
        .await
        .unwrap();
    pool.begin_drain(T0, &ids[1], &crashed, busy.epoch)
        .await
        .unwrap();
    let kept = pool.assign(T0, &ids[2], &live, LONG_LEASE).await.unwrap();
    let kept_after_blip = pool.assign(T0, &ids[3], &blip, LONG_LEASE).await.unwrap();

    assert!(
        pool.release_orphaned(T0 + SESSION - 1, 10)
            .await
            .unwrap()
            .is_empty(),
        "every session is still live"
    );
    let later = T0 + SESSION + 1_000;
    pool.renew_session(T0 + SESSION - 1, &live, "l", SESSION)
        .await
        .unwrap();
    pool.open_session(later, &blip, "b-again", SESSION)
        .await
        .unwrap();

    let first = pool.release_orphaned(later, 1).await.unwrap();
    assert_eq!(first.len(), 1, "never more than the limit");
    let rest = pool.release_orphaned(later, 10).await.unwrap();
    let mut released: Vec<_> = first
        .iter()
        .chain(&rest)
        .map(|a| a.proxy_id.clone())
        .collect();
    released.sort();
    let mut expected = vec![serving.proxy_id.clone(), busy.proxy_id.clone()];
    expected.sort();
    assert_eq!(released, expected, "the serving and the draining lease");
    assert!(first.iter().chain(&rest).all(|a| a.worker == crashed));
    assert!(pool.release_orphaned(later, 10).await.unwrap().is_empty());

    assert_eq!(pool.get(later, &ids[0]).await.unwrap(), None);
    assert_eq!(pool.get(later, &ids[1]).await.unwrap(), None);
    assert_eq!(pool.get(later, &ids[2]).await.unwrap(), Some(kept));
    assert_eq!(
        pool.get(later, &ids[3]).await.unwrap(),
        Some(kept_after_blip)
    );
    let mut assignable: Vec<_> = pool
        .assignable(later, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assignable.sort();
    let mut free = vec![ids[0].clone(), ids[1].clone(), ids[4].clone()];
    free.sort();
    assert_eq!(assignable, free, "released proxies are assignable again");
    let taken = pool.assign(later, &ids[0], &live, LEASE).await.unwrap();
    assert_eq!(taken.worker, live);
}
