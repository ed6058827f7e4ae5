//! The control loop against a test controller, and the refusals that need no upstream.

use crate::common::control::TestController;
use crate::common::*;
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

/// A clean stop sends one last report (with the usage counted since the previous one)
/// before it ends the session, even when the next periodic report is far away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_reports_once_more_before_ending_the_session() {
    let controller = TestController::start(WORKER, 60_000).await;
    controller.state.lock().unwrap().report_interval_ms = 60_000;
    controller.publish(vec![], vec![client("alice")]);
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    // The interval's first tick comes at registration, usually before the acknowledgement
    // (then nothing is reported); on a loaded machine it may come just after it and report
    // while `before` is read. The next periodic one is a minute away either way, so the
    // stop's report is the one that must come after `before`, last before the session end.
    let before = controller.state.lock().unwrap().reports.len();
    gateway.shutdown().await;
    let state = controller.state.lock().unwrap();
    assert!(state.reports.len() > before, "one report at the stop");
    let last = state.reports.last().unwrap();
    assert!(last.usage.is_some(), "usage rides in every report");
    let last_calls: Vec<&str> = state
        .calls
        .iter()
        .rev()
        .take(2)
        .map(String::as_str)
        .collect();
    assert!(
        last_calls[0].contains("/sessions/") && last_calls[1].ends_with("/reports"),
        "{last_calls:?}"
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

    // A client id with '-' still parses, and a snapshot the controller gave no proxies is
    // "no leased proxies", 503: not the selectors' fault.
    let none = curl(&[
        "-x",
        &http_proxy_url("team-b-region-us", gateway.http),
        target,
    ])
    .await;
    assert_eq!(none.status, 503);
    assert_eq!(none.header("x-proxypool-error"), Some("no_leased_proxies"));
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
async fn no_snapshot_yet_is_gateway_stale_and_not_ready_but_alive() {
    let _alone = alone().await;
    let controller = TestController::start(WORKER, 60_000).await;
    let gateway = Running::start(config(&controller)).await;
    let stale_refusals = "proxypool_gateway_refusals_total{code=\"gateway_stale\"}";
    let stale_before = metric(&gateway, stale_refusals).await.unwrap_or(0.0);
    let response = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        "http://127.0.0.1:9/",
    ])
    .await;
    assert_eq!(response.status, 503);
    assert_eq!(response.header("x-proxypool-error"), Some("gateway_stale"));
    let ready = curl(&[&format!("http://{}/readyz", gateway.admin)]).await;
    assert_eq!(ready.status, 503);
    assert!(
        ready.body.contains("\"reason\":\"no_snapshot\""),
        "{}",
        ready.body
    );
    // Liveness is not readiness: the process answers, so it is not to be restarted.
    let health = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(health.status, 200);

    // A snapshot without proxies: serving (fresh), but not ready (nothing leased).
    controller.publish(vec![], vec![client("alice")]);
    acked(&controller, 1).await;
    let ready = curl(&[&format!("http://{}/readyz", gateway.admin)]).await;
    assert_eq!(ready.status, 503);
    assert!(
        ready.body.contains("\"reason\":\"no_leased_proxies\""),
        "{}",
        ready.body
    );
    let health = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(health.status, 200);
    assert_eq!(
        metric(&gateway, stale_refusals).await,
        Some(stale_before + 1.0),
        "the refusal is counted"
    );
    let metrics = curl(&[&format!("http://{}/metrics", gateway.admin)]).await;
    assert!(
        metrics.body.contains("proxypool_gateway_snapshot_version"),
        "{}",
        metrics.body
    );
    let status = curl(&[&format!("http://{}/status", gateway.admin)]).await;
    let status: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(status["serving"], true, "{status}");
    assert_eq!(status["ready"], false, "{status}");
    assert_eq!(status["not_ready_reason"], "no_leased_proxies", "{status}");
    assert_eq!(status["leases"]["proxies"], 0, "{status}");
    gateway.shutdown().await;
}

/// Reads until the peer closes (or `limit` passes); returns what arrived and whether it closed.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, limit: Duration) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&seen).into_owned(), true),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&seen).into_owned(), false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limits_timeouts_and_ip_allowlist() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    let controller = TestController::start(WORKER, 60_000).await;
    let mut fenced_off = client("far");
    fenced_off.ip_allowlist = vec!["10.0.0.0/8".into()];
    let mut near = client("near");
    near.ip_allowlist = vec!["127.0.0.0/8".into()];
    controller.publish(vec![], vec![fenced_off, near]);
    let mut settings = config(&controller);
    settings.limits.max_connections = 3;
    settings.limits.header_read_timeout = Millis(300);
    settings.limits.keepalive_idle = Millis(400);
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;

    // Source IP allowlist.
    let far = curl(&[
        "-x",
        &http_proxy_url("far", gateway.http),
        "http://127.0.0.1:9/",
    ])
    .await;
    assert_eq!(far.status, 403);
    assert!(far.body.contains("allowlist"), "{}", far.body);
    let near = curl(&[
        "-x",
        &http_proxy_url("near", gateway.http),
        "http://127.0.0.1:9/",
    ])
    .await;
    assert_eq!(
        near.status, 503,
        "allowed through to selection (no proxies)"
    );

    // A client that never finishes its request head is cut off by the header timeout.
    let mut slow = TcpStream::connect(gateway.http).await.unwrap();
    slow.write_all(b"GET http://x/ HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let (_, closed) = read_until_closed(&mut slow, Duration::from_secs(5)).await;
    assert!(
        closed && started.elapsed() < Duration::from_secs(3),
        "header read timeout"
    );

    // A kept-alive connection that goes quiet is closed by the idle watchdog.
    let mut idle = TcpStream::connect(gateway.http).await.unwrap();
    idle.write_all(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
        .await
        .unwrap();
    let (answer, closed) = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 407"), "{answer}");
    assert!(closed, "idle kept-alive connection closed");

    // The global connection cap: three silent connections held; a fourth is admitted by
    // closing the oldest of them, and is served.
    let mut held = Vec::new();
    for n in 1..=3 {
        held.push(TcpStream::connect(gateway.http).await.unwrap());
        // Admitted one after the other, so which one is the oldest is known.
        holds_connections(&gateway, n).await;
    }
    let mut extra = TcpStream::connect(gateway.http).await.unwrap();
    let (_, oldest_closed) = read_until_closed(&mut held[0], Duration::from_secs(2)).await;
    assert!(oldest_closed, "the oldest silent connection made room");
    extra
        .write_all(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = read_until_closed(&mut extra, Duration::from_secs(2)).await;
    assert!(
        answer.starts_with("HTTP/1.1 407"),
        "the newcomer is served: {answer}"
    );
    drop(held);
    gateway.shutdown().await;
}
