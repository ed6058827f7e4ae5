//! How requests are charged, over HTTP, on the memory and the SQLite quota: a keyed request
//! that cannot succeed is charged on every try (no free scans), a key whose extraction can
//! no longer be replayed is refused rather than bought again, the service's own failures
//! are refunded (and a retry made while a failing attempt still runs is not left unpaid
//! by that attempt's refund), receipts of keys and of request ids never collide, a replay
//! under a lowered limit still replays, and the client's rate-limit policy and its cap on
//! extractions in flight come before the quota.
//!
//! (The same charging on Redis and PostgreSQL, with a Redis outage: `redis_postgres.rs`.)

use crate::common::*;
use proxypool_api::ExtractionSettings;
use proxypool_core::{UnixMillis, now_millis};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_quota::Operation;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The `r=` of the `RateLimit` header: what the quota says is left.
fn remaining(reply: &Reply) -> u32 {
    let header = reply.header("ratelimit").expect("a RateLimit header");
    header
        .split(';')
        .find_map(|part| part.strip_prefix("r="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no r= in {header}"))
}

/// A server whose extractions go through a [`CountingExtractor`] over `pool`.
async fn counted(
    kind: QuotaKind,
    limit: u32,
    pool: Arc<MemoryPool>,
    setup: Setup,
) -> (TestServer, Arc<CountingExtractor>) {
    let counting = CountingExtractor::new(pool.clone());
    let setup = Setup {
        extractor: Some(counting.clone()),
        ..setup
    }
    .with_quota(quota_config(limit));
    let server = TestServer::start_on(setup, pool, Quota::new(kind).await).await;
    (server, counting)
}

/// One key, an all-or-nothing request nothing can satisfy, sent again and again: every
/// try is charged (the key is freed for the next try, never replayed for free), so the
/// scans stop at the quota, and each admitted try reached the store exactly once.
async fn repeated_impossible_request_is_charged_every_time(kind: QuotaKind) {
    let (server, counting) =
        counted(kind, 4, Arc::new(MemoryPool::default()), Setup::default()).await;
    server.seed("acme", 0, 2).await;
    let impossible = json!({"count": 3, "mode": "all_or_nothing"});
    for attempt in 0..4u32 {
        let reply = server.extract(ALICE, Some("scan-1"), &impossible).await;
        reply.assert_error(409, "insufficient_inventory");
        assert_eq!(remaining(&reply), 3 - attempt, "try {attempt} is charged");
    }
    let over = server.extract(ALICE, Some("scan-1"), &impossible).await;
    over.assert_error(429, "quota_exceeded");
    assert_eq!(
        counting.calls(),
        4,
        "the denied try never reached the store"
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        4
    );
    assert_eq!(server.unextracted("acme").await, 2, "nothing was extracted");
}

/// Without a key every request is charged anyway: the same loop costs the same.
async fn unkeyed_impossible_requests_are_charged_too(kind: QuotaKind) {
    let (server, counting) =
        counted(kind, 2, Arc::new(MemoryPool::default()), Setup::default()).await;
    server.seed("acme", 0, 1).await;
    let impossible = json!({"count": 2, "mode": "all_or_nothing"});
    for _ in 0..2 {
        server
            .extract(ALICE, None, &impossible)
            .await
            .assert_error(409, "insufficient_inventory");
    }
    server
        .extract(ALICE, None, &impossible)
        .await
        .assert_error(429, "quota_exceeded");
    assert_eq!(counting.calls(), 2);
}

/// How far each quota kind's test moved its API clock (the two run at the same time).
static CLOCK_OFFSET_MS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn offset(kind: QuotaKind) -> &'static AtomicU64 {
    &CLOCK_OFFSET_MS[usize::from(kind == QuotaKind::Sqlite)]
}

/// The wall clock moved forward by the test's offset: the pool's time, as the API hands it
/// over. (Only the test that sets the offset uses these clocks.)
fn shifted_memory() -> UnixMillis {
    now_millis() + offset(QuotaKind::Memory).load(Ordering::SeqCst)
}

fn shifted_sqlite() -> UnixMillis {
    now_millis() + offset(QuotaKind::Sqlite).load(Ordering::SeqCst)
}

/// A key's extraction stops being replayable when its proxies expire (here: when its
/// idempotency TTL ends); within the quota window the key is still held, so the same
/// request is 409 `idempotency_key_expired` and another body 409 `idempotency_conflict`,
/// and neither extracts anything.
async fn reused_key_after_its_extraction_expired_is_refused(kind: QuotaKind) {
    let extraction = proxypool_api::ExtractionSettings {
        idempotency_ttl: proxypool_config::Millis::from_secs(10),
        ..Default::default()
    };
    let server = server_on(
        kind,
        10,
        Setup {
            extraction,
            clock: Some(match kind {
                QuotaKind::Memory => shifted_memory,
                QuotaKind::Sqlite => shifted_sqlite,
            }),
            ..Setup::default()
        },
    )
    .await;
    server.seed("acme", 0, 4).await;
    let first = server.extract(ALICE, Some("order-7"), &body(1)).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(server.unextracted("acme").await, 3);
    let replay = server.extract(ALICE, Some("order-7"), &body(1)).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));

    offset(kind).store(11_000, Ordering::SeqCst);
    server
        .extract(ALICE, Some("order-7"), &body(1))
        .await
        .assert_error(409, "idempotency_key_expired");
    server
        .extract(ALICE, Some("order-7"), &body(2))
        .await
        .assert_error(409, "idempotency_conflict");
    offset(kind).store(0, Ordering::SeqCst);
    assert_eq!(server.unextracted("acme").await, 3, "no second extraction");
    // A new key is a new extraction.
    assert_eq!(
        server
            .extract(ALICE, Some("order-8"), &body(1))
            .await
            .status,
        200
    );
}

/// A scan that runs out of budget on a request without filters is the service's failure
/// (here: the proxies kept back for the gateway fill the budget): 503, and the client's
/// quota is as it was. A retry with the same key is decided afresh (and charged then).
async fn scan_budget_exhaustion_is_refunded(kind: QuotaKind) {
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions {
        extract_scan_budget: 2,
        ..MemoryPoolOptions::default()
    }));
    let setup = Setup {
        extraction: ExtractionSettings {
            reserve_for_gateway: 4,
            ..ExtractionSettings::default()
        },
        ..Setup::default()
    };
    let (server, counting) = counted(kind, 5, pool, setup).await;
    server.seed("acme", 0, 8).await;
    for key in [Some("budget-1"), Some("budget-1"), None] {
        let reply = server.extract(ALICE, key, &body(1)).await;
        reply.assert_error(503, "unavailable");
    }
    assert_eq!(counting.calls(), 3);
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        0,
        "no failure of the service is charged"
    );
}

/// A scan that runs out of budget on the client's own filters is the client's cost: each
/// call is charged (a keyed one spent, so its retry is charged again), or a filter that
/// matches almost nothing would make the store scan its whole budget for free.
async fn scan_budget_exhaustion_on_the_clients_filters_is_charged(kind: QuotaKind) {
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions {
        extract_scan_budget: 2,
        ..MemoryPoolOptions::default()
    }));
    let (server, _counting) = counted(kind, 5, pool, Setup::default()).await;
    server.seed("acme", 0, 8).await;
    // Only odd-numbered proxies are in `de`, and the scan examines the longest-lived first:
    // asking for 4 of them needs more than 2 candidates examined.
    let hard = json!({"count": 4, "filters": {"region": "de"}});
    for key in [Some("budget-1"), Some("budget-1"), None] {
        let reply = server.extract(ALICE, key, &hard).await;
        reply.assert_error(503, "unavailable");
    }
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        3,
        "every narrowed scan is charged"
    );
    // The spent key is free again: a request the store can decide goes through with it.
    let fine = server.extract(ALICE, Some("budget-1"), &body(1)).await;
    assert_eq!(fine.status, 200, "{}", fine.text());
    assert_eq!(remaining(&fine), 1);
}

/// Receipts are namespaced: a key equal to an earlier request's id (bare or with the
/// request-id namespace written in front) is a new receipt, charged and extracted anew.
async fn keys_never_collide_with_request_ids(kind: QuotaKind) {
    let server = server_on(kind, 10, Setup::default()).await;
    server.seed("acme", 0, 6).await;
    let unkeyed = server.extract(ALICE, None, &body(1)).await;
    assert_eq!(unkeyed.status, 200);
    assert_eq!(remaining(&unkeyed), 9);
    let request_id = unkeyed.header("x-request-id").unwrap().to_owned();
    for key in [request_id.clone(), format!("req:{request_id}")] {
        let keyed = server.extract(ALICE, Some(&key), &body(1)).await;
        assert_eq!(keyed.status, 200, "{}", keyed.text());
        assert_eq!(keyed.header("idempotent-replayed"), Some("false"), "{key}");
    }
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        3
    );
    assert_eq!(server.unextracted("acme").await, 3);
}

/// Three keyed extractions, then the limit drops to 1 (a reload): each of them still
/// replays (200, not charged), and a new key is refused.
async fn replay_after_lowering_the_limit_still_replays(kind: QuotaKind) {
    let server = server_on(kind, 3, Setup::default()).await;
    server.seed("acme", 0, 6).await;
    for key in ["k1", "k2", "k3"] {
        assert_eq!(server.extract(ALICE, Some(key), &body(1)).await.status, 200);
    }
    let lowered = Setup::default().with_quota(quota_config(1)).clients;
    server.state.replace_clients(lowered).unwrap();
    for key in ["k1", "k2", "k3"] {
        let replay = server.extract(ALICE, Some(key), &body(1)).await;
        assert_eq!(replay.status, 200, "{key}: {}", replay.text());
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(remaining(&replay), 0);
    }
    server
        .extract(ALICE, Some("k4"), &body(1))
        .await
        .assert_error(429, "quota_exceeded");
    assert_eq!(server.unextracted("acme").await, 3);
}

/// The client's rate-limit policy (burst 2, next token in ~17 min) comes before the quota:
/// the third request is 429 `rate_limited` with `Retry-After`, on extraction and inventory
/// alike, and charges nothing. Other clients are not affected.
async fn rate_limit_policy_comes_before_the_quota(kind: QuotaKind) {
    let mut setup = Setup::default();
    for client in &mut setup.clients {
        if client.id.as_str() == "alice" {
            client.rate_limit = Some(proxypool_throttle::Policy::new(0.001, 2.0));
        }
    }
    let server = server_on(kind, 10, setup).await;
    server.seed("acme", 0, 4).await;
    assert_eq!(server.extract(ALICE, None, &body(1)).await.status, 200);
    assert_eq!(
        server
            .get("/v1/upstreams/acme/inventory", Some(ALICE))
            .await
            .status,
        200
    );
    let denied = server.extract(ALICE, None, &body(1)).await;
    let message = denied.assert_error(429, "rate_limited");
    assert!(message.contains("rate limit"), "{message}");
    assert!(denied.header("retry-after").is_some());
    server
        .get("/v1/upstreams/acme/inventory", Some(ALICE))
        .await
        .assert_error(429, "rate_limited");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Inspect)
            .await,
        1
    );
    assert_eq!(server.extract(BOB, None, &body(1)).await.status, 200);
}

/// With one extraction of a client in flight (held in the store), its next one is refused
/// at once with 429 and charged nothing; another client is not held up; once the first
/// finishes the client may extract again.
async fn extractions_in_flight_are_capped_per_client(kind: QuotaKind) {
    let pool = Arc::new(MemoryPool::default());
    let gated = CountingExtractor::gated(pool.clone());
    let setup = Setup {
        extractor: Some(gated.clone()),
        extraction: proxypool_api::ExtractionSettings {
            max_in_flight_per_client: 1,
            ..Default::default()
        },
        ..Setup::default()
    }
    .with_quota(quota_config(10));
    let server = Arc::new(TestServer::start_on(setup, pool, Quota::new(kind).await).await);
    server.seed("acme", 0, 4).await;
    let first = tokio::spawn({
        let server = server.clone();
        async move { server.extract(ALICE, Some("slow"), &body(1)).await }
    });
    eventually_async(
        "the first reached the store",
        Duration::from_secs(10),
        async || (gated.calls() > 0).then_some(()),
    )
    .await;
    let second = server.extract(ALICE, Some("other"), &body(1)).await;
    second.assert_error(429, "rate_limited");
    assert_eq!(second.header("retry-after"), Some("1"));
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1,
        "the refused one charged nothing"
    );
    let bob = tokio::spawn({
        let server = server.clone();
        async move { server.extract(BOB, None, &body(1)).await }
    });
    gated.open(2);
    assert_eq!(first.await.unwrap().status, 200);
    assert_eq!(bob.await.unwrap().status, 200);
    gated.open(1);
    assert_eq!(
        server.extract(ALICE, Some("other"), &body(1)).await.status,
        200
    );
}

/// An extractor over a real pool whose first call hangs until a second call arrives (or
/// [`FirstCallFailsLate::HOLD`] passes), then fails as an unavailable store does, which
/// has its charge refunded; later calls go through.
#[derive(Debug)]
struct FirstCallFailsLate {
    inner: Arc<dyn proxypool_core::Extractor>,
    calls: AtomicU64,
    second_arrived: tokio::sync::Notify,
}

impl FirstCallFailsLate {
    /// The stimulus: how long the first call hangs when no second one comes while it does.
    const HOLD: Duration = Duration::from_secs(1);
}

#[async_trait::async_trait]
impl proxypool_core::Extractor for FirstCallFailsLate {
    async fn extract(
        &self,
        now: UnixMillis,
        request: proxypool_core::ExtractRequest,
    ) -> proxypool_core::PoolResult<proxypool_core::ExtractOutcome> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::select! {
                () = self.second_arrived.notified() => {}
                () = tokio::time::sleep(Self::HOLD) => {}
            }
            return Err(proxypool_core::PoolError::Unavailable(
                proxypool_core::Unavailable::Store("the first call fails".into()),
            ));
        }
        self.second_arrived.notify_one();
        self.inner.extract(now, request).await
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &proxypool_core::ClientId,
        id: &proxypool_core::ExtractionId,
    ) -> proxypool_core::PoolResult<proxypool_core::ExtractResponse> {
        self.inner.get_extraction(now, client, id).await
    }
}

/// A client that gave up waiting retries with the same key while its first attempt still
/// runs, and that attempt then fails and refunds its charge. The retry was admitted on the
/// first attempt's receipt; had it gone ahead, the refund would leave its extraction
/// unpaid. It waits for the first attempt to settle and is charged itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_not_left_unpaid_by_the_refund_of_an_attempt_still_running() {
    let pool = Arc::new(MemoryPool::default());
    let extractor = Arc::new(FirstCallFailsLate {
        inner: pool.clone(),
        calls: AtomicU64::new(0),
        second_arrived: tokio::sync::Notify::new(),
    });
    let setup = Setup {
        extractor: Some(extractor.clone()),
        ..Setup::default()
    }
    .with_quota(quota_config(10));
    let server =
        Arc::new(TestServer::start_on(setup, pool, Quota::new(QuotaKind::Memory).await).await);
    server.seed("acme", 0, 4).await;
    let first = tokio::spawn({
        let server = server.clone();
        async move { server.extract(ALICE, Some("k"), &body(1)).await }
    });
    eventually_async(
        "the first attempt reached the store",
        Duration::from_secs(10),
        async || (extractor.calls.load(Ordering::SeqCst) > 0).then_some(()),
    )
    .await;

    let retry = server.extract(ALICE, Some("k"), &body(1)).await;
    assert_eq!(retry.status, 200, "{}", retry.text());
    first.await.unwrap().assert_error(503, "unavailable");
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        1,
        "the retry's extraction is paid for once"
    );
    assert_eq!(server.unextracted("acme").await, 3);
}

on_memory_and_sqlite!(
    repeated_impossible_request_is_charged_every_time,
    unkeyed_impossible_requests_are_charged_too,
    reused_key_after_its_extraction_expired_is_refused,
    scan_budget_exhaustion_is_refunded,
    scan_budget_exhaustion_on_the_clients_filters_is_charged,
    keys_never_collide_with_request_ids,
    replay_after_lowering_the_limit_still_replays,
    rate_limit_policy_comes_before_the_quota,
    extractions_in_flight_are_capped_per_client,
);
