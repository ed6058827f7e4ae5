//! `GET /v1/usage` over HTTP: a client sees its own usage, an admin everyone's or one
//! client's; the numbers are the store's (a gateway's runtime report and an extraction,
//! made through the real ports); the read is charged to `inspect`; bad input is refused.

use crate::common::*;
use proxypool_core::usage::{GatewayCounters, GatewayUsage, GatewayUsageEntry};
use proxypool_core::{ClientId, RuntimeReport, SnapshotRef, WorkerId, now_millis};
use proxypool_quota::Operation;
use serde_json::{Value, json};

/// A gateway session on the server's pool that reports `usage` for alice and bob.
async fn report_gateway_usage(server: &TestServer) {
    let pool = &server.pool;
    let worker = WorkerId::new("gw-1").unwrap();
    let now = now_millis();
    let snapshot = SnapshotRef {
        version: 1,
        epoch: 0,
        checksum: "sum".into(),
    };
    pool.open_session(now, &worker, "s1", 60_000).await.unwrap();
    pool.issue_snapshot(now, &worker, "s1", snapshot.clone())
        .await
        .unwrap();
    pool.ack_snapshot(now, &worker, "s1", snapshot.clone())
        .await
        .unwrap();
    let entry =
        |client: &str, upstream_name: &str, requests, bytes_up, bytes_down| GatewayUsageEntry {
            client: ClientId::new(client).unwrap(),
            upstream: upstream(upstream_name),
            counters: GatewayCounters {
                requests,
                failures: 1,
                bytes_up,
                bytes_down,
            },
        };
    let report = RuntimeReport {
        fleet: None,
        cooldowns: Vec::new(),
        worker,
        session_id: "s1".into(),
        sequence: 1,
        snapshot,
        entries: vec![],
        usage: Some(GatewayUsage {
            instance: "inst1".into(),
            entries: vec![
                entry("alice", "acme", 5, 500, 5000),
                entry("alice", "globex", 2, 20, 200),
                entry("bob", "acme", 9, 9, 9),
            ],
        }),
    };
    pool.report_runtime(now, report, 60_000).await.unwrap();
}

fn totals(client: &Value) -> Vec<(String, u64, u64, u64, u64, u64)> {
    client["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["upstream"].as_str().unwrap().to_owned(),
                u["requests"].as_u64().unwrap(),
                u["failures"].as_u64().unwrap(),
                u["bytes_up"].as_u64().unwrap(),
                u["bytes_down"].as_u64().unwrap(),
                u["extracted"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_see_their_own_usage_and_admins_everyones() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 4).await;
    report_gateway_usage(&server).await;
    assert_eq!(
        server
            .extract(
                ALICE,
                None,
                &json!({"count": 2, "filters": {"upstream": "acme"}})
            )
            .await
            .status,
        200
    );

    let own = server.get("/v1/usage", Some(ALICE)).await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert!(own.header("ratelimit").is_some(), "charged to inspect");
    let body = own.json();
    let clients = body["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0]["client"], "alice");
    assert_eq!(
        totals(&clients[0]),
        vec![
            ("acme".to_owned(), 5, 1, 500, 5000, 2),
            ("globex".to_owned(), 2, 1, 20, 200, 0),
        ]
    );
    let minutes = clients[0]["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 1, "all of it in the current minute");
    assert_eq!(minutes[0]["upstreams"][0]["requests"], 5);
    assert_eq!(clients[0]["hours"].as_array().unwrap().len(), 1);
    assert_eq!(body["minute_ms"], 60_000);

    // An admin sees every configured client (bob's usage too), or one with ?client=.
    let all = server.get("/v1/usage", Some(ADMIN)).await.json();
    let names: Vec<&str> = all["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["client"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "bob", "ops", "narrow", "two"]);
    let bob = server.get("/v1/usage?client=bob", Some(ADMIN)).await.json();
    assert_eq!(
        totals(&bob["clients"][0]),
        vec![("acme".to_owned(), 9, 1, 9, 9, 0)]
    );
    let own_by_name = server.get("/v1/usage?client=alice", Some(ALICE)).await;
    assert_eq!(own_by_name.status, 200);

    // Another client's usage, bad input and no token are refused, and charge nothing.
    let inspected = server
        .quota
        .consumed("p-alice", "alice", Operation::Inspect)
        .await;
    server
        .get("/v1/usage?client=bob", Some(ALICE))
        .await
        .assert_error(403, "forbidden");
    server
        .get("/v1/usage?client=%2Fbad", Some(ALICE))
        .await
        .assert_error(400, "invalid_request");
    server
        .get("/v1/usage?colour=red", Some(ALICE))
        .await
        .assert_error(400, "invalid_request");
    server
        .get("/v1/usage", None)
        .await
        .assert_error(401, "unauthenticated");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Inspect)
            .await,
        inspected
    );
}
