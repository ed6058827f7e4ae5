//! Contract: LeaseStore (one holder at a time, renewal, takeover after lapse, fencing).
//!
//! Run through [`lease_contract_suite!`](crate::lease_contract_suite) by every adapter
//! that implements [`LeaseStore`].

use super::factory::PoolFactory;
use super::fixtures::T0;
use crate::fresh_pool;
use proxypool_core::{LeaseStore, PoolError};
use std::sync::Arc;

pub async fn lease_one_holder_at_a_time<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = fresh_pool!(factory);
    let a = pool
        .try_acquire(T0, "controller", "a", 1_000)
        .await
        .unwrap()
        .expect("free lease");
    assert_eq!((a.holder.as_str(), a.expires_at_ms), ("a", T0 + 1_000));
    assert_eq!(
        pool.try_acquire(T0 + 10, "controller", "b", 1_000)
            .await
            .unwrap(),
        None
    );
    let other = pool
        .try_acquire(T0 + 10, "other-lease", "b", 1_000)
        .await
        .unwrap();
    assert!(other.is_some(), "leases are independent by name");
    assert_eq!(pool.current(T0 + 10, "controller").await.unwrap(), Some(a));
}

pub async fn lease_renewal_keeps_token_and_takeover_bumps_it<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = fresh_pool!(factory);
    let first = pool
        .try_acquire(T0, "controller", "a", 1_000)
        .await
        .unwrap()
        .unwrap();
    let renewed = pool
        .try_acquire(T0 + 900, "controller", "a", 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (renewed.token, renewed.expires_at_ms),
        (first.token, T0 + 1_900)
    );
    assert_eq!(
        pool.try_acquire(T0 + 1_899, "controller", "b", 1_000)
            .await
            .unwrap(),
        None
    );
    let taken = pool
        .try_acquire(T0 + 1_900, "controller", "b", 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.holder, "b");
    assert!(
        taken.token > first.token,
        "a new holder gets a larger fencing token"
    );
    // The old holder's release is ignored; the new holder's works and tokens keep growing.
    pool.release(T0 + 1_901, "controller", "a", first.token)
        .await
        .unwrap();
    assert_eq!(
        pool.current(T0 + 1_901, "controller")
            .await
            .unwrap()
            .unwrap()
            .holder,
        "b"
    );
    pool.release(T0 + 1_902, "controller", "b", taken.token)
        .await
        .unwrap();
    assert_eq!(pool.current(T0 + 1_902, "controller").await.unwrap(), None);
    let again = pool
        .try_acquire(T0 + 1_903, "controller", "a", 1_000)
        .await
        .unwrap()
        .unwrap();
    assert!(again.token > taken.token);
    assert!(matches!(
        pool.try_acquire(T0, "controller", "a", 0).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert!(matches!(
        pool.try_acquire(T0, "bad name", "a", 10).await,
        Err(PoolError::InvalidInput(_))
    ));
}

pub async fn lease_concurrent_acquire_has_one_winner<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = Arc::new(fresh_pool!(factory));
    for round in 0..20u64 {
        let now = T0 + round * 10_000;
        let mut tasks = Vec::new();
        for holder in 0..8 {
            let pool = Arc::clone(&pool);
            tasks.push(tokio::spawn(async move {
                pool.try_acquire(now, &format!("race-{round}"), &format!("h{holder}"), 5_000)
                    .await
                    .unwrap()
                    .is_some()
            }));
        }
        let mut winners = 0;
        for task in tasks {
            winners += usize::from(task.await.unwrap());
        }
        assert_eq!(winners, 1, "round {round}");
    }
}
