//! Contract: fenced handles (a leader's writes carry its term; once another controller
//! holds the lease, or the lease lapsed, every call of the old term is refused with
//! `Conflict::StaleTerm` and changes nothing).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    AdminStore, CheckOutcome, Conflict, CooldownChange, CooldownStore, Domain, DomainCooldown,
    Fence, Fencing, HealthBatch, HealthObservation, LeaseStore, PoolError, ProviderStatus,
    SessionFeedback, Verdict,
};

const LEASE_MS: u64 = 1_000;
const OWNERSHIP_MS: u64 = 20_000;

fn stale<T: std::fmt::Debug>(result: Result<T, PoolError>, call: &str) {
    match result {
        Err(PoolError::Conflict(Conflict::StaleTerm)) => {}
        other => panic!("{call} through a stale term must be refused, got {other:?}"),
    }
}

pub async fn fencing_refuses_every_write_of_an_older_term<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = fresh_pool!(factory);
    let first = pool
        .try_acquire(T0, "controller", "a", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    let old = pool.fenced(Fence::new("controller", "a", first.token));
    let w1 = worker("gw-1");

    // While the term is live, the fenced handle works like the plain one.
    let ids = seed_range(old.as_ref(), T0 + 1, "sim", 0, 3).await;
    let held = old
        .assign(T0 + 2, &ids[0], &w1, OWNERSHIP_MS)
        .await
        .unwrap();
    let epoch_before = pool.current_epoch(T0 + 2).await.unwrap();
    // One proxy extracted under the live term, for the stale return below.
    let kept = seed_range(old.as_ref(), T0 + 2, "other", 10, 1).await;
    let mut request = extract_request("c1", 1, proxypool_core::ExtractMode::AllOrNothing);
    request.filter.upstream = Some(upstream("other"));
    old.extract(T0 + 3, request).await.unwrap();

    // "a" stalls past its lease; "b" takes over.
    let taken = T0 + LEASE_MS + 1;
    let second = pool
        .try_acquire(taken, "controller", "b", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    assert!(second.token > first.token);
    let footprint = pool.footprint().await.unwrap();
    let version_before = pool.snapshot_version(taken, &w1).await.unwrap();

    let now = taken + 1;
    stale(
        old.upsert(now, batch("sim", vec![candidate(7)])).await,
        "upsert",
    );
    stale(
        old.apply_health(
            now,
            HealthBatch {
                observations: vec![HealthObservation {
                    proxy_id: ids[1].clone(),
                    checked_at_ms: now,
                    outcome: CheckOutcome::Failure {
                        error: "timeout".into(),
                    },
                }],
                unhealthy_after_failures: 1,
            },
        )
        .await,
        "apply_health",
    );
    stale(old.assign(now, &ids[1], &w1, OWNERSHIP_MS).await, "assign");
    stale(
        old.renew(now, &ids[0], &w1, held.epoch, OWNERSHIP_MS).await,
        "renew",
    );
    stale(
        old.begin_drain(now, &ids[0], &w1, held.epoch).await,
        "begin_drain",
    );
    stale(
        old.acknowledge_drain(now, &ids[0], &w1, held.epoch, 0, 0)
            .await,
        "acknowledge_drain",
    );
    stale(old.expire(now + OWNERSHIP_MS, 10).await, "expire");
    stale(
        old.release_orphaned(now + OWNERSHIP_MS, 10).await,
        "release_orphaned",
    );
    stale(old.sweep(now + 10 * TTL_MS, 10).await, "sweep");
    stale(
        old.put_provider_status(
            now,
            &ProviderStatus {
                upstream: Some(upstream("sim")),
                ..ProviderStatus::default()
            },
        )
        .await,
        "put_provider_status",
    );

    let ban = CooldownChange::Set(DomainCooldown {
        project: None,
        proxy_id: ids[1].clone(),
        domain: Domain::new("shop.test").unwrap(),
        until_ms: now + 1_000,
        strikes: 1,
        forget_at_ms: now + 2_000,
    });
    stale(old.apply_cooldowns(now, &[ban]).await, "apply_cooldowns");
    stale(
        old.add_session_feedback(
            now,
            SessionFeedback {
                project: None,
                id: "f1".into(),
                client: client("c1"),
                session: "s1".into(),
                domain: Domain::new("shop.test").unwrap(),
                verdict: Verdict::Banned,
                ttl_ms: None,
                expires_at_ms: now + 1_000,
            },
        )
        .await,
        "add_session_feedback",
    );
    stale(
        old.return_extracted(now, &client("c1"), &kept[0]).await,
        "return_extracted",
    );
    assert!(pool.cooldowns_of(now, &ids).await.unwrap().is_empty());
    assert!(pool.session_feedback(now, 10).await.unwrap().is_empty());
    assert!(
        find_record(&pool, now, &kept[0]).await.is_none(),
        "still EXTRACTED"
    );

    // Nothing changed: same keys, same owner and lease, same epoch, same health.
    assert_eq!(pool.footprint().await.unwrap(), footprint);
    assert_eq!(pool.get(now, &ids[0]).await.unwrap(), Some(held.clone()));
    assert_eq!(pool.get(now, &ids[1]).await.unwrap(), None);
    assert_eq!(pool.current_epoch(now).await.unwrap(), epoch_before);
    assert_eq!(
        pool.snapshot_version(now, &w1).await.unwrap(),
        version_before,
        "no refused write moves a snapshot version"
    );
    assert!(pool.provider_statuses().await.unwrap().is_empty());
    let record = find_record(&pool, now, &ids[1]).await.unwrap();
    assert_eq!(record.status, proxypool_core::ProxyStatus::Available);

    // The new term writes.
    let new = pool.fenced(Fence::new("controller", "b", second.token));
    new.renew(now, &ids[0], &w1, held.epoch, OWNERSHIP_MS)
        .await
        .unwrap();
    new.assign(now, &ids[1], &w1, OWNERSHIP_MS).await.unwrap();
}

pub async fn fencing_refuses_a_lapsed_term_and_another_lease_s_token<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = fresh_pool!(factory);
    let lease = pool
        .try_acquire(T0, "controller", "a", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    let ids = seed_range(&pool, T0, "sim", 0, 2).await;
    let w1 = worker("gw-1");
    let fenced = pool.fenced(Fence::new("controller", "a", lease.token));
    // Lapsed, nobody took it: still refused (the term is over even without a successor).
    stale(
        fenced
            .assign(T0 + LEASE_MS, &ids[0], &w1, OWNERSHIP_MS)
            .await,
        "assign after the lease lapsed",
    );
    // A token of another lease name, or a token never handed out, is no term at all.
    let other = pool.fenced(Fence::new("other", "a", lease.token));
    stale(
        other.assign(T0 + 1, &ids[0], &w1, OWNERSHIP_MS).await,
        "assign under another lease",
    );
    let forged = pool.fenced(Fence::new("controller", "a", lease.token + 1));
    stale(
        forged.assign(T0 + 1, &ids[0], &w1, OWNERSHIP_MS).await,
        "assign with a forged token",
    );
    assert_eq!(pool.get(T0 + 1, &ids[0]).await.unwrap(), None);
    // Renewed in time, the same term keeps writing.
    pool.try_acquire(T0 + LEASE_MS - 1, "controller", "a", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    fenced
        .assign(T0 + LEASE_MS, &ids[0], &w1, OWNERSHIP_MS)
        .await
        .unwrap();
}

pub async fn fencing_compares_the_holder_and_tokens_never_repeat<F: PoolFactory>(factory: &F)
where
    F::Pool: LeaseStore,
{
    let pool = fresh_pool!(factory);
    let lease = pool
        .try_acquire(T0, "controller", "a", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    // A token is never below the time it was issued at, so a store that lost its memory
    // (and its last token) does not hand out a token an earlier term held.
    assert!(lease.token >= T0, "token {} below its time", lease.token);
    let ids = seed_range(&pool, T0, "sim", 0, 1).await;
    let w1 = worker("gw-1");
    // The right token under another holder's name is no term.
    let impostor = pool.fenced(Fence::new("controller", "b", lease.token));
    stale(
        impostor.assign(T0 + 1, &ids[0], &w1, OWNERSHIP_MS).await,
        "assign under another holder",
    );
    stale(impostor.footprint().await, "a read under another holder");
    assert_eq!(pool.get(T0 + 1, &ids[0]).await.unwrap(), None);
    // The lease changes hands later: the new token is above both the old one and the time.
    let later = T0 + 10 * LEASE_MS;
    let next = pool
        .try_acquire(later, "controller", "b", LEASE_MS)
        .await
        .unwrap()
        .unwrap();
    assert!(next.token > lease.token && next.token >= later);
}
