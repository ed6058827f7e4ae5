//! The admission chain, layer by layer: each denial leaves every later layer untouched
//! (no quota bucket created or charged by an unauthenticated, forbidden or malformed
//! request; no inventory change on any denial), and the layers run in the documented order.
//! Each test runs on the memory quota and on the SQLite quota.

use crate::common::*;
use proxypool_api::{ApiLimits, ShieldSettings};
use proxypool_config::Cidrs;
use proxypool_quota::Operation;
use proxypool_throttle::Policy;
use serde_json::json;

on_memory_and_sqlite!(
    shield_denial_reaches_no_later_layer,
    unauthenticated_requests_touch_neither_quota_nor_inventory,
    forbidden_requests_touch_neither_quota_nor_inventory,
    malformed_requests_touch_neither_quota_nor_inventory,
    oversized_bodies_are_refused_before_authentication,
    quota_denial_touches_no_inventory,
    layers_run_in_order,
);

async fn shield_denial_reaches_no_later_layer(kind: QuotaKind) {
    let server = server_on(
        kind,
        100,
        Setup {
            shield: ShieldSettings {
                policy: Policy::new(0.001, 1.0),
                ..ShieldSettings::default()
            },
            ..Setup::default()
        },
    )
    .await;
    server.seed("acme", 0, 5).await;
    assert_eq!(server.get("/v1/me", Some(ALICE)).await.status, 200);
    // A valid request, now over the per-IP budget.
    server
        .extract(ALICE, Some("k1"), &body(1))
        .await
        .assert_error(429, "rate_limited");
    assert_eq!(server.quota.buckets().await, 0, "the quota was never asked");
    assert_eq!(server.unextracted("acme").await, 5);
    // Liveness is not behind the shield; readiness reaches the stores, so it is.
    for _ in 0..2 {
        assert_eq!(server.get("/healthz", None).await.status, 200);
        server
            .get("/readyz", None)
            .await
            .assert_error(429, "rate_limited");
    }
    assert_eq!(server.quota.buckets().await, 0, "the quota was never asked");
}

async fn unauthenticated_requests_touch_neither_quota_nor_inventory(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 5).await;
    for token in ["token-nobody", "", "token-alice-012345678"] {
        let reply = server.extract(token, Some("k1"), &body(1)).await;
        reply.assert_error(401, "unauthenticated");
    }
    let no_header = Reply::from(
        server
            .http
            .post(server.url("/v1/extractions"))
            .header("content-type", "application/json")
            .body(body(1).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    no_header.assert_error(401, "unauthenticated");
    assert_eq!(server.quota.buckets().await, 0);
    assert_eq!(server.unextracted("acme").await, 5);
}

async fn forbidden_requests_touch_neither_quota_nor_inventory(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 5).await;
    server.seed("globex", 100, 5).await;
    let forbidden = [
        (
            NARROW,
            json!({"count": 1, "filters": {"upstream": "globex"}}),
        ),
        (NARROW, json!({"count": 1, "filters": {"region": "de"}})),
        (TWO, json!({"count": 1})),
        (TWO, json!({"count": 1, "filters": {"upstream": "initech"}})),
    ];
    for (token, request) in forbidden {
        server
            .extract(token, None, &request)
            .await
            .assert_error(403, "forbidden");
    }
    server
        .get("/v1/upstreams/globex/inventory", Some(NARROW))
        .await
        .assert_error(403, "forbidden");
    server
        .get("/v1/admin/workers", Some(ALICE))
        .await
        .assert_error(403, "forbidden");
    assert_eq!(
        server.quota.buckets().await,
        0,
        "403 never creates a bucket"
    );
    assert_eq!(server.unextracted("acme").await, 5);
    assert_eq!(server.unextracted("globex").await, 5);

    // The same client within its rights is admitted and charged.
    let allowed = server.extract(NARROW, None, &json!({"count": 1})).await;
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    let proxy = &allowed.json()["proxies"][0];
    assert_eq!(
        (proxy["upstream"].as_str(), proxy["region"].as_str()),
        (Some("acme"), Some("us"))
    );
    assert_eq!(
        server
            .quota
            .consumed("p-narrow", "narrow", Operation::Extract)
            .await,
        1
    );
}

async fn malformed_requests_touch_neither_quota_nor_inventory(kind: QuotaKind) {
    let server = server_on(kind, 100, Setup::default()).await;
    server.seed("acme", 0, 5).await;
    let bad_bodies = [
        json!({"count": 0}),
        json!({"count": 1000}),
        json!({"count": 1, "extra": true}),
        json!({"count": 1, "mode": "everything"}),
    ];
    for request in bad_bodies {
        server
            .extract(ALICE, Some("k1"), &request)
            .await
            .assert_error(400, "invalid_request");
    }
    server
        .extract(ALICE, Some("bad key"), &body(1))
        .await
        .assert_error(400, "invalid_request");
    let wrong_type = Reply::from(
        server
            .http
            .post(server.url("/v1/extractions"))
            .bearer_auth(ALICE)
            .header("content-type", "text/plain")
            .body(body(1).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    wrong_type.assert_error(400, "invalid_request");
    assert_eq!(server.quota.buckets().await, 0);
    assert_eq!(server.unextracted("acme").await, 5);
}

async fn oversized_bodies_are_refused_before_authentication(kind: QuotaKind) {
    let server = server_on(
        kind,
        100,
        Setup {
            limits: ApiLimits {
                max_body_bytes: 64,
                ..ApiLimits::default()
            },
            ..Setup::default()
        },
    )
    .await;
    server.seed("acme", 0, 5).await;
    let big = json!({"count": 1, "filters": {"carrier": "c".repeat(100)}});
    // Even with no valid token the size is what the server answers first.
    server
        .extract("token-nobody", None, &big)
        .await
        .assert_error(413, "payload_too_large");
    server
        .extract(ALICE, None, &big)
        .await
        .assert_error(413, "payload_too_large");
    assert_eq!(server.quota.buckets().await, 0);
    assert_eq!(server.unextracted("acme").await, 5);
}

async fn quota_denial_touches_no_inventory(kind: QuotaKind) {
    let server = server_on(kind, 2, Setup::default()).await;
    server.seed("acme", 0, 10).await;
    for key in ["a", "b"] {
        assert_eq!(server.extract(ALICE, Some(key), &body(2)).await.status, 200);
    }
    assert_eq!(server.unextracted("acme").await, 6);
    for key in ["c", "d", "e"] {
        server
            .extract(ALICE, Some(key), &body(2))
            .await
            .assert_error(429, "quota_exceeded");
    }
    assert_eq!(
        server.unextracted("acme").await,
        6,
        "denied requests took nothing"
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        2
    );
    // A replay of an admitted key is still answered (its receipt is in the window).
    let replay = server.extract(ALICE, Some("a"), &body(2)).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
}

async fn layers_run_in_order(kind: QuotaKind) {
    let server = server_on(kind, 1, Setup::default()).await;
    server.seed("acme", 0, 5).await;
    // Authentication before input validation and authorization.
    server
        .extract(
            "token-nobody",
            Some("bad key"),
            &json!({"count": 0, "filters": {"upstream": "globex"}}),
        )
        .await
        .assert_error(401, "unauthenticated");
    // Input validation before authorization.
    server
        .extract(
            NARROW,
            None,
            &json!({"count": 0, "filters": {"upstream": "globex"}}),
        )
        .await
        .assert_error(400, "invalid_request");
    // Use up NARROW's quota, then: authorization before quota.
    assert_eq!(server.extract(NARROW, None, &body(1)).await.status, 200);
    server
        .extract(
            NARROW,
            None,
            &json!({"count": 1, "filters": {"upstream": "globex"}}),
        )
        .await
        .assert_error(403, "forbidden");
    server
        .extract(NARROW, None, &body(1))
        .await
        .assert_error(429, "quota_exceeded");
    // Quota before the store: the all-or-nothing request that cannot be satisfied is
    // refused by the quota first.
    server
        .extract(
            NARROW,
            None,
            &json!({"count": 50, "mode": "all_or_nothing"}),
        )
        .await
        .assert_error(429, "quota_exceeded");
}

#[tokio::test]
async fn a_client_with_an_ip_allowlist_is_refused_from_another_address() {
    let mut elsewhere = client("elsewhere", "p-else", "token-elsewhere-0123456789");
    elsewhere.ip_allowlist = Cidrs::parse(&["10.0.0.0/8"]).unwrap();
    let mut here = client("here", "p-here", "token-here-0123456789");
    here.ip_allowlist = Cidrs::parse(&["10.0.0.0/8", "127.0.0.0/8"]).unwrap();
    let server = TestServer::memory(Setup {
        clients: vec![elsewhere, here],
        ..Setup::default()
    })
    .await;
    server.seed("acme", 0, 3).await;
    server
        .get("/v1/me", Some("token-elsewhere-0123456789"))
        .await
        .assert_error(403, "forbidden");
    server
        .extract("token-elsewhere-0123456789", Some("k1"), &body(1))
        .await
        .assert_error(403, "forbidden");
    assert_eq!(
        server.quota.buckets().await,
        0,
        "a refused client is never charged"
    );
    assert_eq!(server.unextracted("acme").await, 3);
    assert_eq!(
        server
            .get("/v1/me", Some("token-here-0123456789"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn behind_a_trusted_balancer_the_forwarded_client_address_counts() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let token = "token-remote-0123456789";
    let mut remote = client("remote", "p-remote", token);
    remote.ip_allowlist = Cidrs::parse(&["203.0.113.0/24"]).unwrap();
    let forwarded = |server: &TestServer, xff: &'static str| {
        server
            .http
            .get(format!("{}/v1/me", server.base))
            .bearer_auth(token)
            .header("x-forwarded-for", xff)
            .send()
    };
    // Loopback is the trusted balancer: the client it names is allowed, a forged
    // leftmost entry is not believed.
    let trusting = TestServer::memory(Setup {
        clients: vec![remote.clone()],
        trusted_proxies: vec![(ip("127.0.0.0"), 8)],
        ..Setup::default()
    })
    .await;
    assert_eq!(
        forwarded(&trusting, "203.0.113.7").await.unwrap().status(),
        200
    );
    assert_eq!(
        forwarded(&trusting, "203.0.113.7, 198.51.100.1")
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(trusting.get("/v1/me", Some(token)).await.status, 403);
    // Nobody trusted: the header means nothing, the peer (loopback) is not allowed.
    let distrusting = TestServer::memory(Setup {
        clients: vec![remote],
        trusted_proxies: vec![(ip("10.0.0.0"), 8)],
        ..Setup::default()
    })
    .await;
    assert_eq!(
        forwarded(&distrusting, "203.0.113.7")
            .await
            .unwrap()
            .status(),
        403
    );
}

#[tokio::test]
async fn a_spoofed_leftmost_forwarded_entry_is_not_believed_when_every_entry_is_trusted() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let token = "token-inside-0123456789";
    // A client allowed from one address inside the balancers' own range.
    let mut inside = client("inside", "p-inside", token);
    inside.ip_allowlist = Cidrs::parse(&["127.0.0.7/32"]).unwrap();
    let server = TestServer::memory(Setup {
        clients: vec![inside],
        trusted_proxies: vec![(ip("127.0.0.0"), 8)],
        ..Setup::default()
    })
    .await;
    let forwarded = |xff: &'static str| {
        server
            .http
            .get(format!("{}/v1/me", server.base))
            .bearer_auth(token)
            .header("x-forwarded-for", xff)
            .send()
    };
    // A client at 127.0.0.9 wrote the allowed address first; the balancer appended the
    // client's real one. Every entry is in the trusted range, so the leftmost, which the
    // client wrote, must not be believed.
    assert_eq!(
        forwarded("127.0.0.7, 127.0.0.9").await.unwrap().status(),
        403
    );
    // What the connecting balancer wrote is.
    assert_eq!(
        forwarded("127.0.0.9, 127.0.0.7").await.unwrap().status(),
        200
    );
}
