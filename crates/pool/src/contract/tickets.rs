//! Contract: TicketKeyStore (the key of the gateways' feedback tickets): made once, the same
//! for every caller, racing ones included, and one per store incarnation.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{Expectation, StoreIdentity, StoreMark, TicketKeyStore};
use std::sync::Arc;

pub async fn tickets_key_is_made_once_and_kept<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let first = pool.ticket_key(T0).await.unwrap();
    assert_eq!(pool.ticket_key(T0 + 1).await.unwrap(), first);
    // Much later, and through another handle on the same store, still the same key.
    let later = T0 + 30 * 24 * 3_600_000;
    assert_eq!(pool.ticket_key(later).await.unwrap(), first);
    // Another store has a key of its own.
    let other = fresh_pool!(factory);
    assert_ne!(other.ticket_key(T0).await.unwrap(), first);
}

pub async fn tickets_concurrent_callers_get_one_key<F: PoolFactory>(factory: &F) {
    let pool = Arc::new(fresh_pool!(factory));
    let mut tasks = Vec::new();
    for caller in 0..32u64 {
        let pool = Arc::clone(&pool);
        tasks.push(tokio::spawn(async move {
            pool.ticket_key(T0 + caller % 3).await.unwrap()
        }));
    }
    let mut keys = Vec::new();
    for task in tasks {
        keys.push(task.await.unwrap());
    }
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "every caller gets one key"
    );
    assert_eq!(pool.ticket_key(T0 + 10).await.unwrap(), keys[0]);
}

pub async fn tickets_a_new_incarnation_has_a_new_key<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let expecting = |mark: &StoreMark| {
        Some(Expectation {
            identity: mark.identity.clone(),
            generation: mark.generation,
        })
    };
    let first = StoreMark::fresh(1, None).unwrap();
    pool.install_mark(T0, &first).await.unwrap();
    pool.expect(expecting(&first));
    let key = pool.ticket_key(T0).await.unwrap();
    assert_eq!(pool.ticket_key(T0 + 1).await.unwrap(), key);
    // Another incarnation takes the store's place: tickets under the old key end with it.
    let second = StoreMark::fresh(2, None).unwrap();
    pool.install_mark(T0 + 2, &second).await.unwrap();
    assert!(
        pool.ticket_key(T0 + 3).await.is_err(),
        "the old incarnation is lost"
    );
    pool.expect(expecting(&second));
    let renewed = pool.ticket_key(T0 + 3).await.unwrap();
    assert_ne!(renewed, key);
    assert_eq!(pool.ticket_key(T0 + 4).await.unwrap(), renewed);
}
