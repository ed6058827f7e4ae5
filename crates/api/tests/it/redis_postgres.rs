//! The API on the scale-out stores: the activity pool in a private `redis-server`
//! (`proxypool_redis::RedisPool`) and the quota in a private PostgreSQL (least-privilege
//! role). Covers the backend-dependent error codes, bad inputs changing nothing, 50
//! concurrent clients, the replay after a dropped connection, Redis stopped mid-test (503,
//! extractions, inspections and feedback alike,
//! with `Retry-After` within the call timeout, and charged nothing; 200 again after the
//! restart), feedback (bans growing, a proxy returned and replaced, session feedback),
//! the free-scan loop charged in PostgreSQL, and two API
//! instances sharing one PostgreSQL holding the quota exactly.
//!
//! Without the server binaries these tests skip with the testkit's banner (and fail under
//! `CI=true`).

use crate::common::*;
use proxypool_quota::postgres::{create_quota_role, migrate};
use proxypool_quota::{Operation, PostgresQuota, PostgresSettings};
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::{PostgresServer, RedisServer};
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// One PostgreSQL per test binary (startup costs seconds); a fresh database per test.
fn postgres() -> Option<&'static PostgresServer> {
    static SERVER: OnceLock<Option<PostgresServer>> = OnceLock::new();
    SERVER
        .get_or_init(proxypool_testkit::private_postgres_or_skip)
        .as_ref()
}

fn unique(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{tag}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A migrated database with its own quota role: the superuser pool and the role's URL.
async fn quota_database(server: &PostgresServer) -> (sqlx::PgPool, String) {
    let name = unique("api");
    let admin_url = server.create_database(&name).unwrap();
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&admin_url)
        .await
        .unwrap();
    migrate(&admin).await.unwrap();
    let role = unique("api_quota");
    create_quota_role(&admin, &role, None).await.unwrap();
    (admin, server.url_for(&name, &role))
}

fn postgres_quota(admin: &sqlx::PgPool, role_url: &str) -> Quota {
    let quota = PostgresQuota::connect_lazy(&PostgresSettings::new(role_url)).unwrap();
    Quota::Postgres(Arc::new(quota), admin.clone())
}

fn redis_pool(redis: &RedisServer, prefix: &str) -> Arc<RedisPool> {
    Arc::new(
        RedisPool::new(
            RedisClient::open(redis.url()).unwrap(),
            RedisPoolOptions {
                key_prefix: prefix.to_owned(),
                call_timeout: CALL_TIMEOUT,
                ..RedisPoolOptions::default()
            },
        )
        .unwrap(),
    )
}

/// A private Redis, a quota database, and a server on both.
struct Stack {
    redis: RedisServer,
    admin: sqlx::PgPool,
    role_url: String,
    server: TestServer,
}

async fn stack(limit: u32, setup: Setup) -> Option<Stack> {
    // These tests count charges over seconds (a Redis restart, PostgreSQL round trips).
    in_one_quota_window(Duration::from_secs(30)).await;
    let redis = proxypool_testkit::private_redis_or_skip()?;
    let pg = postgres()?;
    let (admin, role_url) = quota_database(pg).await;
    let pool = redis_pool(&redis, &unique("api"));
    let server = TestServer::start_on(
        setup.with_quota(quota_config(limit)),
        pool,
        postgres_quota(&admin, &role_url),
    )
    .await;
    Some(Stack {
        redis,
        admin,
        role_url,
        server,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_and_bad_inputs_on_redis_and_postgres() {
    let Some(stack) = stack(3, Setup::default()).await else {
        return;
    };
    let server = &stack.server;
    server.seed("acme", 0, 6).await;

    // Bad inputs, unauthenticated and forbidden requests change nothing anywhere.
    for (token, request) in [
        ("token-nobody", body(1)),
        (ALICE, json!({"count": 0})),
        (ALICE, json!({"count": 1, "colour": 1})),
        (
            NARROW,
            json!({"count": 1, "filters": {"upstream": "globex"}}),
        ),
    ] {
        let reply = server.extract(token, Some("k"), &request).await;
        assert!([400, 401, 403].contains(&reply.status), "{}", reply.text());
    }
    assert_eq!(server.quota.buckets().await, 0);
    assert_eq!(server.unextracted("acme").await, 6);

    let first = server.extract(ALICE, Some("a"), &body(2)).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"extract\";q=3;w=300")
    );
    let replay = server.extract(ALICE, Some("a"), &body(2)).await;
    assert_eq!(replay.body, first.body);
    server
        .extract(ALICE, Some("a"), &body(3))
        .await
        .assert_error(409, "idempotency_conflict");
    server
        .extract(
            ALICE,
            Some("b"),
            &json!({"count": 5, "mode": "all_or_nothing"}),
        )
        .await
        .assert_error(409, "insufficient_inventory");
    assert_eq!(server.extract(ALICE, Some("c"), &body(1)).await.status, 200);
    server
        .extract(ALICE, Some("d"), &body(1))
        .await
        .assert_error(429, "quota_exceeded");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        3
    );
    assert_eq!(server.unextracted("acme").await, 3);

    let id = first.json()["id"].as_str().unwrap().to_owned();
    let own = server
        .get(&format!("/v1/extractions/{id}"), Some(ALICE))
        .await;
    assert_eq!(own.body, first.body);
    server
        .get(&format!("/v1/extractions/{id}"), Some(BOB))
        .await
        .assert_error(404, "not_found");
    let inventory = server.get("/v1/upstreams/acme/inventory", Some(BOB)).await;
    assert_eq!(inventory.status, 200, "{}", inventory.text());
    assert_eq!(inventory.json()["unextracted"], 3);
    assert_eq!(server.get("/readyz", None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_on_redis_grows_bans_returns_and_replaces() {
    let Some(stack) = stack(100, Setup::default()).await else {
        return;
    };
    let server = &stack.server;
    let seeded = server.seed("acme", 0, 3).await;
    let post = |token: &'static str, body: serde_json::Value| async move {
        Reply::from(
            server
                .http
                .post(server.url("/v1/feedback"))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let held = server.extract(ALICE, None, &body(1)).await.json()["proxies"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = seeded.iter().find(|id| id.as_str() != held).unwrap();
    // Alice and bob went through `other` on a gateway, which gave each its ticket (under
    // the key the store keeps for the gateways).
    let now = proxypool_core::now_millis();
    let key = server.pool.ticket_key(now).await.unwrap();
    let lease_epoch = server.routed(other, now).await;
    let ticket = |client: &str| {
        let client = proxypool_core::ClientId::new(client).unwrap();
        let subject = proxypool_core::ticket::TicketSubject {
            client: &client,
            proxy: other,
            lease_epoch,
        };
        proxypool_core::issue_ticket(&key, subject, now + proxypool_core::TICKET_LIFETIME_MS)
    };
    for strikes in [1, 2] {
        let reply = post(
            ALICE,
            json!({"proxy_id": other, "domain": "www.shop-a.test", "verdict": "banned",
                   "ticket": ticket("alice")}),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["cooldown"]["strikes"], strikes);
    }
    // Bob's project keeps its own entry: his report neither grows alice's nor clears it.
    for (verdict, strikes) in [("banned", Some(1)), ("ok", None)] {
        let reply = post(
            BOB,
            json!({"proxy_id": other, "domain": "shop-a.test", "verdict": verdict,
                   "ticket": ticket("bob")}),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["cooldown"]["strikes"].as_u64(), strikes);
    }
    let stored = server
        .pool
        .cooldowns_of(proxypool_core::now_millis(), std::slice::from_ref(other))
        .await
        .unwrap();
    assert_eq!((stored.len(), stored[0].strikes), (1, 2), "{stored:?}");
    assert_eq!(
        stored[0].project.as_ref().map(|p| p.as_str()),
        Some("p-alice")
    );

    // Bob cannot give back Alice's proxy; Alice can, and gets the one proxy left that is
    // neither returned nor cooling for the domain.
    let refused = post(
        BOB,
        json!({"proxy_id": held, "domain": "shop-a.test", "verdict": "banned", "return": true}),
    )
    .await;
    refused.assert_error(404, "not_found");
    let reply = post(
        ALICE,
        json!({"proxy_id": held, "domain": "shop-a.test", "verdict": "captcha", "return": true,
               "replacement": {"count": 2}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer = reply.json();
    assert_eq!(answer["returned"], true);
    let replaced: Vec<&str> = answer["replacement"]["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(replaced.len(), 1, "{answer}");
    assert!(
        replaced[0] != held && replaced[0] != other.as_str(),
        "{answer}"
    );
    let inventory = server
        .pool
        .inventory(proxypool_core::now_millis(), &upstream("acme"))
        .await
        .unwrap();
    // The returned proxy stays EXTRACTED (nobody's, unchecked) beside the replacement.
    assert_eq!(
        inventory
            .by_status
            .get(&proxypool_core::ProxyStatus::Extracted),
        Some(&2)
    );

    let queued = post(
        ALICE,
        json!({"session": "s1", "domain": "shop-a.test", "verdict": "slow"}),
    )
    .await;
    assert_eq!(queued.status, 200, "{}", queued.text());
    let feedback = server
        .pool
        .session_feedback(proxypool_core::now_millis(), 10)
        .await
        .unwrap();
    assert_eq!(feedback.len(), 1);
    assert_eq!(
        feedback[0].id,
        queued.json()["feedback_id"].as_str().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_clients_never_share_a_proxy_on_redis() {
    const CLIENTS: usize = 50;
    // Every client connects from 127.0.0.1: let the one address run them all at once.
    let mut setup = Setup {
        limits: one_address_limits(),
        ..Setup::default()
    };
    setup.clients.extend(many_clients(CLIENTS));
    let Some(stack) = stack(1000, setup).await else {
        return;
    };
    let server = &stack.server;
    let seeded = server.seed("acme", 0, 2 * CLIENTS + 5).await.len();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let http = server.http.clone();
            let url = server.url("/v1/extractions");
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for round in 0..2 {
                    let response = http
                        .post(&url)
                        .bearer_auth(many_token(i))
                        .header("content-type", "application/json")
                        .header("idempotency-key", format!("c{i}-r{round}"))
                        .body(json!({"count": 2}).to_string())
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200);
                    let body: serde_json::Value =
                        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
                    for proxy in body["proxies"].as_array().unwrap() {
                        ids.push(proxy["id"].as_str().unwrap().to_owned());
                    }
                }
                ids
            })
        })
        .collect();
    let mut handed_out = Vec::new();
    for task in tasks {
        handed_out.extend(task.await.unwrap());
    }
    let distinct: HashSet<&String> = handed_out.iter().collect();
    assert_eq!(
        distinct.len(),
        handed_out.len(),
        "a proxy was handed out twice"
    );
    // 200 asked for, fewer seeded: the clients compete for the last ones, and every proxy
    // is handed out exactly once.
    assert_eq!(handed_out.len(), seeded);
    assert_eq!(server.unextracted("acme").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_after_a_dropped_connection_on_redis_and_postgres() {
    let Some(stack) = stack(100, Setup::default()).await else {
        return;
    };
    let server = &stack.server;
    server.seed("acme", 0, 10).await;
    let body = json!({"count": 3}).to_string();
    let mut socket = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let raw = format!(
        "POST /v1/extractions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: dropped\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(raw.as_bytes()).await.unwrap();
    drop(socket);

    // The dropped attempt goes on in the background. Should its store call fail (a Redis
    // call timing out on a loaded machine), it refunds its charge: the retry, admitted on
    // the same receipt, must not be left unpaid by that refund. An attempt with the key
    // that is running when the retry arrives has settled before the retry is charged; one
    // that starts after it finds the retry's receipt and extraction, and replays them
    // without a charge. Either way the counts below are final when the retry is answered.
    let first = server
        .extract_retrying(ALICE, Some("dropped"), &json!({"count": 3}))
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let again = server
        .extract_retrying(ALICE, Some("dropped"), &json!({"count": 3}))
        .await;
    assert_eq!(again.body, first.body);
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(server.unextracted("acme").await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_is_503_within_the_timeout_and_200_after_restart() {
    let Some(mut stack) = stack(100, Setup::default()).await else {
        return;
    };
    let seeded = stack.server.seed("acme", 0, 4).await;
    assert_eq!(
        stack
            .server
            .extract(ALICE, Some("before"), &body(1))
            .await
            .status,
        200
    );

    stack.redis.stop().unwrap();
    let started = Instant::now();
    let down = stack.server.extract(ALICE, Some("during"), &body(1)).await;
    let took = started.elapsed();
    down.assert_error(503, "unavailable");
    assert!(
        took < CALL_TIMEOUT * 4,
        "503 must come within the store's call timeout, took {took:?}"
    );
    assert!(
        down.header("ratelimit").is_some(),
        "admitted by the quota, then the store failed"
    );
    stack
        .server
        .get("/readyz", None)
        .await
        .assert_error(503, "unavailable");
    let inventory = stack
        .server
        .get("/v1/upstreams/acme/inventory", Some(ALICE))
        .await;
    inventory.assert_error(503, "unavailable");
    for _ in 0..3 {
        stack
            .server
            .extract(ALICE, None, &body(1))
            .await
            .assert_error(503, "unavailable");
    }
    for feedback in [
        json!({"proxy_id": seeded[1], "domain": "shop-a.test", "verdict": "banned"}),
        json!({"session": "s1", "domain": "shop-a.test", "verdict": "slow"}),
    ] {
        let reply = Reply::from(
            stack
                .server
                .http
                .post(stack.server.url("/v1/feedback"))
                .bearer_auth(ALICE)
                .header("content-type", "application/json")
                .body(feedback.to_string())
                .send()
                .await
                .unwrap(),
        )
        .await;
        reply.assert_error(503, "unavailable");
    }
    // The service's failures are not the client's to pay: every charge was refunded.
    let quota = &stack.server.quota;
    assert_eq!(
        quota.consumed("p-alice", "alice", Operation::Extract).await,
        1
    );
    assert_eq!(
        quota.consumed("p-alice", "alice", Operation::Inspect).await,
        0
    );

    stack.redis.start_again().unwrap();
    // Readiness comes back first (the first call on a connection that died with the old
    // server may still fail once: the answer stays 503 until a call succeeds), ...
    eventually_async(
        "/readyz recovered after the restart",
        Duration::from_secs(10),
        async || (stack.server.get("/readyz", None).await.status == 200).then_some(()),
    )
    .await;
    // ... then the reconciler refills the (empty) restarted Redis.
    stack.server.seed("acme", 10, 4).await;
    let back = stack
        .server
        .extract_retrying(ALICE, Some("during"), &body(1))
        .await;
    assert_eq!(back.status, 200, "{}", back.text());
    assert_eq!(back.json()["returned"], 1);
    // The failed "during" was refunded; its retry is charged once.
    assert_eq!(
        stack
            .server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        2
    );
}

/// The free-scan loop on the scale-out stores: one key, an all-or-nothing request nothing
/// can satisfy, repeated. Each try is charged in PostgreSQL and scans Redis once; at the
/// limit the tries stop before they reach Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_impossible_request_is_charged_on_postgres() {
    let Some(stack) = stack(3, Setup::default()).await else {
        return;
    };
    let server = &stack.server;
    server.seed("acme", 0, 2).await;
    let impossible = json!({"count": 5, "mode": "all_or_nothing"});
    for _ in 0..3 {
        server
            .extract(ALICE, Some("scan-loop"), &impossible)
            .await
            .assert_error(409, "insufficient_inventory");
    }
    server
        .extract(ALICE, Some("scan-loop"), &impossible)
        .await
        .assert_error(429, "quota_exceeded");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        3
    );
    // The charges are kept under the request ids that spent them; the key is free.
    let receipts: Vec<String> = sqlx::query_scalar(
        "SELECT jsonb_array_elements_text(receipt_ids) FROM proxypool_quota.quota_buckets \
         WHERE subject_id = 'alice' AND operation = 'extract'",
    )
    .fetch_all(&stack.admin)
    .await
    .unwrap();
    assert_eq!(receipts.len(), 3);
    assert!(
        receipts.iter().all(|r| r.starts_with("spent:")),
        "{receipts:?}"
    );
    assert_eq!(server.unextracted("acme").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_sharing_one_postgres_hold_the_quota_exactly() {
    let Some(stack) = stack(8, Setup::default()).await else {
        return;
    };
    // A second API instance: its own process-like state (quota pool, shield, clients) on
    // the same PostgreSQL database and the same Redis keyspace.
    let shared_pool = redis_pool(&stack.redis, &unique("shared"));
    let first = TestServer::start_on(
        Setup::default().with_quota(quota_config(8)),
        shared_pool.clone(),
        postgres_quota(&stack.admin, &stack.role_url),
    )
    .await;
    let second = TestServer::start_on(
        Setup::default().with_quota(quota_config(8)),
        shared_pool,
        postgres_quota(&stack.admin, &stack.role_url),
    )
    .await;
    first.seed("acme", 0, 20).await;

    let requests: Vec<_> = (0..16)
        .map(|i| {
            let server = if i % 2 == 0 { &first } else { &second };
            let http = server.http.clone();
            let url = server.url("/v1/extractions");
            tokio::spawn(async move {
                http.post(url)
                    .bearer_auth(ALICE)
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("distinct-{i}"))
                    .body(json!({"count": 1}).to_string())
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.unwrap());
    }
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    let exceeded = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((admitted, exceeded), (8, 8), "{statuses:?}");
    assert_eq!(
        first
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        8
    );
    assert_eq!(first.unextracted("acme").await, 12);
}
