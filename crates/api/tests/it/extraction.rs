//! Extraction over HTTP: the response shape, idempotent replays charged once, reads of
//! one's own extraction, filters, the gateway reserve, and 50 concurrent clients that never
//! receive the same proxy twice. Each test runs on the memory and the SQLite quota.

use crate::common::*;
use proxypool_api::ExtractionSettings;
use proxypool_quota::Operation;
use serde_json::{Value, json};
use std::collections::HashSet;

on_memory_and_sqlite!(
    an_extraction_hands_out_proxies_with_credentials,
    a_keyed_replay_is_identical_and_charged_once,
    requests_without_a_key_are_new_every_time,
    filters_and_modes_are_honoured,
    the_gateway_reserve_stays_in_the_pool,
    fifty_concurrent_clients_never_share_a_proxy,
);

async fn an_extraction_hands_out_proxies_with_credentials(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    let ids = server.seed("acme", 0, 4).await;
    let reply = server.extract(ALICE, Some("first"), &body(3)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.header("cache-control"),
        Some("no-store"),
        "credentials inside"
    );
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("idempotent-replayed"), Some("false"));
    assert_eq!(
        reply.header("ratelimit-policy"),
        Some("\"extract\";q=100;w=60")
    );
    assert!(
        reply
            .header("ratelimit")
            .unwrap()
            .starts_with("\"extract\";r=99;t=")
    );
    assert!(reply.header("x-request-id").unwrap().starts_with("req-"));

    let extraction = reply.json();
    assert!(extraction["id"].as_str().unwrap().starts_with("ex_"));
    assert_eq!(
        (
            extraction["requested"].as_u64(),
            extraction["returned"].as_u64()
        ),
        (Some(3), Some(3))
    );
    let proxies = extraction["proxies"].as_array().unwrap();
    assert_eq!(proxies.len(), 3);
    for proxy in proxies {
        let id = proxy["id"].as_str().unwrap();
        assert!(ids.iter().any(|known| known.as_str() == id));
        let n: usize = proxy["host"].as_str().unwrap()[1..]
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(proxy["username"], format!("user{n}"));
        assert_eq!(proxy["password"], format!("pw-secret-{n}"));
        assert_eq!(proxy["protocol"], "http");
        assert_eq!(proxy["upstream"], "acme");
        assert!(proxy["usable_until"].as_u64().unwrap() < proxy["expires_at"].as_u64().unwrap());
    }
    assert_eq!(server.unextracted("acme").await, 1);
}

async fn a_keyed_replay_is_identical_and_charged_once(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 6).await;
    let request = json!({"count": 2, "filters": {"protocol": "http"}});
    let first = server.extract(ALICE, Some("order-17"), &request).await;
    assert_eq!(first.status, 200);
    let again = server.extract(ALICE, Some("order-17"), &request).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body, "a replay is byte-identical");
    assert_ne!(again.header("x-request-id"), first.header("x-request-id"));
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(server.unextracted("acme").await, 4);

    // The stored extraction reads back identically, for its owner only.
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let read = server
        .get(&format!("/v1/extractions/{id}"), Some(ALICE))
        .await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, first.body);
    assert_eq!(
        read.header("ratelimit-policy"),
        Some("\"inspect\";q=100;w=60")
    );
    server
        .get(&format!("/v1/extractions/{id}"), Some(BOB))
        .await
        .assert_error(404, "not_found");

    // The same key from another client is another extraction.
    let bob = server.extract(BOB, Some("order-17"), &request).await;
    assert_eq!(bob.status, 200);
    assert_ne!(bob.json()["id"], first.json()["id"]);
}

async fn requests_without_a_key_are_new_every_time(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 6).await;
    let one = server.extract(ALICE, None, &body(1)).await.json();
    let two = server.extract(ALICE, None, &body(1)).await.json();
    assert_ne!(one["id"], two["id"]);
    assert_ne!(one["proxies"][0]["id"], two["proxies"][0]["id"]);
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        2
    );
}

async fn filters_and_modes_are_honoured(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 6).await; // regions us, de, us, de, us, de
    server.seed("globex", 100, 2).await;
    let de = server
        .extract(
            ALICE,
            None,
            &json!({"count": 10, "filters": {"region": "DE", "upstream": "acme"}}),
        )
        .await
        .json();
    assert_eq!(de["returned"], 3, "partial: what there is");
    assert_eq!(de["requested"], 10);
    assert!(
        de["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["region"] == "de")
    );

    server
        .extract(
            ALICE,
            None,
            &json!({"count": 4, "mode": "all_or_nothing", "filters": {"upstream": "acme"}}),
        )
        .await
        .assert_error(409, "insufficient_inventory");
    assert_eq!(server.unextracted("acme").await, 3);
    let all = server
        .extract(
            ALICE,
            None,
            &json!({"count": 3, "mode": "all_or_nothing", "filters": {"upstream": "acme"}}),
        )
        .await
        .json();
    assert_eq!(all["returned"], 3);

    let none = server
        .extract(
            ALICE,
            None,
            &json!({"count": 2, "filters": {"upstream": "acme"}}),
        )
        .await;
    assert_eq!(none.status, 200);
    assert_eq!(
        none.json()["returned"],
        0,
        "partial with nothing left is an empty answer"
    );

    let globex = server
        .extract(
            ALICE,
            None,
            &json!({"count": 5, "filters": {"protocol": "socks5"}}),
        )
        .await
        .json();
    assert_eq!(globex["returned"], 0, "no socks5 proxies");
}

async fn the_gateway_reserve_stays_in_the_pool(kind: QuotaKind) {
    let server = server_on(
        kind,
        100,
        Setup {
            extraction: ExtractionSettings {
                reserve_for_gateway: 2,
                ..ExtractionSettings::default()
            },
            ..Setup::default()
        },
    )
    .await;
    server.seed("acme", 0, 5).await;
    let reply = server.extract(ALICE, None, &body(5)).await.json();
    assert_eq!(reply["returned"], 3);
    assert_eq!(server.unextracted("acme").await, 2);
}

async fn fifty_concurrent_clients_never_share_a_proxy(kind: QuotaKind) {
    const CLIENTS: usize = 50;
    const ROUNDS: usize = 3;
    let mut setup = Setup {
        limits: one_address_limits(),
        ..Setup::default()
    };
    setup.clients.extend(many_clients(CLIENTS));
    let server = server_on(kind, 1000, setup).await;
    // Fewer proxies than asked for in total, so clients really compete for the last ones.
    let seeded = server.seed("acme", 0, 2 * CLIENTS * ROUNDS + 7).await.len();

    let mut handed_out: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let http = server.http.clone();
                let url = server.url("/v1/extractions");
                tokio::spawn(async move {
                    let response = http
                        .post(url)
                        .bearer_auth(many_token(i))
                        .header("content-type", "application/json")
                        .header("idempotency-key", format!("round-{round}-client-{i}"))
                        .body(json!({"count": 3}).to_string())
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200);
                    let body: Value =
                        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
                    body["proxies"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p["id"].as_str().unwrap().to_owned())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for task in tasks {
            handed_out.extend(task.await.unwrap());
        }
    }
    let distinct: HashSet<&String> = handed_out.iter().collect();
    assert_eq!(
        distinct.len(),
        handed_out.len(),
        "a proxy was handed out twice"
    );
    assert_eq!(
        handed_out.len(),
        seeded,
        "every proxy handed out exactly once"
    );
    assert_eq!(server.unextracted("acme").await, 0);
}
