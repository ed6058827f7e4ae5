//! Contract: AdminStore (worker modes and provider status are shared state: whatever one
//! handle writes, every handle on the same store reads; bad input changes nothing).

use super::factory::PoolFactory;
use super::fixtures::{T0, client, upstream, worker};
use crate::fresh_pool;
use proxypool_core::admin::MAX_PROVIDER_STATUS_BYTES;
use proxypool_core::{AdminStore, Conflict, KeyedCall, PoolError, ProviderStatus, WorkerMode};

pub async fn admin_worker_modes_round_trip<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    assert!(pool.worker_modes().await.unwrap().is_empty());

    let cordoned = pool
        .set_worker_mode(T0, &worker("w2"), WorkerMode::Cordoned)
        .await
        .unwrap();
    assert_eq!(
        (cordoned.mode, cordoned.since_ms),
        (WorkerMode::Cordoned, T0)
    );
    // The same mode again keeps the time it was first set.
    let again = pool
        .set_worker_mode(T0 + 500, &worker("w2"), WorkerMode::Cordoned)
        .await
        .unwrap();
    assert_eq!(again.since_ms, T0);
    pool.set_worker_mode(T0 + 10, &worker("w1"), WorkerMode::Draining)
        .await
        .unwrap();
    let modes = pool.worker_modes().await.unwrap();
    let listed: Vec<_> = modes
        .iter()
        .map(|m| (m.worker.as_str(), m.mode, m.since_ms))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("w1", WorkerMode::Draining, T0 + 10),
            ("w2", WorkerMode::Cordoned, T0)
        ],
        "ordered by worker"
    );

    // A new mode restarts the clock; `Active` forgets the record.
    let drained = pool
        .set_worker_mode(T0 + 20, &worker("w2"), WorkerMode::Draining)
        .await
        .unwrap();
    assert_eq!(drained.since_ms, T0 + 20);
    pool.set_worker_mode(T0 + 30, &worker("w1"), WorkerMode::Active)
        .await
        .unwrap();
    let modes = pool.worker_modes().await.unwrap();
    assert_eq!(modes.len(), 1);
    assert_eq!(
        (modes[0].worker.as_str(), modes[0].mode),
        ("w2", WorkerMode::Draining)
    );
}

fn status(name: &str, fetched: u32) -> ProviderStatus {
    ProviderStatus {
        upstream: Some(upstream(name)),
        last_attempt_ms: Some(T0),
        last_success_ms: Some(T0),
        last_fetched: fetched,
        total_fetches: 3,
        last_dropped: [("malformed".to_owned(), 2)].into_iter().collect(),
        ..ProviderStatus::default()
    }
}

pub async fn admin_provider_status_replaces_per_upstream<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    assert!(pool.provider_statuses().await.unwrap().is_empty());
    pool.put_provider_status(T0, &status("zeta", 4))
        .await
        .unwrap();
    pool.put_provider_status(T0, &status("alpha", 7))
        .await
        .unwrap();
    let mut newer = status("zeta", 9);
    newer.last_error = Some("timeout".into());
    newer.consecutive_failures = 1;
    pool.put_provider_status(T0 + 1, &newer).await.unwrap();
    assert_eq!(
        pool.provider_statuses().await.unwrap(),
        vec![status("alpha", 7), newer],
        "one status per upstream, ordered by upstream, exactly as written"
    );
}

pub async fn admin_bad_provider_status_changes_nothing<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    pool.put_provider_status(T0, &status("sim", 4))
        .await
        .unwrap();
    let nameless = ProviderStatus {
        upstream: None,
        ..status("sim", 5)
    };
    assert!(matches!(
        pool.put_provider_status(T0, &nameless).await,
        Err(PoolError::InvalidInput(_))
    ));
    let mut huge = status("sim", 6);
    huge.last_dropped = (0..MAX_PROVIDER_STATUS_BYTES / 8)
        .map(|i| (format!("reason-{i}"), 1))
        .collect();
    assert!(matches!(
        pool.put_provider_status(T0, &huge).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert_eq!(
        pool.provider_statuses().await.unwrap(),
        vec![status("sim", 4)]
    );
}

/// A keyed mode change acts once: a reuse of the key by the same client replays the first
/// answer and changes nothing, even after another change; the key with another worker or
/// mode is a conflict; another client's same key is its own; past its hold the key acts
/// again; a bad key changes nothing.
pub async fn admin_keyed_mode_changes_replay_their_answer<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let call = |who: &str, key: &str| KeyedCall {
        client: client(who),
        key: key.to_owned(),
        held_ms: 60_000,
    };
    let drain = call("ops", "k-1");
    let first = pool
        .set_worker_mode_keyed(T0, &worker("w1"), WorkerMode::Draining, &drain)
        .await
        .unwrap();
    assert!(!first.replayed);
    assert_eq!(
        (first.record.mode, first.record.since_ms),
        (WorkerMode::Draining, T0)
    );

    // Uncordoned since: the retried drain replays its answer and leaves the worker active.
    pool.set_worker_mode(T0 + 10, &worker("w1"), WorkerMode::Active)
        .await
        .unwrap();
    let retried = pool
        .set_worker_mode_keyed(T0 + 20, &worker("w1"), WorkerMode::Draining, &drain)
        .await
        .unwrap();
    assert!(retried.replayed);
    assert_eq!(retried.record, first.record);
    assert!(
        pool.worker_modes().await.unwrap().is_empty(),
        "the replay acted"
    );

    // The key with another action: refused, nothing changed.
    for (who, mode) in [("w1", WorkerMode::Cordoned), ("w2", WorkerMode::Draining)] {
        let refused = pool
            .set_worker_mode_keyed(T0 + 30, &worker(who), mode, &drain)
            .await
            .unwrap_err();
        assert_eq!(refused, PoolError::Conflict(Conflict::IdempotencyDigest));
    }
    assert!(pool.worker_modes().await.unwrap().is_empty());

    // Another client's same key is not this one's.
    let other = pool
        .set_worker_mode_keyed(
            T0 + 40,
            &worker("w2"),
            WorkerMode::Cordoned,
            &call("ci", "k-1"),
        )
        .await
        .unwrap();
    assert!(!other.replayed);
    assert_eq!(pool.worker_modes().await.unwrap().len(), 1);

    // Past its hold the key acts again.
    let later = pool
        .set_worker_mode_keyed(T0 + 60_001, &worker("w1"), WorkerMode::Draining, &drain)
        .await
        .unwrap();
    assert!(!later.replayed);
    assert_eq!(later.record.since_ms, T0 + 60_001);

    // A bad key changes nothing.
    let bad = pool
        .set_worker_mode_keyed(
            T0 + 60_002,
            &worker("w3"),
            WorkerMode::Draining,
            &call("ops", "bad key"),
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, PoolError::InvalidInput(_)), "{bad:?}");
    assert_eq!(pool.worker_modes().await.unwrap().len(), 2);
}
