//! Admin routes: listing workers (session, snapshot versions, last report) and draining a
//! worker through the ownership port, with and without a cordon.

mod common;

use async_trait::async_trait;
use common::*;
use proxypool_api::{ExtractionSettings, WorkerCordon};
use proxypool_core::{
    PoolResult, ProxyId, ProxyRuntime, RuntimeReport, SnapshotRef, WorkerId, now_millis,
};
use std::sync::{Arc, Mutex};

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
        epoch: pool.current_epoch().await.unwrap(),
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
struct RecordingCordon(Mutex<Vec<WorkerId>>);

#[async_trait]
impl WorkerCordon for RecordingCordon {
    async fn cordon(&self, worker: &WorkerId) -> PoolResult<()> {
        self.0.lock().unwrap().push(worker.clone());
        Ok(())
    }
}

async fn drain(server: &TestServer, name: &str) -> Reply {
    Reply::from(
        server
            .http
            .post(server.url(&format!("/v1/admin/workers/{name}/drain")))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn drains_a_worker_in_batches_and_idempotently() {
    let cordon = Arc::new(RecordingCordon::default());
    let server = TestServer::memory(Setup {
        extraction: ExtractionSettings {
            drain_batch: 2,
            ..ExtractionSettings::default()
        },
        cordon: Some(cordon.clone()),
        ..Setup::default()
    })
    .await;
    let ids = server.seed("acme", 0, 4).await;
    live_worker(&server, "gw-2", &ids[..3]).await;

    let first = drain(&server, "gw-2").await;
    assert_eq!(first.status, 200, "{}", first.text());
    let first = first.json();
    assert_eq!(
        (
            &first["drained"],
            &first["draining"],
            &first["more"],
            &first["cordoned"]
        ),
        (&2.into(), &2.into(), &true.into(), &true.into())
    );
    let second = drain(&server, "gw-2").await.json();
    assert_eq!(
        (&second["drained"], &second["more"]),
        (&1.into(), &false.into())
    );
    let third = drain(&server, "gw-2").await.json();
    assert_eq!(third["drained"], 0, "nothing left to drain");
    assert_eq!(third["draining"], 2, "listing is capped at the batch size");
    let now = now_millis();
    for id in &ids[..3] {
        let assignment = server.pool.get(now, id).await.unwrap().unwrap();
        assert!(assignment.is_draining(), "{id:?}");
    }
    assert_eq!(cordon.0.lock().unwrap().len(), 3);
    // Draining is a mutation of its own quota operation.
    assert_eq!(
        server
            .quota
            .consumed("platform", "ops", proxypool_quota::Operation::Admin)
            .await,
        3
    );
}

#[tokio::test]
async fn a_worker_known_only_by_its_assignments_can_be_drained() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 1).await;
    let now = now_millis();
    server
        .pool
        .assign(now, &ids[0], &worker("gw-3"), 30_000)
        .await
        .unwrap();
    let reply = drain(&server, "gw-3").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["drained"], 1);
    assert_eq!(reply.json()["cordoned"], false);
    drain(&server, "gw-none")
        .await
        .assert_error(404, "not_found");
}
