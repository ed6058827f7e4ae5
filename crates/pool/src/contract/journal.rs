//! Contract: the snapshot change journal (`WorkerRuntimeStore::snapshot_changes`). Every
//! write that moves a worker's snapshot counter for a proxy names that proxy; a read returns
//! the proxies named after a version (plus those asked for), each with what the worker holds
//! of it now by the rules of `owned_by` and `draining_of`, in one step with the counters. A
//! store that forgot that far back, or more changes than the caller's limit, answers `None`.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    ActivityPool, CheckOutcome, CooldownChange, CooldownStore, Domain, DomainCooldown, HealthBatch,
    HealthObservation, Holding, ProxyId, ProxyRuntime, RuntimeReport, SNAPSHOT_JOURNAL_CAP,
    SnapshotChanges, SnapshotRef, UnixMillis, WorkerId,
};

const LEASE_MS: u64 = 10_000;
const SESSION_TTL: u64 = 15_000;
/// A limit no test reaches, so only forgetting can make `changed` `None`.
const NO_LIMIT: usize = usize::MAX;

async fn changes<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
    after: u64,
    also: &[ProxyId],
    limit: usize,
) -> SnapshotChanges {
    let changes = pool
        .snapshot_changes(now, worker, after, also, limit)
        .await
        .unwrap();
    assert_eq!(
        changes.version,
        pool.snapshot_version(now, worker).await.unwrap(),
        "the counters come with the changes"
    );
    changes
}

/// The changed ids and holdings since `after`, which the store must still remember.
async fn named<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
    after: u64,
) -> (u64, Vec<(ProxyId, Holding)>) {
    let read = changes(pool, now, worker, after, &[], NO_LIMIT).await;
    let changed = read
        .changed
        .unwrap_or_else(|| panic!("changes since {after} must be remembered"));
    (read.version.worker, changed)
}

fn ids_of(changed: &[(ProxyId, Holding)]) -> Vec<ProxyId> {
    changed.iter().map(|(id, _)| id.clone()).collect()
}

/// What `owned_by` lists for `id` at `now`, as a holding.
async fn serving<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
    id: &ProxyId,
) -> Holding {
    let owned = pool.owned_by(now, worker, 1_000).await.unwrap();
    let owned = owned
        .into_iter()
        .find(|o| &o.record.id == id)
        .unwrap_or_else(|| panic!("{id} must be listed by owned_by"));
    Holding::Serving(Box::new(owned))
}

fn sorted(mut ids: Vec<ProxyId>) -> Vec<ProxyId> {
    ids.sort();
    ids
}

fn passing_check(id: &ProxyId, now: UnixMillis) -> HealthBatch {
    HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 35 },
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

/// Opens `session` for `worker` with `snap` issued and acknowledged, ready for reports.
async fn ready_session<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
    session: &str,
) -> SnapshotRef {
    let snap = SnapshotRef {
        version: 1,
        epoch: pool.current_epoch(now).await.unwrap(),
        checksum: "sum".into(),
    };
    pool.open_session(now, worker, session, SESSION_TTL)
        .await
        .unwrap();
    pool.issue_snapshot(now, worker, session, snap.clone())
        .await
        .unwrap();
    pool.ack_snapshot(now, worker, session, snap.clone())
        .await
        .unwrap();
    snap
}

/// A report of `worker` with every id in `busy` busy (one connection each).
fn busy_report(
    worker: &WorkerId,
    session: &str,
    sequence: u64,
    snap: &SnapshotRef,
    busy: &[ProxyId],
) -> RuntimeReport {
    RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        usage: None,
        worker: worker.clone(),
        session_id: session.into(),
        sequence,
        snapshot: snap.clone(),
        entries: busy
            .iter()
            .map(|id| ProxyRuntime {
                proxy_id: id.clone(),
                active: 1,
                reserved: 0,
                draining: false,
            })
            .collect(),
    }
}

pub async fn journal_names_each_change_of_a_held_proxy_once_with_its_holding<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let w1 = worker("gw-1");
    let a0 = pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    pool.assign(T0, &ids[1], &w1, LEASE_MS).await.unwrap();

    let (v, changed) = named(&pool, T0 + 1, &w1, 0).await;
    let mut expected = Vec::new();
    for id in sorted(ids.clone()) {
        let holding = serving(&pool, T0 + 1, &w1, &id).await;
        expected.push((id, holding));
    }
    assert_eq!(
        changed, expected,
        "both assignments, by id, as owned_by lists them"
    );
    let Holding::Serving(owned) = &changed.iter().find(|(id, _)| id == &ids[0]).unwrap().1 else {
        panic!("serving");
    };
    assert_eq!(owned.assignment, a0);

    // From the returned version, only what changed after it.
    let renewed = pool
        .renew(T0 + 2, &ids[0], &w1, a0.epoch, LEASE_MS)
        .await
        .unwrap();
    let (v, changed) = named(&pool, T0 + 3, &w1, v).await;
    assert_eq!(
        ids_of(&changed),
        vec![ids[0].clone()],
        "only the renewed one"
    );
    let Holding::Serving(owned) = &changed[0].1 else {
        panic!("a renewed lease serves: {changed:?}");
    };
    assert_eq!(owned.assignment, renewed, "read as it is now");

    // A passing re-check rewrites only the health bookkeeping: nothing to re-read.
    pool.apply_health(T0 + 4, passing_check(&ids[1], T0 + 4))
        .await
        .unwrap();
    let (v2, changed) = named(&pool, T0 + 5, &w1, v).await;
    assert_eq!((v2, changed), (v, Vec::new()), "a health-only write");

    // A cooldown on a held proxy: every snapshot listing it carries its cooldowns.
    let applied = pool
        .apply_cooldowns(T0 + 6, &[cooldown(&ids[1], T0 + 6)])
        .await
        .unwrap();
    assert_eq!(applied.applied, 1);
    let (v, changed) = named(&pool, T0 + 7, &w1, v).await;
    assert_eq!(ids_of(&changed), vec![ids[1].clone()], "a cooldown change");
    assert_eq!(changed[0].1, serving(&pool, T0 + 7, &w1, &ids[1]).await);

    // A drain: held, no longer listed.
    let draining = pool
        .begin_drain(T0 + 8, &ids[0], &w1, renewed.epoch)
        .await
        .unwrap();
    let (v, changed) = named(&pool, T0 + 9, &w1, v).await;
    assert_eq!(
        changed,
        vec![(ids[0].clone(), Holding::Draining(draining.clone()))]
    );
    assert_eq!(
        pool.draining_of(T0 + 9, &w1, 10).await.unwrap(),
        vec![draining],
        "as draining_of reads it"
    );

    // Released after the drain, and expired: both read as nothing.
    pool.acknowledge_drain(T0 + 10, &ids[0], &w1, renewed.epoch, 0, 0)
        .await
        .unwrap();
    let (v, changed) = named(&pool, T0 + 11, &w1, v).await;
    assert_eq!(changed, vec![(ids[0].clone(), Holding::Nothing)]);
    let end = T0 + LEASE_MS;
    let expired = pool.expire(end, 100).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].proxy_id, ids[1]);
    let (_, changed) = named(&pool, end, &w1, v).await;
    assert_eq!(changed, vec![(ids[1].clone(), Holding::Nothing)]);
}

pub async fn journal_names_record_changes_of_a_held_proxy<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    let (v, _) = named(&pool, T0, &w1, 0).await;

    // A failed check turns it SUSPECT: still assigned to w1, but not listed.
    let mut failed = passing_check(&ids[0], T0 + 1);
    failed.observations[0].outcome = CheckOutcome::Failure {
        error: "timeout".into(),
    };
    pool.apply_health(T0 + 1, failed).await.unwrap();
    let (v, changed) = named(&pool, T0 + 2, &w1, v).await;
    assert_eq!(changed, vec![(ids[0].clone(), Holding::Nothing)]);

    // The next passing check lists it again.
    pool.apply_health(T0 + 3, passing_check(&ids[0], T0 + 3))
        .await
        .unwrap();
    let (_, changed) = named(&pool, T0 + 4, &w1, v).await;
    assert_eq!(
        changed,
        vec![(ids[0].clone(), serving(&pool, T0 + 4, &w1, &ids[0]).await)]
    );
}

pub async fn journal_keeps_other_workers_proxies_out<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    let theirs = pool.assign(T0, &ids[1], &w2, LEASE_MS).await.unwrap();
    pool.renew(T0 + 1, &ids[1], &w2, theirs.epoch, LEASE_MS)
        .await
        .unwrap();

    let (_, changed) = named(&pool, T0 + 2, &w1, 0).await;
    assert_eq!(ids_of(&changed), vec![ids[0].clone()], "only w1's own");
    let (_, changed) = named(&pool, T0 + 2, &w2, 0).await;
    assert_eq!(ids_of(&changed), vec![ids[1].clone()], "only w2's own");

    // Asked for by name, w2's proxy is nothing of w1's; neither is one the store never had.
    let unknown = candidate_id(99);
    let current = pool.snapshot_version(T0 + 2, &w1).await.unwrap().worker;
    let read = changes(
        &pool,
        T0 + 2,
        &w1,
        current,
        &[unknown.clone(), ids[1].clone()],
        NO_LIMIT,
    )
    .await;
    let mut expected = vec![
        (ids[1].clone(), Holding::Nothing),
        (unknown, Holding::Nothing),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(read.changed, Some(expected));
}

pub async fn journal_reads_from_the_current_version_asked_ids_and_a_limit<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 3).await;
    let w1 = worker("gw-1");
    for id in &ids[..2] {
        pool.assign(T0, id, &w1, LEASE_MS).await.unwrap();
    }
    let current = pool.snapshot_version(T0 + 1, &w1).await.unwrap().worker;

    let read = changes(&pool, T0 + 1, &w1, current, &[], NO_LIMIT).await;
    assert_eq!(read.changed, Some(Vec::new()), "nothing after the current");

    // Asked for by name: returned with its holding although unchanged, once.
    let asked = [ids[1].clone(), ids[1].clone()];
    let read = changes(&pool, T0 + 1, &w1, current, &asked, NO_LIMIT).await;
    assert_eq!(
        read.changed,
        Some(vec![(
            ids[1].clone(),
            serving(&pool, T0 + 1, &w1, &ids[1]).await
        )])
    );
    // A lease that ran out by time alone moved nothing; asked for, it reads as nothing.
    let lapsed = T0 + LEASE_MS;
    let read = changes(&pool, lapsed, &w1, current, &[], NO_LIMIT).await;
    assert_eq!(read.changed, Some(Vec::new()));
    let read = changes(&pool, lapsed, &w1, current, &ids[..1], NO_LIMIT).await;
    assert_eq!(read.changed, Some(vec![(ids[0].clone(), Holding::Nothing)]));

    // More changes than the limit: rebuild whole. Asked ids count, a repeat once.
    assert_eq!(changes(&pool, T0 + 1, &w1, 0, &[], 1).await.changed, None);
    let both = changes(&pool, T0 + 1, &w1, 0, &[], 2).await.changed;
    assert_eq!(both.map(|c| ids_of(&c)), Some(sorted(ids[..2].to_vec())));
    let asked = [ids[2].clone()];
    assert_eq!(
        changes(&pool, T0 + 1, &w1, 0, &asked, 2).await.changed,
        None
    );
    let asked = [ids[0].clone()];
    let read = changes(&pool, T0 + 1, &w1, 0, &asked, 2).await.changed;
    assert_eq!(read.map(|c| ids_of(&c)), Some(sorted(ids[..2].to_vec())));
}

pub async fn journal_sessions_and_reports<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let (w1, w2, w3) = (worker("gw-1"), worker("gw-2"), worker("gw-3"));

    // A worker whose counter only ever moved for its session has nothing to re-read.
    pool.open_session(T0, &w3, "s3", SESSION_TTL).await.unwrap();
    let (v, changed) = named(&pool, T0, &w3, 0).await;
    assert!(v > 0, "a session moves the version");
    assert_eq!(changed, Vec::new(), "a session names no proxy");

    pool.assign(T0, &ids[0], &w1, LEASE_MS).await.unwrap();
    let (before, _) = named(&pool, T0, &w1, 0).await;
    let snap = ready_session(&pool, T0 + 1, &w1, "s1").await;
    let (v, changed) = named(&pool, T0 + 1, &w1, before).await;
    assert!(v > before, "opening a session moves the version");
    assert_eq!(changed, Vec::new(), "a session names no proxy");

    // A busy entry on a proxy w1 does not hold is stale: named, and nothing of w1's.
    pool.assign(T0 + 2, &ids[1], &w2, LEASE_MS).await.unwrap();
    let receipt = pool
        .report_runtime(T0 + 3, busy_report(&w1, "s1", 1, &snap, &ids), SESSION_TTL)
        .await
        .unwrap();
    assert_eq!(receipt.stale_proxies, vec![ids[1].clone()]);
    let (v, changed) = named(&pool, T0 + 3, &w1, v).await;
    assert_eq!(changed, vec![(ids[1].clone(), Holding::Nothing)]);

    pool.close_session(T0 + 4, &w1, "s1").await.unwrap();
    let (after_close, changed) = named(&pool, T0 + 4, &w1, v).await;
    assert!(after_close > v, "closing a session moves the version");
    assert_eq!(changed, Vec::new(), "a session names no proxy");
}

pub async fn journal_forgets_past_its_cap_and_says_so<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let snap = ready_session(&pool, T0, &w1, "s1").await;
    let (before, _) = named(&pool, T0, &w1, 0).await;

    // The cheapest way to name more distinct proxies than the journal keeps: one report
    // whose busy entries are all on proxies w1 does not hold, each a stale entry.
    let stale: Vec<ProxyId> = (0..SNAPSHOT_JOURNAL_CAP + 2)
        .map(|i| candidate_id(1_000 + i))
        .collect();
    let receipt = pool
        .report_runtime(
            T0 + 1,
            busy_report(&w1, "s1", 1, &snap, &stale),
            SESSION_TTL,
        )
        .await
        .unwrap();
    assert_eq!(receipt.stale_proxies.len(), stale.len());

    let read = changes(&pool, T0 + 2, &w1, before, &[], NO_LIMIT).await;
    assert_eq!(read.changed, None, "the first changes were forgotten");
    let current = read.version.worker;
    let (_, changed) = named(&pool, T0 + 2, &w1, current).await;
    assert_eq!(changed, Vec::new());

    // Changes after the forgotten ones are named as before.
    pool.assign(T0 + 3, &ids[0], &w1, LEASE_MS).await.unwrap();
    let (_, changed) = named(&pool, T0 + 4, &w1, current).await;
    assert_eq!(ids_of(&changed), vec![ids[0].clone()]);
}
