//! The worker control API over real HTTP: session fencing, authentication, long-poll,
//! report sequencing and the error format.

use crate::common::*;
use hyper::{Method, StatusCode};
use std::time::{Duration, Instant};

async fn setup() -> (
    proxypool_controller::Controller,
    ControlClient,
    std::net::SocketAddr,
) {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, _clock) = controller(config);
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let addr = serve_control(&controller).await;
    (
        controller,
        ControlClient::new(addr, Some(WORKER_TOKEN)),
        addr,
    )
}

#[tokio::test]
async fn a_new_session_fences_the_old_one() {
    let (controller, client, _) = setup().await;
    let grant = client.register("gw-a", "old").await;
    assert_eq!(grant.status, StatusCode::OK);
    let grant = grant.json();
    assert_eq!(grant["session_ttl_ms"], 30_000);
    assert_eq!(grant["report_interval_ms"], 5_000);
    assert_eq!(grant["snapshot_wait_ms"], 10_000);
    assert_eq!(grant["expires_at_ms"], T0 + 30_000);
    controller.ownership_manager().round().await.unwrap();
    let (old_ref, owned) = client.sync("gw-a", "old", 0).await;
    assert_eq!(owned.len(), 3);

    // The worker restarts with a new session id.
    assert_eq!(client.register("gw-a", "new").await.status, StatusCode::OK);

    let reply = client.snapshot("gw-a", "old", 0, 0).await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::CONFLICT, "fenced")
    );
    let reply = client.ack("gw-a", "old", &old_ref).await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::CONFLICT, "fenced")
    );
    let reply = client.report("gw-a", "old", 9, &old_ref, &[]).await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::CONFLICT, "fenced")
    );
    let reply = client.close("gw-a", "old").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::CONFLICT, "fenced")
    );

    // The new session continues the version sequence from the store.
    let (new_ref, owned) = client.sync("gw-a", "new", 0).await;
    assert_eq!(owned.len(), 3);
    assert_eq!(new_ref["version"], 1);
    let reply = client.report("gw-a", "new", 1, &new_ref, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);

    // Re-registering the same session id renews it (an idempotent retry).
    assert_eq!(client.register("gw-a", "new").await.status, StatusCode::OK);
    let reply = client.report("gw-a", "new", 2, &new_ref, &[]).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the same session is not fenced by its own retry"
    );

    assert_eq!(
        client.close("gw-a", "new").await.status,
        StatusCode::NO_CONTENT
    );
    let reply = client.snapshot("gw-a", "new", 0, 0).await;
    assert_eq!(reply.error_code(), "fenced");
}

#[tokio::test]
async fn tokens_are_required_and_scoped() {
    let (_controller, _client, addr) = setup().await;
    let anonymous = ControlClient::new(addr, None);
    let reply = anonymous.register("gw-a", "s").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    assert!(reply.headers.contains_key("www-authenticate"));
    assert!(reply.json()["request_id"].as_str().unwrap().len() > 3);

    let wrong = ControlClient::new(addr, Some("not-the-token"));
    assert_eq!(
        wrong.register("gw-a", "s").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        wrong.snapshot("gw-a", "s", 0, 0).await.status,
        StatusCode::UNAUTHORIZED
    );

    let only_a = ControlClient::new(addr, Some("only-a-token"));
    assert_eq!(only_a.register("gw-a", "s").await.status, StatusCode::OK);
    let reply = only_a.register("gw-b", "s").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
}

/// A gateway's token is good for its own worker id only: presented for another id, every
/// route refuses it with 403 before touching that worker's session, which goes on as if
/// nothing happened.
#[tokio::test]
async fn a_gateway_token_used_for_another_worker_id_is_refused() {
    let (controller, owner, addr) = setup().await;
    // gw-b's own session, opened and synced with a token good for it.
    assert_eq!(owner.register("gw-b", "b1").await.status, StatusCode::OK);
    controller.ownership_manager().round().await.unwrap();
    let (reference, owned) = owner.sync("gw-b", "b1", 0).await;
    assert_eq!(owned.len(), 3);

    // The token of gw-a, on every route of gw-b.
    let gw_a = ControlClient::new(addr, Some("only-a-token"));
    let forbidden = |reply: Reply, route: &str| {
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{route}: {:?}",
            String::from_utf8_lossy(&reply.body)
        );
    };
    forbidden(gw_a.register("gw-b", "b1").await, "register");
    forbidden(
        gw_a.register("gw-b", "stolen").await,
        "register a new session",
    );
    forbidden(gw_a.snapshot("gw-b", "b1", 0, 0).await, "snapshot");
    forbidden(gw_a.ack("gw-b", "b1", &reference).await, "ack");
    forbidden(
        gw_a.report("gw-b", "b1", 1, &reference, &[]).await,
        "report",
    );
    forbidden(gw_a.close("gw-b", "b1").await, "close");

    // gw-b's session was neither fenced nor closed, and its proxies are still its own.
    let reply = owner.report("gw-b", "b1", 1, &reference, &[]).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    let (_, still) = owner.sync("gw-b", "b1", 0).await;
    assert_eq!(still, owned);
    // The same token is good for its own id.
    assert_eq!(gw_a.register("gw-a", "a1").await.status, StatusCode::OK);
}

#[tokio::test]
async fn long_polls_wait_and_wake_on_changes() {
    let (controller, client, _) = setup().await;
    client.register("gw-a", "s").await;
    // Nothing assigned yet: the first snapshot is empty, version 1.
    let (first, owned) = client.sync("gw-a", "s", 0).await;
    assert!(owned.is_empty());
    assert_eq!(first["version"], 1);

    // Up to date: the poll waits the requested time, then 204.
    let started = Instant::now();
    let reply = client.snapshot("gw-a", "s", 1, 300).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert!(started.elapsed() >= Duration::from_millis(290));

    // A waiting poll is answered as soon as ownership changes. Whether the round runs while
    // the poll waits or before it arrives, the answer is the new snapshot, long before the
    // poll's 8 s are up. (That a poll already waiting notices the change: `recorder`'s
    // `snapshot_versions`, which can see the poll looking.)
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.snapshot("gw-a", "s", 1, 8_000).await })
    };
    let started = Instant::now();
    controller.ownership_manager().round().await.unwrap();
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(reply.headers["cache-control"], "no-store");
    let snapshot = reply.json();
    assert_eq!(snapshot["reference"]["version"], 2);
    assert_eq!(snapshot["proxies"].as_array().unwrap().len(), 3);
    assert_eq!(snapshot["max_staleness_ms"], 60_000);

    // A lost response: polling again from the old version serves the same snapshot.
    let again = client.snapshot("gw-a", "s", 1, 0).await.json();
    assert_eq!(again["reference"], snapshot["reference"]);
}

#[tokio::test]
async fn reports_are_strictly_sequenced_and_renew_the_session() {
    let (controller, client, _) = setup().await;
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();
    let (reference, owned) = client.sync("gw-a", "s", 0).await;

    let entries = [(owned[0].as_str(), 2, 1)];
    let first = client.report("gw-a", "s", 5, &reference, &entries).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.json()["outcome"], "accepted");
    assert_eq!(first.json()["session_expires_at_ms"], T0 + 30_000);
    let replay = client.report("gw-a", "s", 5, &reference, &entries).await;
    assert_eq!(replay.json()["outcome"], "replayed");
    let conflicting = client.report("gw-a", "s", 5, &reference, &[]).await;
    assert_eq!(
        (conflicting.status, conflicting.error_code().as_str()),
        (StatusCode::CONFLICT, "conflict")
    );
    let older = client.report("gw-a", "s", 4, &reference, &[]).await;
    assert_eq!(older.status, StatusCode::CONFLICT);

    // A report against a snapshot the session never acknowledged is refused.
    let mut other = reference.clone();
    other["version"] = serde_json::json!(99);
    let reply = client.report("gw-a", "s", 6, &other, &[]).await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_stale_entry_is_named_and_the_rest_of_the_report_applies() {
    use proxypool_core::WorkerRuntimeStore;
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, _clock) = controller(config);
    seed_available(pool.as_ref(), T0, "acme", 4).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "a").await;
    client.register("gw-b", "b").await;
    controller.ownership_manager().round().await.unwrap();
    let (a_ref, a_owned) = client.sync("gw-a", "a", 0).await;
    let (b_ref, b_owned) = client.sync("gw-b", "b", 0).await;
    assert!(
        !a_owned.is_empty() && !b_owned.is_empty(),
        "both workers hold proxies"
    );

    // gw-a still has a tunnel open through a proxy that is gw-b's now.
    let entries = [(a_owned[0].as_str(), 1, 0), (b_owned[0].as_str(), 2, 0)];
    let reply = client.report("gw-a", "a", 1, &a_ref, &entries).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let ack = reply.json();
    assert_eq!(ack["outcome"], "accepted");
    assert_eq!(ack["stale_proxies"], serde_json::json!([b_owned[0]]));
    assert_eq!(ack["session_expires_at_ms"], T0 + 30_000);
    let gw_a = proxypool_core::WorkerId::new("gw-a").unwrap();
    let stored = pool.runtime(T0, &gw_a).await.unwrap().unwrap();
    let stored: Vec<String> = stored
        .report
        .entries
        .iter()
        .map(|e| e.proxy_id.to_string())
        .collect();
    assert_eq!(stored, [a_owned[0].clone()], "the owned entry is stored");

    let replay = client.report("gw-a", "a", 1, &a_ref, &entries).await.json();
    assert_eq!(
        (replay["outcome"].clone(), replay["stale_proxies"].clone()),
        (serde_json::json!("replayed"), ack["stale_proxies"].clone())
    );
    // The next report is not refused either, and the real owner's reports are unaffected.
    let next = client.report("gw-a", "a", 2, &a_ref, &entries).await;
    assert_eq!(next.status, StatusCode::OK);
    let theirs = client
        .report("gw-b", "b", 1, &b_ref, &[(b_owned[0].as_str(), 1, 0)])
        .await;
    assert_eq!(theirs.status, StatusCode::OK);
    assert!(
        theirs.json().get("stale_proxies").is_none(),
        "nothing stale"
    );
}

#[tokio::test]
async fn bad_requests_get_the_error_body() {
    let (_controller, client, _) = setup().await;
    let reply = client
        .send(
            Method::POST,
            proxypool_core::control::SESSIONS_PATH,
            Some(serde_json::json!({"worker": "gw-a", "session_id": "s", "extra": 1})),
        )
        .await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("extra")
    );

    let reply = client.register("bad worker id", "s").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    let reply = client.snapshot("gw-a", "s", 0, 0).await;
    assert_eq!(
        reply.error_code(),
        "fenced",
        "no session yet: register first"
    );

    let reply = client.send(Method::GET, "/control/v1/nope", None).await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    assert!(reply.headers.contains_key("x-request-id"));

    let reply = client
        .send(
            Method::GET,
            "/control/v1/workers/gw-a/snapshot?after_version=1",
            None,
        )
        .await;
    assert_eq!(
        reply.status,
        StatusCode::BAD_REQUEST,
        "session_id is required"
    );
}

#[test]
fn routes_match_the_paths_the_gateway_uses() {
    let worker = proxypool_core::WorkerId::new("gw-1").unwrap();
    assert_eq!(
        proxypool_core::control::snapshot_path(&worker),
        "/control/v1/workers/gw-1/snapshot"
    );
    assert_eq!(
        proxypool_core::control::ack_path(&worker),
        "/control/v1/workers/gw-1/snapshot-ack"
    );
    assert_eq!(
        proxypool_core::control::report_path(&worker),
        "/control/v1/workers/gw-1/reports"
    );
    assert_eq!(
        proxypool_core::control::session_path(&worker, "s1"),
        "/control/v1/workers/gw-1/sessions/s1"
    );
}

/// A gateway of another control protocol is refused at registration and at the snapshot
/// long-poll, with a message that says which side to upgrade, and nothing is opened for it.
#[tokio::test]
async fn a_gateway_of_another_control_protocol_is_refused_with_a_clear_message() {
    let (_controller, client, _) = setup().await;
    let ours = proxypool_snapshot::CONTROL_PROTOCOL;
    for (protocol, upgrade) in [
        (None, "upgrade the gateway"),
        (Some(ours + 1), "upgrade the controller"),
    ] {
        let mut body = serde_json::json!({"worker": "gw-a", "session_id": "s", "version": "old"});
        if let Some(protocol) = protocol {
            body["protocol"] = serde_json::json!(protocol);
        }
        let reply = client
            .send(
                Method::POST,
                proxypool_core::control::SESSIONS_PATH,
                Some(body),
            )
            .await;
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (StatusCode::BAD_REQUEST, "protocol_mismatch")
        );
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(upgrade), "{message}");
    }
    // Nothing was opened: the same session id registers now with the right protocol.
    assert_eq!(client.register("gw-a", "s").await.status, StatusCode::OK);

    // A long-poll without the protocol (a gateway from before it) is refused, not answered
    // with an update it could not read.
    let reply = client
        .send(
            Method::GET,
            "/control/v1/workers/gw-a/snapshot?session_id=s&after_version=0&wait_ms=0",
            None,
        )
        .await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::BAD_REQUEST, "protocol_mismatch")
    );
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upgrade the gateway")
    );
    assert_eq!(
        client.snapshot("gw-a", "s", 0, 0).await.status,
        StatusCode::OK
    );
}
