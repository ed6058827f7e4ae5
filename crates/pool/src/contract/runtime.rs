//! Contract: WorkerRuntimeStore (sessions, snapshot acknowledgements, runtime reports).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    ActivityPool, Conflict, PoolError, ProxyRuntime, ReportOutcome, RuntimeReport, SnapshotRef,
    UnixMillis, WorkerId,
};

const SESSION_TTL: u64 = 15_000;
const REPORT_TTL: u64 = 10_000;

fn snapshot(version: u64, epoch: u64) -> SnapshotRef {
    SnapshotRef {
        version,
        epoch,
        checksum: format!("sum-{version}-{epoch}"),
    }
}

/// Opens `session` for `worker` and gets `snap` issued and acknowledged.
async fn ready_session<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
    session: &str,
    snap: &SnapshotRef,
) {
    pool.open_session(now, worker, session, SESSION_TTL)
        .await
        .unwrap();
    pool.issue_snapshot(now, worker, session, snap.clone())
        .await
        .unwrap();
    pool.ack_snapshot(now, worker, session, snap.clone())
        .await
        .unwrap();
}

fn report(
    worker: &WorkerId,
    session: &str,
    sequence: u64,
    snap: &SnapshotRef,
    entries: Vec<ProxyRuntime>,
) -> RuntimeReport {
    RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        usage: None,
        worker: worker.clone(),
        session_id: session.into(),
        sequence,
        snapshot: snap.clone(),
        entries,
    }
}

fn busy(id: &proxypool_core::ProxyId, active: u32, reserved: u32) -> ProxyRuntime {
    ProxyRuntime {
        proxy_id: id.clone(),
        active,
        reserved,
        draining: false,
    }
}

pub async fn runtime_new_session_fences_old<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w1 = worker("gw-1");
    let snap = snapshot(1, 0);
    ready_session(&pool, T0, &w1, "s-old", &snap).await;
    pool.report_runtime(T0 + 1, report(&w1, "s-old", 1, &snap, vec![]), REPORT_TTL)
        .await
        .unwrap();
    assert!(pool.runtime(T0 + 1, &w1).await.unwrap().is_some());

    let fresh = pool
        .open_session(T0 + 2, &w1, "s-new", SESSION_TTL)
        .await
        .unwrap();
    assert_eq!(
        (fresh.acked_snapshot, fresh.last_report_sequence),
        (None, None)
    );
    assert!(
        pool.runtime(T0 + 2, &w1).await.unwrap().is_none(),
        "the old runtime is forgotten"
    );
    let fenced = pool
        .report_runtime(T0 + 3, report(&w1, "s-old", 2, &snap, vec![]), REPORT_TTL)
        .await;
    assert_eq!(fenced.unwrap_err(), PoolError::Conflict(Conflict::Fenced));
    let renew = pool
        .renew_session(T0 + 3, &w1, "s-old", SESSION_TTL)
        .await
        .unwrap_err();
    assert_eq!(renew, PoolError::Conflict(Conflict::Fenced));
    let ack = pool
        .ack_snapshot(T0 + 3, &w1, "s-old", snap.clone())
        .await
        .unwrap_err();
    assert_eq!(ack, PoolError::Conflict(Conflict::Fenced));
    assert_eq!(
        pool.session(T0 + 3, &w1).await.unwrap().unwrap().session_id,
        "s-new"
    );

    let same = pool
        .open_session(T0 + 4, &w1, "s-new", SESSION_TTL)
        .await
        .unwrap();
    assert_eq!(
        (same.opened_at_ms, same.expires_at_ms),
        (T0 + 2, T0 + 4 + SESSION_TTL),
        "same id renews"
    );
    assert!(
        pool.session(T0 + 4 + SESSION_TTL, &w1)
            .await
            .unwrap()
            .is_none(),
        "sessions lapse"
    );
    assert!(matches!(
        pool.open_session(T0, &w1, "bad id", SESSION_TTL).await,
        Err(PoolError::InvalidInput(_))
    ));
}

pub async fn runtime_report_sequence_replay_and_conflict<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w1 = worker("gw-1");
    let snap = snapshot(1, 0);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    let first = report(&w1, "s1", 5, &snap, vec![]);
    assert_eq!(
        pool.report_runtime(T0 + 1, first.clone(), REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Accepted
    );
    assert_eq!(
        pool.report_runtime(T0 + 2, first, REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Replayed
    );

    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let conflicting = report(&w1, "s1", 5, &snap, vec![busy(&ids[0], 0, 0)]);
    assert_eq!(
        pool.report_runtime(T0 + 3, conflicting, REPORT_TTL)
            .await
            .unwrap_err(),
        PoolError::Conflict(Conflict::Sequence),
        "same sequence, other content"
    );
    let older = report(&w1, "s1", 4, &snap, vec![]);
    assert_eq!(
        pool.report_runtime(T0 + 3, older, REPORT_TTL)
            .await
            .unwrap_err(),
        PoolError::Conflict(Conflict::Sequence)
    );
    let next = report(&w1, "s1", 6, &snap, vec![]);
    assert_eq!(
        pool.report_runtime(T0 + 4, next, REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Accepted
    );
    assert_eq!(
        pool.session(T0 + 4, &w1)
            .await
            .unwrap()
            .unwrap()
            .last_report_sequence,
        Some(6)
    );

    let duplicate = report(
        &w1,
        "s1",
        7,
        &snap,
        vec![busy(&ids[0], 0, 0), busy(&ids[0], 0, 0)],
    );
    assert!(matches!(
        pool.report_runtime(T0 + 5, duplicate, REPORT_TTL).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert_eq!(
        pool.session(T0 + 5, &w1)
            .await
            .unwrap()
            .unwrap()
            .last_report_sequence,
        Some(6)
    );
}

pub async fn runtime_report_requires_acked_snapshot<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let w1 = worker("gw-1");
    pool.open_session(T0, &w1, "s1", SESSION_TTL).await.unwrap();
    let snap1 = snapshot(1, 3);
    let unacked = pool
        .report_runtime(T0 + 1, report(&w1, "s1", 1, &snap1, vec![]), REPORT_TTL)
        .await;
    assert_eq!(
        unacked.unwrap_err(),
        PoolError::Conflict(Conflict::Snapshot)
    );

    pool.issue_snapshot(T0 + 1, &w1, "s1", snap1.clone())
        .await
        .unwrap();
    let wrong = pool
        .ack_snapshot(T0 + 2, &w1, "s1", snapshot(2, 3))
        .await
        .unwrap_err();
    assert_eq!(
        wrong,
        PoolError::Conflict(Conflict::Snapshot),
        "only the issued snapshot can be acked"
    );
    let session = pool
        .ack_snapshot(T0 + 2, &w1, "s1", snap1.clone())
        .await
        .unwrap();
    assert_eq!(session.acked_snapshot, Some(snap1.clone()));
    assert_eq!(
        pool.ack_snapshot(T0 + 3, &w1, "s1", snap1.clone())
            .await
            .unwrap(),
        session,
        "repeat ack"
    );

    let ahead = report(&w1, "s1", 1, &snapshot(1, 9), vec![]);
    let err = pool
        .report_runtime(T0 + 3, ahead, REPORT_TTL)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        PoolError::Conflict(Conflict::Snapshot),
        "a report cannot claim a later epoch"
    );
    pool.report_runtime(T0 + 3, report(&w1, "s1", 1, &snap1, vec![]), REPORT_TTL)
        .await
        .unwrap();
}

pub async fn runtime_report_expiry_means_unknown_capacity<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 1).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, 20_000).await.unwrap();
    let snap = snapshot(1, a.epoch);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    let acme = upstream("acme");
    assert_eq!(
        pool.inventory(T0 + 1, &acme).await.unwrap().available_slots,
        0,
        "no report yet: unknown"
    );

    pool.report_runtime(
        T0 + 1,
        report(&w1, "s1", 1, &snap, vec![busy(&ids[0], 1, 1)]),
        REPORT_TTL,
    )
    .await
    .unwrap();
    assert_eq!(
        pool.inventory(T0 + 2, &acme).await.unwrap().available_slots,
        u64::from(SESSIONS) - 2
    );
    let stored = pool.runtime(T0 + 2, &w1).await.unwrap().unwrap();
    assert_eq!(stored.expires_at_ms, T0 + 1 + REPORT_TTL);
    assert!(
        pool.runtime(T0 + 1 + REPORT_TTL, &w1)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        pool.inventory(T0 + 1 + REPORT_TTL, &acme)
            .await
            .unwrap()
            .available_slots,
        0,
        "an expired report is capacity unknown, never the last known value"
    );
}

/// The stored report's entries.
async fn stored_entries<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    worker: &WorkerId,
) -> Vec<ProxyRuntime> {
    pool.runtime(now, worker)
        .await
        .unwrap()
        .unwrap()
        .report
        .entries
}

/// Busy entries on proxies the worker does not own at the snapshot's epoch (another
/// worker's, nobody's, assigned after the snapshot) are named stale and left out of what is
/// stored; the rest of the report applies. Zero counts on anything are fine.
pub async fn runtime_counts_need_owner_and_epoch<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 5).await;
    let (w1, w2) = (worker("gw-1"), worker("gw-2"));
    let mine = pool.assign(T0, &ids[0], &w1, 20_000).await.unwrap();
    pool.assign(T0, &ids[1], &w2, 20_000).await.unwrap();
    let snap = snapshot(1, mine.epoch);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    ready_session(&pool, T0, &w2, "s2", &snapshot(1, mine.epoch + 1)).await;
    let theirs = report(
        &w2,
        "s2",
        1,
        &snapshot(1, mine.epoch + 1),
        vec![busy(&ids[1], 1, 1)],
    );
    pool.report_runtime(T0, theirs, REPORT_TTL).await.unwrap();
    let their_runtime = pool.runtime(T0, &w2).await.unwrap();
    let their_assignment = pool.get(T0, &ids[1]).await.unwrap();
    // Assigned after the snapshot's epoch: the worker cannot be using it yet.
    pool.assign(T0 + 1, &ids[2], &w1, 20_000).await.unwrap();

    let sent = report(
        &w1,
        "s1",
        1,
        &snap,
        vec![
            busy(&ids[1], 1, 0),
            busy(&ids[0], 2, 0),
            busy(&ids[3], 0, 1),
            busy(&ids[4], 0, 0),
            busy(&ids[2], 1, 0),
        ],
    );
    let receipt = pool.report_runtime(T0 + 2, sent, REPORT_TTL).await.unwrap();
    assert_eq!(receipt.outcome, ReportOutcome::Accepted);
    assert_eq!(
        receipt.stale_proxies,
        vec![ids[1].clone(), ids[3].clone(), ids[2].clone()],
        "another worker's, nobody's, and one newer than the snapshot; in report order"
    );
    assert_eq!(
        stored_entries(&pool, T0 + 2, &w1).await,
        vec![busy(&ids[0], 2, 0), busy(&ids[4], 0, 0)],
        "only the owned and the idle entries are stored"
    );
    let session = pool.session(T0 + 2, &w1).await.unwrap().unwrap();
    assert_eq!(session.last_report_sequence, Some(1));
    assert_eq!(
        (session.expires_at_ms, receipt.session_expires_at_ms),
        (T0 + SESSION_TTL, T0 + SESSION_TTL),
        "a report never shortens the session"
    );

    assert_eq!(
        pool.runtime(T0 + 2, &w2).await.unwrap(),
        their_runtime,
        "the other worker's runtime is untouched"
    );
    assert_eq!(pool.get(T0 + 2, &ids[1]).await.unwrap(), their_assignment);
    assert_eq!(
        pool.inventory(T0 + 2, &upstream("acme"))
            .await
            .unwrap()
            .available_slots,
        // ids[0]: its owner's load; ids[1]: its owner's; ids[2]: too new to be known;
        // ids[3], ids[4]: unowned, all free.
        u64::from(SESSIONS) - 2 + u64::from(SESSIONS) - 2 + 2 * u64::from(SESSIONS),
        "a stale entry costs the proxy's real owner nothing"
    );
}

/// An accepted report renews the session, even when some of its entries are stale, and a
/// report through a proxy whose lease lapsed is stale, not refused.
pub async fn runtime_stale_entry_renews_session_and_lapsed_lease_is_stale<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let w1 = worker("gw-1");
    let short = pool.assign(T0, &ids[0], &w1, 1_000).await.unwrap();
    let long = pool.assign(T0, &ids[1], &w1, 20_000).await.unwrap();
    let snap = snapshot(1, long.epoch.max(short.epoch));
    ready_session(&pool, T0, &w1, "s1", &snap).await;

    let later = T0 + 10_000;
    let sent = report(
        &w1,
        "s1",
        1,
        &snap,
        vec![busy(&ids[0], 1, 0), busy(&ids[1], 1, 0)],
    );
    let receipt = pool.report_runtime(later, sent, SESSION_TTL).await.unwrap();
    assert_eq!(receipt.outcome, ReportOutcome::Accepted);
    assert_eq!(
        receipt.stale_proxies,
        vec![ids[0].clone()],
        "its lease lapsed"
    );
    assert_eq!(receipt.session_expires_at_ms, later + SESSION_TTL);
    let session = pool.session(later, &w1).await.unwrap().unwrap();
    assert_eq!(
        (session.expires_at_ms, session.last_report_sequence),
        (later + SESSION_TTL, Some(1))
    );
    assert!(
        pool.session(T0 + SESSION_TTL, &w1).await.unwrap().is_some(),
        "still live where the first grant would have lapsed"
    );
    assert_eq!(
        stored_entries(&pool, later, &w1).await,
        vec![busy(&ids[1], 1, 0)]
    );
}

/// A replay answers as the first time, even after ownership changed in between.
pub async fn runtime_replay_names_the_same_stale_entries<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, 5_000).await.unwrap();
    let snap = snapshot(1, a.epoch);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    let sent = report(
        &w1,
        "s1",
        7,
        &snap,
        vec![busy(&ids[0], 1, 0), busy(&ids[1], 1, 0)],
    );
    let first = pool
        .report_runtime(T0 + 1, sent.clone(), REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(first.stale_proxies, vec![ids[1].clone()]);

    // ids[0]'s lease lapses before the replay arrives: the answer does not change.
    let replay_at = T0 + 6_000;
    let again = pool
        .report_runtime(replay_at, sent, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(again.outcome, ReportOutcome::Replayed);
    assert_eq!(again.stale_proxies, first.stale_proxies);
    assert_eq!(
        again.session_expires_at_ms,
        replay_at + REPORT_TTL,
        "a replay renews the session too"
    );
    assert_eq!(
        stored_entries(&pool, replay_at, &w1).await,
        vec![busy(&ids[0], 1, 0)],
        "the stored report is the first one's"
    );

    // A clean report after one with stale entries names none.
    let clean = report(&w1, "s1", 8, &snap, vec![]);
    let next = pool
        .report_runtime(replay_at, clean.clone(), REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(next.stale_proxies, vec![]);
    let replayed = pool
        .report_runtime(replay_at + 1, clean, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(
        (replayed.outcome, replayed.stale_proxies),
        (ReportOutcome::Replayed, vec![])
    );
}

/// Bad input and a fenced session still refuse the whole report and change nothing, stale
/// entries or not.
pub async fn runtime_refused_report_with_stale_entries_changes_nothing<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, 20_000).await.unwrap();
    let snap = snapshot(1, a.epoch);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    let first = report(&w1, "s1", 1, &snap, vec![busy(&ids[0], 1, 0)]);
    pool.report_runtime(T0 + 1, first, REPORT_TTL)
        .await
        .unwrap();
    let before = (
        pool.session(T0 + 1, &w1).await.unwrap(),
        pool.runtime(T0 + 1, &w1).await.unwrap(),
    );

    let duplicate = report(
        &w1,
        "s1",
        2,
        &snap,
        vec![busy(&ids[1], 1, 0), busy(&ids[1], 1, 0)],
    );
    let err = pool
        .report_runtime(T0 + 2, duplicate, REPORT_TTL)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PoolError::InvalidInput(m) if m.contains("twice")),
        "a clear error: {err:?}"
    );
    let zero_ttl = report(&w1, "s1", 2, &snap, vec![busy(&ids[1], 1, 0)]);
    assert!(matches!(
        pool.report_runtime(T0 + 2, zero_ttl, 0).await,
        Err(PoolError::InvalidInput(_))
    ));
    let wrong_snapshot = report(
        &w1,
        "s1",
        2,
        &snapshot(2, a.epoch),
        vec![busy(&ids[1], 1, 0)],
    );
    assert_eq!(
        pool.report_runtime(T0 + 2, wrong_snapshot, REPORT_TTL)
            .await
            .unwrap_err(),
        PoolError::Conflict(Conflict::Snapshot)
    );
    assert_eq!(
        (
            pool.session(T0 + 1, &w1).await.unwrap(),
            pool.runtime(T0 + 1, &w1).await.unwrap(),
        ),
        before,
        "nothing changed"
    );

    pool.open_session(T0 + 3, &w1, "s-new", SESSION_TTL)
        .await
        .unwrap();
    let fenced = report(&w1, "s1", 2, &snap, vec![busy(&ids[1], 1, 0)]);
    assert_eq!(
        pool.report_runtime(T0 + 4, fenced, REPORT_TTL)
            .await
            .unwrap_err(),
        PoolError::Conflict(Conflict::Fenced),
        "a newer session fences the old one; that is not a stale entry"
    );
}

/// A stored report keeps the gateway's fleet endpoint (the controllers list the fleet from
/// it), stale entries or not; a later report without one drops it, and a report with a
/// malformed endpoint is refused whole and changes nothing.
pub async fn runtime_report_keeps_its_fleet_endpoint<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 2).await;
    let w1 = worker("gw-1");
    let a = pool.assign(T0, &ids[0], &w1, 20_000).await.unwrap();
    let snap = snapshot(1, a.epoch);
    ready_session(&pool, T0, &w1, "s1", &snap).await;
    let endpoint = proxypool_core::fleet::FleetEndpoint {
        address: "gw-1.fleet.internal:7443".into(),
        spki_sha256: "0f".repeat(32),
    };
    let mut first = report(
        &w1,
        "s1",
        1,
        &snap,
        vec![busy(&ids[0], 1, 0), busy(&ids[1], 1, 0)],
    );
    first.fleet = Some(endpoint.clone());
    let receipt = pool
        .report_runtime(T0 + 1, first.clone(), REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(receipt.stale_proxies, vec![ids[1].clone()]);
    let stored = pool.runtime(T0 + 1, &w1).await.unwrap().unwrap();
    assert_eq!(stored.report.fleet.as_ref(), Some(&endpoint));
    assert_eq!(stored.report.entries, vec![busy(&ids[0], 1, 0)]);
    assert_eq!(
        pool.report_runtime(T0 + 2, first, REPORT_TTL)
            .await
            .unwrap()
            .outcome,
        ReportOutcome::Replayed,
        "the endpoint is part of the report's identity, unchanged"
    );

    let mut bad = report(&w1, "s1", 2, &snap, vec![busy(&ids[0], 2, 0)]);
    bad.fleet = Some(proxypool_core::fleet::FleetEndpoint {
        address: "no-port".into(),
        spki_sha256: endpoint.spki_sha256.clone(),
    });
    assert!(matches!(
        pool.report_runtime(T0 + 3, bad, REPORT_TTL).await,
        Err(PoolError::InvalidInput(_))
    ));
    assert_eq!(
        pool.runtime(T0 + 3, &w1).await.unwrap().unwrap().report,
        stored.report,
        "nothing changed"
    );

    let without = report(&w1, "s1", 2, &snap, vec![busy(&ids[0], 2, 0)]);
    pool.report_runtime(T0 + 4, without, REPORT_TTL)
        .await
        .unwrap();
    assert_eq!(
        pool.runtime(T0 + 4, &w1)
            .await
            .unwrap()
            .unwrap()
            .report
            .fleet,
        None
    );
}
