//! The control loop against a test controller, and the refusals that need no upstream.

mod common;

use common::control::TestController;
use common::*;
use std::collections::HashSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_acks_reports_survives_fencing_and_ends_its_session() {
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(vec![], vec![client("alice")]);
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    {
        let state = controller.state.lock().unwrap();
        let ack = &state.acks[0];
        let expected = controller.snapshot(&state, &ack.session_id).reference;
        assert_eq!(
            ack.snapshot, expected,
            "ack names the applied version and checksum"
        );
    }
    // Reports arrive with strictly increasing sequences for the acked snapshot.
    let state = controller.state.clone();
    eventually(Duration::from_secs(5), "three reports", || {
        state.lock().unwrap().reports.len() >= 3
    })
    .await;
    {
        let state = controller.state.lock().unwrap();
        let sequences: Vec<u64> = state.reports.iter().map(|r| r.sequence).collect();
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
        assert!(
            state.reports.iter().all(|r| r.entries.is_empty()),
            "idle worker: sparse, empty"
        );
    }
    // A new snapshot is applied and acknowledged.
    controller.publish(vec![], vec![client("alice"), client("bob")]);
    acked(&controller, 2).await;

    // Fenced: the worker registers again with a new session and gets a snapshot again.
    let first_session = controller.state.lock().unwrap().acks[0].session_id.clone();
    controller.fence();
    eventually(Duration::from_secs(10), "re-registration", || {
        state.lock().unwrap().registrations >= 2
    })
    .await;
    eventually(Duration::from_secs(10), "ack in the new session", || {
        let state = state.lock().unwrap();
        state.acks.iter().any(|a| a.session_id != first_session)
    })
    .await;
    let sessions: HashSet<String> = controller
        .state
        .lock()
        .unwrap()
        .acks
        .iter()
        .map(|a| a.session_id.clone())
        .collect();
    assert_eq!(sessions.len(), 2);

    gateway.shutdown().await;
    let state = controller.state.lock().unwrap();
    let current = state.session.clone().unwrap();
    assert_eq!(
        state.ended,
        vec![current],
        "the live session is ended on shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_clearly_without_touching_an_upstream() {
    let controller = TestController::start(WORKER, 60_000).await;
    let mut alice = client("alice");
    alice.allowed_upstreams = vec![proxypool_core::UpstreamId::new("acme").unwrap()];
    controller.publish(vec![], vec![alice, client("team-b")]);
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    let target = "http://127.0.0.1:9/";
    let proxy = format!("http://{}", gateway.http);

    let missing = curl(&["-x", &proxy, target]).await;
    assert_eq!(missing.status, 407);
    assert_eq!(missing.header("x-proxypool-error"), Some("auth_required"));
    assert!(missing.header("proxy-authenticate").is_some());

    let wrong = curl(&["-x", &format!("http://alice:nope@{}", gateway.http), target]).await;
    assert_eq!(wrong.status, 407);

    let unknown = curl(&[
        "-x",
        &http_proxy_url("alice-colour-red", gateway.http),
        target,
    ])
    .await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.header("x-proxypool-error"), Some("bad_selector"));
    assert!(
        unknown.body.contains("unknown selector 'colour'"),
        "{}",
        unknown.body
    );

    let bad_time = curl(&[
        "-x",
        &http_proxy_url("alice-session-s1-sesstime-99999", gateway.http),
        target,
    ])
    .await;
    assert_eq!(bad_time.status, 400);
    assert!(bad_time.body.contains("sesstime"), "{}", bad_time.body);

    let other_upstream = curl(&[
        "-x",
        &http_proxy_url("alice-upstream-other", gateway.http),
        target,
    ])
    .await;
    assert_eq!(other_upstream.status, 403);
    assert_eq!(
        other_upstream.header("x-proxypool-error"),
        Some("forbidden")
    );

    // A client id with '-' still parses, and an empty snapshot means "no proxy", 503.
    let none = curl(&[
        "-x",
        &http_proxy_url("team-b-region-us", gateway.http),
        target,
    ])
    .await;
    assert_eq!(none.status, 503);
    assert_eq!(none.header("x-proxypool-error"), Some("no_eligible_proxy"));
    assert!(none.header("retry-after").is_some());

    let https = curl(&[
        "-x",
        &http_proxy_url("team-b", gateway.http),
        "-k",
        "https://127.0.0.1:9/",
    ])
    .await;
    assert_ne!(https.exit, 0, "CONNECT refused");

    // SOCKS5: bad credentials fail the auth step.
    let socks = curl(&[
        "-x",
        &format!("socks5h://alice:nope@{}", gateway.socks5),
        target,
    ])
    .await;
    assert_ne!(socks.exit, 0);

    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_snapshot_yet_is_gateway_stale_and_unhealthy() {
    let controller = TestController::start(WORKER, 60_000).await;
    let gateway = Running::start(config(&controller)).await;
    let response = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        "http://127.0.0.1:9/",
    ])
    .await;
    assert_eq!(response.status, 503);
    assert_eq!(response.header("x-proxypool-error"), Some("gateway_stale"));
    let health = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(health.status, 503);

    controller.publish(vec![], vec![client("alice")]);
    acked(&controller, 1).await;
    let health = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(health.status, 200);
    let metrics = curl(&[&format!("http://{}/metrics", gateway.admin)]).await;
    assert!(
        metrics
            .body
            .contains("proxypool_gateway_refusals_total{code=\"gateway_stale\"}"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("proxypool_gateway_snapshot_version"),
        "{}",
        metrics.body
    );
    let status = curl(&[&format!("http://{}/status", gateway.admin)]).await;
    assert!(status.body.contains("\"serving\":true"), "{}", status.body);
    gateway.shutdown().await;
}
