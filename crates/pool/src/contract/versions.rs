//! Contract: snapshot versions (`WorkerRuntimeStore::snapshot_version`). Every kind of
//! write that may change what a worker's snapshot lists moves that worker's counter; writes
//! that concern only other workers' proxies leave it alone; new session feedback moves the
//! shared feedback counter. Only movement is promised, never by how much.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    ActivityPool, CheckOutcome, CooldownChange, CooldownStore, Domain, DomainCooldown, HealthBatch,
    HealthObservation, ProxyId, ProxyRuntime, RuntimeReport, SessionFeedback, SnapshotRef,
    SnapshotVersion, UnixMillis, Verdict, WorkerId,
};

const LEASE_MS: u64 = 10_000;
const SESSION_TTL: u64 = 15_000;

/// The worker's counters. They carry no time, so every read here is at `T0` (a read's
/// `now` dates only what a sharded store writes to raise its groups to one value).
async fn version<P: ActivityPool>(pool: &P, worker: &WorkerId) -> SnapshotVersion {
    pool.snapshot_version(T0, worker).await.unwrap()
}

/// Asserts that `write` moved `moved`'s counter and left each of `still`'s alone.
struct Watch {
    moved: WorkerId,
    still: Vec<WorkerId>,
}

impl Watch {
    async fn before<P: ActivityPool>(&self, pool: &P) -> (u64, Vec<u64>) {
        let mut still = Vec::new();
        for w in &self.still {
            still.push(version(pool, w).await.worker);
        }
        (version(pool, &self.moved).await.worker, still)
    }

    async fn check<P: ActivityPool>(&self, pool: &P, before: (u64, Vec<u64>), write: &str) {
        let (moved_before, still_before) = before;
        assert!(
            version(pool, &self.moved).await.worker > moved_before,
            "{write} must move {}'s snapshot version",
            self.moved
        );
        for (w, was) in self.still.iter().zip(still_before) {
            assert_eq!(
                version(pool, w).await.worker,
                was,
                "{write} must not move {w}'s snapshot version"
            );
        }
    }
}

fn observation(id: &ProxyId, now: UnixMillis, ok: bool) -> HealthBatch {
    HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: if ok {
                CheckOutcome::Success { latency_ms: 40 }
            } else {
                CheckOutcome::Failure {
                    error: "timeout".into(),
                }
            },
        }],
        unhealthy_after_failures: 3,
    }
}

fn cooldown(id: &ProxyId, now: UnixMillis) -> CooldownChange {
    CooldownChange::Set(DomainCooldown {
        project: None,
        proxy_id: id.clone(),
        domain: Domain::new("shop.test").unwrap(),
        until_ms: now + 1_000,
        strikes: 1,
        forget_at_ms: now + 5_000,
    })
}

pub async fn versions_start_at_zero_and_are_per_worker<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    assert_eq!(version(&pool, &w1).await, SnapshotVersion::default());
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    assert_eq!(
        version(&pool, &w1).await,
        SnapshotVersion::default(),
        "records nobody holds concern no worker"
    );
    pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    assert!(version(&pool, &w1).await.worker > 0);
    assert_eq!(version(&pool, &w2).await, SnapshotVersion::default());
}

pub async fn versions_move_with_every_ownership_write<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 4).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    let mine = Watch {
        moved: w1.clone(),
        still: vec![w2.clone()],
    };
    let theirs = Watch {
        moved: w2.clone(),
        still: vec![w1.clone()],
    };

    let b = mine.before(&pool).await;
    let a0 = pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    mine.check(&pool, b, "assign").await;

    let b = theirs.before(&pool).await;
    // A longer lease than w1's, so expiring w1's leaves it alone.
    pool.assign(T0, &ids[1], &w2, 2 * LEASE_MS).await.unwrap();
    theirs.check(&pool, b, "assign to another worker").await;

    let b = mine.before(&pool).await;
    let a0 = pool
        .renew(T0 + 1, &ids[0], &w1, a0.epoch, LEASE_MS)
        .await
        .unwrap();
    mine.check(&pool, b, "renew").await;

    let b = mine.before(&pool).await;
    pool.begin_drain(T0 + 2, &ids[0], &w1, a0.epoch)
        .await
        .unwrap();
    mine.check(&pool, b, "begin_drain").await;

    let b = mine.before(&pool).await;
    pool.acknowledge_drain(T0 + 3, &ids[0], &w1, a0.epoch, 0, 0)
        .await
        .unwrap();
    mine.check(&pool, b, "acknowledge_drain").await;

    // A refused write changes nothing, its version included.
    let (before_w1, before_w2) = (version(&pool, &w1).await, version(&pool, &w2).await);
    let refused = pool.renew(T0 + 4, &ids[0], &w1, a0.epoch, LEASE_MS).await;
    assert!(refused.is_err(), "the drained proxy is no longer w1's");
    assert_eq!(version(&pool, &w1).await, before_w1, "a refused renew");
    assert_eq!(version(&pool, &w2).await, before_w2);

    pool.assign(T0 + 5, &ids[2], &w1, LEASE_MS).await.unwrap();
    let b = mine.before(&pool).await;
    let expired = pool.expire(T0 + 5 + LEASE_MS, 100).await.unwrap();
    assert_eq!(expired.len(), 1, "only w1's lease lapsed");
    mine.check(&pool, b, "expire").await;

    // w2 has a live session; w1 has none, so its proxies are orphaned.
    let now = T0 + 6 + LEASE_MS;
    pool.open_session(now, &w2, "s2", SESSION_TTL)
        .await
        .unwrap();
    pool.assign(now, &ids[3], &w1, LEASE_MS).await.unwrap();
    let b = mine.before(&pool).await;
    let released = pool.release_orphaned(now + 1, 100).await.unwrap();
    assert_eq!(released.len(), 1);
    mine.check(&pool, b, "release_orphaned").await;
}

pub async fn versions_move_with_changes_to_held_proxies<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 3).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    pool.assign(T0, &ids[0], &w1, 60_000).await.unwrap();
    pool.assign(T0, &ids[1], &w2, 60_000).await.unwrap();
    let mine = Watch {
        moved: w1.clone(),
        still: vec![w2.clone()],
    };
    let theirs = Watch {
        moved: w2.clone(),
        still: vec![w1.clone()],
    };

    // The checker re-checks held proxies all the time; one that stays AVAILABLE changes
    // nothing a snapshot carries, and an unheld proxy's check concerns nobody.
    let (before_w1, before_w2) = (version(&pool, &w1).await, version(&pool, &w2).await);
    pool.apply_health(T0 + 1, observation(&ids[0], T0 + 1, true))
        .await
        .unwrap();
    pool.apply_health(T0 + 1, observation(&ids[2], T0 + 1, false))
        .await
        .unwrap();
    assert_eq!(version(&pool, &w1).await, before_w1, "a passing re-check");
    assert_eq!(
        version(&pool, &w2).await,
        before_w2,
        "an unheld proxy's check"
    );

    let b = mine.before(&pool).await;
    pool.apply_health(T0 + 2, observation(&ids[0], T0 + 2, false))
        .await
        .unwrap();
    mine.check(&pool, b, "a failed check of a held proxy").await;

    // The vendor list again, later: the held proxy's usable-until moves.
    let b = theirs.before(&pool).await;
    let report = pool
        .upsert(T0 + 3, batch("acme", vec![candidate(1)]))
        .await
        .unwrap();
    assert_eq!(report.refreshed, 1);
    theirs.check(&pool, b, "a refresh of a held proxy").await;

    let b = theirs.before(&pool).await;
    let applied = pool
        .apply_cooldowns(T0 + 4, &[cooldown(&ids[1], T0 + 4)])
        .await
        .unwrap();
    assert_eq!(applied.applied, 1);
    theirs.check(&pool, b, "a cooldown on a held proxy").await;

    // Hard expiry removes the record with its assignment, whoever gets there first.
    let b = mine.before(&pool).await;
    let end = T0 + TTL_MS;
    pool.sweep(end, 100).await.unwrap();
    assert!(pool.get(end, &ids[0]).await.unwrap().is_none());
    assert!(
        version(&pool, &w1).await.worker > b.0,
        "a sweep of a held record"
    );
}

pub async fn versions_move_with_sessions_reports_and_feedback<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    let mine = Watch {
        moved: w1.clone(),
        still: vec![w2.clone()],
    };

    let b = mine.before(&pool).await;
    pool.open_session(T0, &w1, "s1", SESSION_TTL).await.unwrap();
    mine.check(&pool, b, "open_session").await;

    let b = mine.before(&pool).await;
    pool.open_session(T0 + 1, &w1, "s2", SESSION_TTL)
        .await
        .unwrap();
    mine.check(&pool, b, "a session replacing another").await;

    // A report naming a proxy w1 does not hold as busy: stale.
    pool.assign(T0 + 2, &ids[1], &w2, LEASE_MS).await.unwrap();
    let snap = SnapshotRef {
        version: 1,
        epoch: pool.current_epoch(T0 + 2).await.unwrap(),
        checksum: "sum".into(),
    };
    pool.issue_snapshot(T0 + 2, &w1, "s2", snap.clone())
        .await
        .unwrap();
    pool.ack_snapshot(T0 + 2, &w1, "s2", snap.clone())
        .await
        .unwrap();
    let b = mine.before(&pool).await;
    let receipt = pool
        .report_runtime(
            T0 + 3,
            RuntimeReport {
                fleet: None,
                cooldowns: Vec::new(),
                usage: None,
                worker: w1.clone(),
                session_id: "s2".into(),
                sequence: 1,
                snapshot: snap,
                entries: vec![ProxyRuntime {
                    proxy_id: ids[1].clone(),
                    active: 1,
                    reserved: 0,
                    draining: false,
                }],
            },
            SESSION_TTL,
        )
        .await
        .unwrap();
    assert_eq!(receipt.stale_proxies, vec![ids[1].clone()]);
    mine.check(&pool, b, "a report with stale entries").await;

    let b = mine.before(&pool).await;
    pool.close_session(T0 + 4, &w1, "s2").await.unwrap();
    mine.check(&pool, b, "close_session").await;

    // A session that lapses and is swept away.
    pool.open_session(T0 + 5, &w1, "s3", SESSION_TTL)
        .await
        .unwrap();
    let b = mine.before(&pool).await;
    let report = pool.sweep(T0 + 5 + SESSION_TTL, 100).await.unwrap();
    assert_eq!(report.sessions_removed, 1);
    mine.check(&pool, b, "a sweep of a lapsed session").await;

    // Session feedback is per client: one counter every worker's snapshot follows.
    let (before_w1, before_w2) = (version(&pool, &w1).await, version(&pool, &w2).await);
    let now = T0 + 6 + SESSION_TTL;
    let feedback = SessionFeedback {
        project: None,
        id: "f1".into(),
        client: client("c1"),
        session: "sticky-1".into(),
        domain: Domain::new("shop.test").unwrap(),
        verdict: Verdict::Banned,
        ttl_ms: None,
        expires_at_ms: now + 60_000,
    };
    pool.add_session_feedback(now, feedback.clone())
        .await
        .unwrap();
    let (after_w1, after_w2) = (version(&pool, &w1).await, version(&pool, &w2).await);
    assert!(after_w1.feedback > before_w1.feedback, "new feedback");
    assert_eq!(after_w1.feedback, after_w2.feedback, "one shared counter");
    assert_eq!(
        (after_w1.worker, after_w2.worker),
        (before_w1.worker, before_w2.worker),
        "feedback concerns no worker's records"
    );
    pool.add_session_feedback(now + 1, feedback).await.unwrap();
    assert_eq!(
        version(&pool, &w1).await.feedback,
        after_w1.feedback,
        "the same feedback again is a no-op"
    );
}
