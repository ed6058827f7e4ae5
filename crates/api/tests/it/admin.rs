//! Admin routes: listing workers (session, snapshot versions, last report, mode) and
//! cordoning, draining and uncordoning a worker (a mode in the store).

use crate::common::*;
use proxypool_api::{ExtractionSettings, OwnershipWake};
use proxypool_core::{
    ProxyId, ProxyRuntime, RuntimeReport, SnapshotRef, WorkerId, WorkerMode, now_millis,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn worker(name: &str) -> WorkerId {
    WorkerId::new(name).unwrap()
}

/// Opens a session for `name`, issues and acknowledges snapshot 3, and assigns `proxies`.
async fn live_worker(server: &TestServer, name: &str, proxies: &[ProxyId]) -> SnapshotRef {
    let now = now_millis();
    let pool = &server.pool;
    pool.open_session(now, &worker(name), "s-1", 60_000)
        .await
        .unwrap();
    for proxy in proxies {
        pool.assign(now, proxy, &worker(name), 30_000)
            .await
            .unwrap();
    }
    let snapshot = SnapshotRef {
        version: 3,
        epoch: pool.current_epoch(now).await.unwrap(),
        checksum: "c".into(),
    };
    pool.issue_snapshot(now, &worker(name), "s-1", snapshot.clone())
        .await
        .unwrap();
    pool.ack_snapshot(now, &worker(name), "s-1", snapshot.clone())
        .await
        .unwrap();
    snapshot
}

#[tokio::test]
async fn lists_workers_with_session_snapshot_and_last_report() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 3).await;
    let snapshot = live_worker(&server, "gw-1", &ids[..2]).await;
    let report = RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        usage: None,
        worker: worker("gw-1"),
        session_id: "s-1".into(),
        sequence: 7,
        snapshot,
        entries: vec![ProxyRuntime {
            proxy_id: ids[0].clone(),
            active: 2,
            reserved: 1,
            draining: false,
        }],
    };
    server
        .pool
        .report_runtime(now_millis(), report, 30_000)
        .await
        .unwrap();

    let reply = server.get("/v1/admin/workers", Some(ADMIN)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["truncated"], false);
    let gw = &body["workers"][0];
    assert_eq!(gw["worker"], "gw-1");
    assert_eq!(gw["session_id"], "s-1");
    assert_eq!(gw["acked_snapshot"]["version"], 3);
    assert_eq!(gw["last_report"]["sequence"], 7);
    assert_eq!(gw["last_report"]["active"], 2);
    assert_eq!(gw["last_report"]["reserved"], 1);
    assert!(reply.header("ratelimit-policy").is_some());
}

#[derive(Debug, Default)]
struct CountingWake(AtomicUsize);

impl OwnershipWake for CountingWake {
    fn wake(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

async fn set_mode(server: &TestServer, name: &str, verb: &str) -> Reply {
    Reply::from(
        server
            .http
            .post(server.url(&format!("/v1/admin/workers/{name}/{verb}")))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn set_mode_keyed(server: &TestServer, name: &str, verb: &str, key: &str) -> Reply {
    Reply::from(
        server
            .http
            .post(server.url(&format!("/v1/admin/workers/{name}/{verb}")))
            .bearer_auth(ADMIN)
            .header("Idempotency-Key", key)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn modes(server: &TestServer) -> Vec<(String, WorkerMode)> {
    server
        .pool
        .worker_modes()
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.worker.to_string(), m.mode))
        .collect()
}

#[tokio::test]
async fn cordon_drain_and_uncordon_are_stored_modes_and_wake_the_ownership_manager() {
    let wake = Arc::new(CountingWake::default());
    let server = TestServer::memory(Setup {
        extraction: ExtractionSettings {
            drain_batch: 2,
            ..ExtractionSettings::default()
        },
        ownership_wake: Some(wake.clone()),
        ..Setup::default()
    })
    .await;
    let ids = server.seed("acme", 0, 4).await;
    live_worker(&server, "gw-2", &ids[..3]).await;

    let cordoned = set_mode(&server, "gw-2", "cordon").await;
    assert_eq!(cordoned.status, 200, "{}", cordoned.text());
    let body = cordoned.json();
    assert_eq!(
        (
            &body["worker"],
            &body["mode"],
            &body["serving"],
            &body["draining"]
        ),
        (&"gw-2".into(), &"cordoned".into(), &2.into(), &0.into()),
        "counts are capped at the drain batch"
    );
    let since = body["since"].clone();
    assert_eq!(
        modes(&server).await,
        vec![("gw-2".into(), WorkerMode::Cordoned)]
    );
    // Cordoning again is idempotent: same mode, same time.
    assert_eq!(
        set_mode(&server, "gw-2", "cordon").await.json()["since"],
        since
    );

    // The route records the mode; it does not drain by itself (the ownership manager does).
    let drained = set_mode(&server, "gw-2", "drain").await.json();
    assert_eq!(drained["mode"], "draining");
    assert_eq!(
        modes(&server).await,
        vec![("gw-2".into(), WorkerMode::Draining)]
    );
    let now = now_millis();
    assert!(
        !server
            .pool
            .get(now, &ids[0])
            .await
            .unwrap()
            .unwrap()
            .is_draining()
    );

    let listed = server.get("/v1/admin/workers", Some(ADMIN)).await.json();
    assert_eq!(listed["workers"][0]["mode"], "draining");

    let active = set_mode(&server, "gw-2", "uncordon").await.json();
    assert_eq!(active["mode"], "active");
    assert!(
        modes(&server).await.is_empty(),
        "active is the default, not stored"
    );
    assert_eq!(
        wake.0.load(Ordering::SeqCst),
        4,
        "every change nudges the manager"
    );
    // Each change is a mutation of its own quota operation.
    assert_eq!(
        server
            .quota
            .consumed("platform", "ops", proxypool_quota::Operation::Admin)
            .await,
        4
    );
}

#[tokio::test]
async fn unknown_workers_and_non_admins_change_nothing() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 1).await;
    server
        .pool
        .assign(now_millis(), &ids[0], &worker("gw-3"), 30_000)
        .await
        .unwrap();
    // Known by its assignment only: fine.
    let reply = set_mode(&server, "gw-3", "drain").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["serving"], 1);
    // Never heard of: a typo, refused.
    set_mode(&server, "gw-none", "cordon")
        .await
        .assert_error(404, "not_found");
    set_mode(&server, "bad id!", "cordon")
        .await
        .assert_error(404, "not_found");
    let reply = Reply::from(
        server
            .http
            .post(server.url("/v1/admin/workers/gw-3/uncordon"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_eq!(
        modes(&server).await,
        vec![("gw-3".into(), WorkerMode::Draining)]
    );
}

/// A retried drain (same `Idempotency-Key`) replays its first answer: it does not drain a
/// worker uncordoned since, and the key cannot be spent on another action.
#[tokio::test]
async fn a_reused_key_replays_the_admin_answer_instead_of_acting_again() {
    let wake = Arc::new(CountingWake::default());
    let server = TestServer::memory(Setup {
        ownership_wake: Some(wake.clone()),
        ..Setup::default()
    })
    .await;
    let ids = server.seed("acme", 0, 2).await;
    live_worker(&server, "gw-2", &ids).await;

    let first = set_mode_keyed(&server, "gw-2", "drain", "drain-gw-2").await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.headers["idempotent-replayed"], "false");
    assert_eq!(wake.0.load(Ordering::SeqCst), 1);
    let uncordoned = set_mode(&server, "gw-2", "uncordon").await;
    assert_eq!(uncordoned.status, 200, "{}", uncordoned.text());
    assert!(uncordoned.headers.get("idempotent-replayed").is_none());
    assert_eq!(wake.0.load(Ordering::SeqCst), 2);

    let retried = set_mode_keyed(&server, "gw-2", "drain", "drain-gw-2").await;
    assert_eq!(retried.status, 200, "{}", retried.text());
    assert_eq!(retried.headers["idempotent-replayed"], "true");
    assert_eq!(retried.json()["mode"], "draining");
    assert_eq!(retried.json()["since"], first.json()["since"]);
    assert!(modes(&server).await.is_empty(), "the retry drained again");
    assert_eq!(
        wake.0.load(Ordering::SeqCst),
        2,
        "the retry woke the manager"
    );

    // The key on another action or worker: a conflict, nothing changed.
    set_mode_keyed(&server, "gw-2", "cordon", "drain-gw-2")
        .await
        .assert_error(409, "idempotency_conflict");
    assert!(modes(&server).await.is_empty());
}
