//! Every error code, each produced by a real request against a real server, with the
//! error shape, request id and headers the API conventions ask for (docs/ARCHITECTURE.md).

use crate::common::*;
use proxypool_api::{ApiLimits, ExtractionSettings, ShieldSettings};
use proxypool_quota::{Operation, OperationLimits, QuotaConfig};
use proxypool_testkit::edge::OTHER_SOURCE;
use proxypool_throttle::Policy;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn invalid_request_names_the_field() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 4).await;
    let cases = [
        (json!({"count": 0}), "count"),
        (json!({"count": 101}), "count"),
        (json!({"count": -3}), "count"),
        (json!({"count": "two"}), "count"),
        (json!({"count": 1, "colour": "red"}), "colour"),
        (json!({"count": 1, "filters": {"regoin": "us"}}), "regoin"),
        (
            json!({"count": 1, "filters": {"region": "not a label"}}),
            "filters.region",
        ),
        (
            json!({"count": 1, "filters": {"protocol": "ftp"}}),
            "filters.protocol",
        ),
        (json!({"count": 1, "mode": "some"}), "mode"),
        (json!({}), "count"),
    ];
    for (body, field) in cases {
        let reply = server.extract(ALICE, None, &body).await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(
            message.contains(field),
            "{body}: {message:?} should name {field}"
        );
    }

    // Not JSON at all, and JSON with trailing garbage.
    for raw in ["{\"count\": 1", "{\"count\": 1} extra", ""] {
        let reply = Reply::from(
            server
                .http
                .post(server.url("/v1/extractions"))
                .bearer_auth(ALICE)
                .header("content-type", "application/json")
                .body(raw)
                .send()
                .await
                .unwrap(),
        )
        .await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(message.starts_with("body: "), "{message}");
    }

    // Wrong or missing content type.
    for content_type in [Some("text/plain"), None] {
        let mut request = server
            .http
            .post(server.url("/v1/extractions"))
            .bearer_auth(ALICE)
            .body(body(1).to_string());
        if let Some(value) = content_type {
            request = request.header("content-type", value);
        }
        let reply = Reply::from(request.send().await.unwrap()).await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(message.contains("Content-Type"), "{message}");
    }

    // A bad idempotency key.
    for key in ["-leading-dash", "has space", &"k".repeat(256)] {
        let reply = server.extract(ALICE, Some(key), &body(1)).await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(message.contains("Idempotency-Key"), "{message}");
    }
    assert_eq!(
        server.unextracted("acme").await,
        4,
        "no input error extracts"
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", proxypool_quota::Operation::Extract)
            .await,
        0,
        "no input error is charged"
    );
}

#[tokio::test]
async fn unauthenticated_without_or_with_a_wrong_token() {
    let server = TestServer::memory(Setup::default()).await;
    let reply = server.get("/v1/upstreams", None).await;
    reply.assert_error(401, "unauthenticated");
    assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    server
        .get("/v1/upstreams", Some("token-nobody"))
        .await
        .assert_error(401, "unauthenticated");
    let basic = Reply::from(
        server
            .http
            .get(server.url("/v1/upstreams"))
            .header("authorization", "Basic YWxpY2U6eA==")
            .send()
            .await
            .unwrap(),
    )
    .await;
    basic.assert_error(401, "unauthenticated");
}

#[tokio::test]
async fn forbidden_outside_allowed_upstreams_and_for_non_admins() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 4).await;
    let reply = server
        .extract(
            NARROW,
            None,
            &json!({"count": 1, "filters": {"upstream": "globex"}}),
        )
        .await;
    let message = reply.assert_error(403, "forbidden");
    assert!(message.contains("filters.upstream"), "{message}");
    server
        .extract(
            NARROW,
            None,
            &json!({"count": 1, "filters": {"region": "de"}}),
        )
        .await
        .assert_error(403, "forbidden");
    server
        .extract(TWO, None, &body(1))
        .await
        .assert_error(403, "forbidden");
    server
        .get("/v1/upstreams/globex/inventory", Some(NARROW))
        .await
        .assert_error(403, "forbidden");
    server
        .get("/v1/admin/workers", Some(ALICE))
        .await
        .assert_error(403, "forbidden");
    let drain = Reply::from(
        server
            .http
            .post(server.url("/v1/admin/workers/gw-1/drain"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap(),
    )
    .await;
    drain.assert_error(403, "forbidden");
}

#[tokio::test]
async fn not_found_is_the_same_for_unknown_and_foreign_objects() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 4).await;
    let created = server.extract(ALICE, Some("alice-1"), &body(1)).await;
    assert_eq!(created.status, 200, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();

    let foreign = server
        .get(&format!("/v1/extractions/{id}"), Some(BOB))
        .await;
    let unknown = server
        .get(
            "/v1/extractions/ex_00000000000000000000000000000000",
            Some(BOB),
        )
        .await;
    let malformed = server.get("/v1/extractions/nope", Some(BOB)).await;
    let messages: Vec<String> = [&foreign, &unknown, &malformed]
        .iter()
        .map(|reply| reply.assert_error(404, "not_found"))
        .collect();
    assert!(messages.iter().all(|m| m == &messages[0]), "{messages:?}");

    server
        .get("/v1/upstreams/nosuch/inventory", Some(ALICE))
        .await
        .assert_error(404, "not_found");
    server
        .get("/v1/nothing-here", Some(ALICE))
        .await
        .assert_error(404, "not_found");
    let drain = Reply::from(
        server
            .http
            .post(server.url("/v1/admin/workers/gw-unknown/drain"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    drain.assert_error(404, "not_found");
}

#[tokio::test]
async fn method_not_allowed_has_the_error_shape() {
    let server = TestServer::memory(Setup::default()).await;
    let reply = Reply::from(
        server
            .http
            .delete(server.url("/v1/upstreams"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap(),
    )
    .await;
    reply.assert_error(405, "method_not_allowed");
}

#[tokio::test]
async fn conflicts_idempotency_and_insufficient_inventory() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 3).await;
    assert_eq!(
        server.extract(ALICE, Some("k-1"), &body(1)).await.status,
        200
    );
    let reply = server.extract(ALICE, Some("k-1"), &body(2)).await;
    reply.assert_error(409, "idempotency_conflict");
    assert!(reply.header("ratelimit").is_some(), "quota-governed");

    let reply = server
        .extract(ALICE, None, &json!({"count": 5, "mode": "all_or_nothing"}))
        .await;
    let message = reply.assert_error(409, "insufficient_inventory");
    assert!(message.contains('5'), "{message}");
    assert_eq!(
        server.unextracted("acme").await,
        2,
        "all_or_nothing changed nothing"
    );
}

#[tokio::test]
async fn payload_too_large_declared_or_streamed() {
    let server = TestServer::memory(Setup {
        limits: ApiLimits {
            max_body_bytes: 256,
            ..ApiLimits::default()
        },
        ..Setup::default()
    })
    .await;
    let big = json!({"count": 1, "filters": {"region": "x".repeat(400)}}).to_string();
    let declared = Reply::from(
        server
            .http
            .post(server.url("/v1/extractions"))
            .bearer_auth(ALICE)
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    declared.assert_error(413, "payload_too_large");

    // Without a Content-Length (chunked), the cap applies while reading.
    let streamed = Reply::from(
        server
            .http
            .post(server.url("/v1/extractions"))
            .bearer_auth(ALICE)
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap(Unsized(Some(big.into_bytes()))))
            .send()
            .await
            .unwrap(),
    )
    .await;
    streamed.assert_error(413, "payload_too_large");
}

/// A body that does not say its length, so it is sent chunked.
struct Unsized(Option<Vec<u8>>);

impl http_body::Body for Unsized {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let next = self
            .0
            .take()
            .map(|bytes| Ok(http_body::Frame::data(bytes.into())));
        std::task::Poll::Ready(next)
    }
}

#[tokio::test]
async fn rate_limited_by_the_shield_before_authentication() {
    let server = TestServer::memory(Setup {
        shield: ShieldSettings {
            // Two requests, then (practically) never a token again during the test.
            policy: Policy::new(0.001, 2.0),
            ..ShieldSettings::default()
        },
        ..Setup::default()
    })
    .await;
    assert_eq!(server.get("/v1/me", Some(ALICE)).await.status, 200);
    assert_eq!(server.get("/v1/me", Some(ALICE)).await.status, 200);
    let denied = server.get("/v1/me", Some(ALICE)).await;
    denied.assert_error(429, "rate_limited");
    // Before authentication: a bad token is not even looked at.
    server
        .get("/v1/me", Some("token-nobody"))
        .await
        .assert_error(429, "rate_limited");
}

#[tokio::test]
async fn quota_exceeded_with_rate_limit_headers() {
    let quota = Quota::new(QuotaKind::Memory).await;
    let server = TestServer::start(Setup::default().with_quota(quota_config(2)), quota).await;
    server.seed("acme", 0, 10).await;
    let first = server.extract(ALICE, None, &body(1)).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"extract\";q=2;w=300")
    );
    assert!(
        first
            .header("ratelimit")
            .unwrap()
            .starts_with("\"extract\";r=1;t=")
    );
    assert_eq!(server.extract(ALICE, None, &body(1)).await.status, 200);
    let denied = server.extract(ALICE, None, &body(1)).await;
    denied.assert_error(429, "quota_exceeded");
    assert_eq!(
        denied.header("ratelimit-policy"),
        Some("\"extract\";q=2;w=300")
    );
    assert!(
        denied
            .header("ratelimit")
            .unwrap()
            .starts_with("\"extract\";r=0;t=")
    );
    assert_eq!(
        server.unextracted("acme").await,
        8,
        "the denied request took nothing"
    );
    // Another client's bucket is its own.
    assert_eq!(server.extract(BOB, None, &body(1)).await.status, 200);
}

#[tokio::test]
async fn each_client_is_charged_under_its_own_limits_on_one_quota() {
    // One backend for everyone; alice may extract once per window, bob three times.
    let mut setup = Setup::default();
    for client in &mut setup.clients {
        let limit = match client.id.as_str() {
            "alice" => 1,
            "bob" => 3,
            _ => continue,
        };
        client.quota = QuotaConfig::default().with(
            Operation::Extract,
            OperationLimits::new(QUOTA_WINDOW, limit).unwrap(),
        );
    }
    let server = TestServer::start(setup, Quota::new(QuotaKind::Memory).await).await;
    server.seed("acme", 0, 10).await;

    let alice = server.extract(ALICE, None, &body(1)).await;
    assert_eq!(alice.status, 200, "{}", alice.text());
    assert_eq!(
        alice.header("ratelimit-policy"),
        Some("\"extract\";q=1;w=300")
    );
    server
        .extract(ALICE, None, &body(1))
        .await
        .assert_error(429, "quota_exceeded");
    for left in [2, 1, 0] {
        let bob = server.extract(BOB, None, &body(1)).await;
        assert_eq!(bob.status, 200, "{}", bob.text());
        assert_eq!(
            bob.header("ratelimit-policy"),
            Some("\"extract\";q=3;w=300")
        );
        assert!(
            bob.header("ratelimit")
                .unwrap()
                .starts_with(&format!("\"extract\";r={left};t="))
        );
    }
    server
        .extract(BOB, None, &body(1))
        .await
        .assert_error(429, "quota_exceeded");
}

#[tokio::test]
async fn unavailable_when_the_store_cannot_decide() {
    // A scan budget of 1 candidate while 5 are asked for: the store cannot decide within
    // its budget and says so; the API must answer 503, never "insufficient".
    let pool = Arc::new(proxypool_pool::MemoryPool::new(
        proxypool_pool::MemoryPoolOptions {
            extract_scan_budget: 1,
            ..proxypool_pool::MemoryPoolOptions::default()
        },
    ));
    let quota = Quota::new(QuotaKind::Memory).await;
    let server = TestServer::start_on(Setup::default(), pool, quota).await;
    server.seed("acme", 0, 20).await;
    let reply = server
        .extract(
            ALICE,
            None,
            &json!({"count": 5, "filters": {"region": "de"}}),
        )
        .await;
    reply.assert_error(503, "unavailable");
    assert_eq!(server.unextracted("acme").await, 20);
}

#[tokio::test]
async fn unavailable_when_the_quota_store_is_down() {
    let quota = Quota::new(QuotaKind::Sqlite).await;
    let server = TestServer::start(
        Setup::default().with_quota(quota_config(100)),
        quota.clone(),
    )
    .await;
    server.seed("acme", 0, 4).await;
    assert_eq!(server.extract(ALICE, None, &body(1)).await.status, 200);
    let Quota::Sqlite(sqlite, _) = &quota else {
        unreachable!()
    };
    sqlite.close().await;
    let reply = server.extract(ALICE, None, &body(1)).await;
    reply.assert_error(503, "unavailable");
    assert_eq!(
        server.unextracted("acme").await,
        3,
        "fail closed: nothing extracted"
    );
    server
        .get("/readyz", None)
        .await
        .assert_error(503, "unavailable");
}

#[tokio::test]
async fn unavailable_when_saturated_or_timed_out_and_429_over_the_address_cap() {
    let upstreams = Arc::new(StaticUpstreams {
        list: vec![status("acme")],
        // Longer than the request timeout, which cuts it; the other requests must arrive
        // while the slow one holds the slot, so the timeout leaves a loaded machine time.
        delay: Some(Duration::from_secs(30)),
        ..StaticUpstreams::default()
    });
    let server = TestServer::memory(Setup {
        limits: ApiLimits {
            max_concurrent_requests: 1,
            max_requests_in_flight_per_ip: 1,
            request_timeout: proxypool_config::Millis(2_000),
            ..ApiLimits::default()
        },
        upstreams,
        ..Setup::default()
    })
    .await;
    // Another address, so that its request meets the global cap, not its address's.
    let other = reqwest::Client::builder()
        .local_address(OTHER_SOURCE)
        .build()
        .unwrap();
    let slow = server.get("/v1/upstreams", Some(ALICE));
    let others = async {
        // Once the slow request is inside its handler it holds the only slot.
        eventually_async(
            "the slow request reached its handler",
            Duration::from_secs(10),
            async || {
                let calls = server
                    .upstreams
                    .calls
                    .load(std::sync::atomic::Ordering::SeqCst);
                (calls > 0).then_some(())
            },
        )
        .await;
        let from_other = other
            .get(server.url("/v1/me"))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        let from_same = server.get("/v1/me", Some(ALICE)).await;
        (Reply::from(from_other).await, from_same)
    };
    let (slow, (saturated, in_flight)) = tokio::join!(slow, others);
    let timed_out = slow.assert_error(503, "unavailable");
    assert!(timed_out.contains("timed out"), "{timed_out}");
    let saturated = saturated.assert_error(503, "unavailable");
    assert!(saturated.contains("concurrency"), "{saturated}");
    // The slow request's address has its one request in flight.
    in_flight.assert_error(429, "too_many_requests_in_flight");
    assert_eq!(in_flight.header("retry-after"), Some("1"));
}

#[tokio::test]
async fn extraction_count_maximum_is_configurable() {
    let server = TestServer::memory(Setup {
        extraction: ExtractionSettings {
            max_count: 3,
            ..ExtractionSettings::default()
        },
        ..Setup::default()
    })
    .await;
    server.seed("acme", 0, 5).await;
    let message = server
        .extract(ALICE, None, &body(4))
        .await
        .assert_error(400, "invalid_request");
    assert!(message.contains("between 1 and 3"), "{message}");
    assert_eq!(server.extract(ALICE, None, &body(3)).await.status, 200);
}
