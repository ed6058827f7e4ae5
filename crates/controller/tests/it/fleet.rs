//! The gateway fleet's membership over the control API, on the memory store and on a
//! private Redis: the endpoints gateways report come back, sorted, in every report's answer
//! and at the fleet path; a closed session leaves the list; a malformed endpoint is refused
//! and stores nothing; the fleet path wants a token good for the worker it names.

use crate::common::*;
use hyper::{Method, StatusCode};
use proxypool_core::fleet::FLEET_PATH;
use serde_json::{Value, json};
use std::sync::Arc;

/// A controller on each store: memory, and a private Redis (skipped with a banner where
/// there is none; under `CI=true` a missing one fails), kept alive with it.
async fn on_each_store() -> Vec<(
    &'static str,
    proxypool_controller::Controller,
    Arc<dyn proxypool_core::ActivityPool>,
    Option<proxypool_testkit::RedisServer>,
)> {
    let (memory, pool, _clock) = controller(parse_config(&config_text(&static_upstream("acme"))));
    let mut stores: Vec<(_, _, Arc<dyn proxypool_core::ActivityPool>, _)> =
        vec![("memory", memory, pool, None)];
    if let Some(redis) = proxypool_testkit::private_redis_or_skip() {
        let store = format!(
            "[store]\nurl = \"{}\"\nkey_prefix = \"fleet\"\ncall_timeout = \"250ms\"\nleader_lease = \"2s\"\n",
            redis.url()
        );
        let config = parse_config(&config_text(&format!("{store}{}", static_upstream("acme"))));
        let opened = proxypool_controller::open_store(&config.store)
            .await
            .unwrap();
        // No store guard here: past the identity check, to the server itself.
        opened.pool.expect(None);
        let pool = opened.pool.clone();
        let controller = proxypool_controller::Controller::with_store(
            config,
            opened,
            proxypool_controller::ManualClock::new(T0),
        );
        stores.push(("redis", controller, pool, Some(redis)));
    }
    stores
}

fn pin(byte: &str) -> String {
    byte.repeat(32)
}

fn endpoint(address: &str, pin: &str) -> Value {
    json!({"address": address, "spki_sha256": pin})
}

/// A worker with a live session and an acknowledged snapshot: (reference, next sequence).
async fn ready(client: &ControlClient, worker: &str) -> Value {
    let registered = client.register(worker, "s").await;
    assert_eq!(registered.status, StatusCode::OK, "{:?}", registered.body);
    client.sync(worker, "s", 0).await.0
}

/// Sends a report of `worker`'s session `s` with `fleet` (none when `Null`).
async fn report(
    client: &ControlClient,
    worker: &str,
    sequence: u64,
    reference: &Value,
    fleet: Value,
) -> Reply {
    let mut body = json!({
        "worker": worker, "session_id": "s", "sequence": sequence,
        "snapshot": reference, "entries": [],
    });
    if !fleet.is_null() {
        body["fleet"] = fleet;
    }
    let path =
        proxypool_core::control::report_path(&proxypool_core::WorkerId::new(worker).unwrap());
    client.send(Method::POST, &path, Some(body)).await
}

/// The (worker, address, pin) of each member a list names, in its order.
fn members(list: &Value) -> Vec<(String, String, String)> {
    list.as_array()
        .map(|members| {
            members
                .iter()
                .map(|m| {
                    (
                        m["worker"].as_str().unwrap().to_owned(),
                        m["address"].as_str().unwrap().to_owned(),
                        m["spki_sha256"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn member(worker: &str, address: &str, pin: &str) -> (String, String, String) {
    (worker.to_owned(), address.to_owned(), pin.to_owned())
}

async fn fleet_of(client: &ControlClient, worker: &str) -> Reply {
    client
        .send(Method::GET, &format!("{FLEET_PATH}?worker={worker}"), None)
        .await
}

#[tokio::test]
async fn every_ack_lists_the_members_and_a_closed_session_leaves() {
    for (store, controller, _pool, _redis) in on_each_store().await {
        let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
        // Reported first by the later worker id: the list is sorted by worker, not by age.
        let b_ref = ready(&client, "gw-b").await;
        let a_ref = ready(&client, "gw-a").await;
        let silent_ref = ready(&client, "gw-c").await;

        let reply = report(
            &client,
            "gw-b",
            1,
            &b_ref,
            endpoint("10.0.0.2:7443", &pin("bb")),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{store}: {:?}", reply.body);
        let ack = reply.json();
        assert_eq!(
            members(&ack["fleet"]),
            vec![member("gw-b", "10.0.0.2:7443", &pin("bb"))],
            "{store}: a member sees itself in the answer to its first report"
        );
        assert_eq!(
            ack["fleet"][0]["since_ms"], T0,
            "{store}: the session's start"
        );

        let reply = report(
            &client,
            "gw-a",
            1,
            &a_ref,
            endpoint("gw-a.internal:7443", &pin("aa")),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{store}: {:?}", reply.body);
        let both = vec![
            member("gw-a", "gw-a.internal:7443", &pin("aa")),
            member("gw-b", "10.0.0.2:7443", &pin("bb")),
        ];
        assert_eq!(members(&reply.json()["fleet"]), both, "{store}");
        // A gateway without a fleet listener is no member, and is told the list anyway.
        let reply = report(&client, "gw-c", 1, &silent_ref, Value::Null).await;
        assert_eq!(members(&reply.json()["fleet"]), both, "{store}");
        let reply = report(
            &client,
            "gw-b",
            2,
            &b_ref,
            endpoint("10.0.0.2:7443", &pin("bb")),
        )
        .await;
        assert_eq!(members(&reply.json()["fleet"]), both, "{store}");

        let listed = fleet_of(&client, "gw-c").await;
        assert_eq!(listed.status, StatusCode::OK, "{store}: {:?}", listed.body);
        assert_eq!(members(&listed.json()["members"]), both, "{store}");

        // A new pin (a restarted listener) shows in the answer to the report naming it.
        let reply = report(
            &client,
            "gw-a",
            2,
            &a_ref,
            endpoint("gw-a.internal:7443", &pin("a1")),
        )
        .await;
        assert_eq!(
            members(&reply.json()["fleet"])[0],
            member("gw-a", "gw-a.internal:7443", &pin("a1")),
            "{store}"
        );

        assert_eq!(
            client.close("gw-b", "s").await.status,
            StatusCode::NO_CONTENT
        );
        let reply = report(
            &client,
            "gw-a",
            3,
            &a_ref,
            endpoint("gw-a.internal:7443", &pin("a1")),
        )
        .await;
        assert_eq!(
            members(&reply.json()["fleet"]),
            vec![member("gw-a", "gw-a.internal:7443", &pin("a1"))],
            "{store}: the closed session left"
        );
        assert_eq!(
            members(&fleet_of(&client, "gw-a").await.json()["members"]),
            vec![member("gw-a", "gw-a.internal:7443", &pin("a1"))],
            "{store}"
        );

        // A report without an endpoint takes the worker out.
        let reply = report(&client, "gw-a", 4, &a_ref, Value::Null).await;
        assert_eq!(reply.status, StatusCode::OK, "{store}");
        assert!(
            reply.json().get("fleet").is_none(),
            "{store}: an empty list is left out"
        );
    }
}

#[tokio::test]
async fn a_bad_endpoint_is_refused_and_stores_nothing() {
    for (store, controller, pool, _redis) in on_each_store().await {
        let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
        let reference = ready(&client, "gw-a").await;
        let worker = proxypool_core::WorkerId::new("gw-a").unwrap();
        for (bad, why) in [
            (endpoint("10.0.0.1", &pin("aa")), "no port"),
            (endpoint("10.0.0.1:0", &pin("aa")), "port 0"),
            (
                endpoint(&format!("{}:1", "h".repeat(300)), &pin("aa")),
                "too long",
            ),
            (endpoint("10.0.0.1:7443", &pin("AA")), "upper-case pin"),
            (endpoint("10.0.0.1:7443", "abc"), "short pin"),
        ] {
            let reply = report(&client, "gw-a", 1, &reference, bad).await;
            assert_eq!(
                (reply.status, reply.error_code().as_str()),
                (StatusCode::BAD_REQUEST, "invalid_request"),
                "{store}: {why}: {:?}",
                reply.body
            );
            assert!(
                reply.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("fleet"),
                "{store}: {why}: the message names what is wrong"
            );
            assert_eq!(
                pool.runtime(T0, &worker).await.unwrap(),
                None,
                "{store}: {why}: nothing stored"
            );
            assert!(
                members(&fleet_of(&client, "gw-a").await.json()["members"]).is_empty(),
                "{store}: {why}"
            );
        }
        // The same sequence is still free: the refused reports took nothing.
        let reply = report(
            &client,
            "gw-a",
            1,
            &reference,
            endpoint("10.0.0.1:7443", &pin("aa")),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{store}: {:?}", reply.body);
        assert_eq!(members(&reply.json()["fleet"]).len(), 1, "{store}");
    }
}

#[tokio::test]
async fn the_fleet_path_wants_a_token_for_the_named_worker() {
    let (controller, _pool, _clock) =
        controller(parse_config(&config_text(&static_upstream("acme"))));
    let addr = serve_control(&controller).await;
    let anonymous = ControlClient::new(addr, None);
    let reply = fleet_of(&anonymous, "gw-a").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    let reply = anonymous.send(Method::GET, FLEET_PATH, None).await;
    assert_eq!(
        reply.status,
        StatusCode::UNAUTHORIZED,
        "the token before the query"
    );
    let wrong = ControlClient::new(addr, Some("not-the-token"));
    assert_eq!(
        fleet_of(&wrong, "gw-a").await.status,
        StatusCode::UNAUTHORIZED
    );

    let only_a = ControlClient::new(addr, Some("only-a-token"));
    assert_eq!(fleet_of(&only_a, "gw-a").await.status, StatusCode::OK);
    let reply = fleet_of(&only_a, "gw-b").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    let reply = only_a.send(Method::GET, FLEET_PATH, None).await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_request"),
        "the worker is required"
    );
    let reply = fleet_of(&only_a, "bad%20id").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let empty = fleet_of(&only_a, "gw-a").await.json();
    assert_eq!(empty, json!({"members": []}));
}
