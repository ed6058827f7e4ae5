//! A proxy given back (`POST /v1/feedback` with `return`) over HTTP, on a MemoryPool and on
//! a RedisPool: the returning client's extraction stops serving its credentials (read and
//! replay alike), nobody else is handed it while that client may still hold them, and a
//! gateway's ticket issued before the proxy moved on (another lease, an extraction, a
//! return) is refused.

use crate::common::*;
use crate::feedback::{client_of, on_each_store};
use proxypool_core::{
    Candidate, Conflict, Credentials, DomainCooldown, FetchedBatch, PoolError, ProxyId,
    TICKET_LIFETIME_MS, UnixMillis, WorkerId, now_millis, proxy_id_for,
};
use serde_json::{Value, json};

const SHOP: &str = "shop-a.test";

/// The one proxy of upstream `solo`, with this password.
fn solo(password: &str) -> Candidate {
    let mut c = candidate(500);
    c.credentials = Some(Credentials::new("user500", password));
    c
}

/// `solo` listed by the vendor at `now` (seeded or re-listed).
async fn list_solo(server: &TestServer, now: UnixMillis, password: &str) -> u32 {
    let batch = FetchedBatch {
        upstream: upstream("solo"),
        operation_id: None,
        ttl_ms: 600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000,
        default_max_sessions: 4,
        candidates: vec![solo(password)],
    };
    server.pool.upsert(now, batch).await.unwrap().inserted
}

/// Marks `proxy` checked and healthy at `now`.
async fn passes_a_check(server: &TestServer, now: UnixMillis, proxy: &ProxyId) -> u32 {
    let check = proxypool_core::HealthBatch {
        observations: vec![proxypool_core::HealthObservation {
            proxy_id: proxy.clone(),
            checked_at_ms: now,
            outcome: proxypool_core::CheckOutcome::Success { latency_ms: 20 },
        }],
        unhealthy_after_failures: 3,
    };
    server.pool.apply_health(now, check).await.unwrap().applied
}

fn from_solo(count: u32) -> Value {
    json!({"count": count, "filters": {"upstream": "solo"}})
}

fn give_back(proxy: &str) -> Value {
    json!({"proxy_id": proxy, "domain": SHOP, "verdict": "banned", "return": true})
}

async fn cooldowns(server: &TestServer, proxy: &ProxyId) -> Vec<DomainCooldown> {
    server
        .pool
        .cooldowns_of(now_millis(), std::slice::from_ref(proxy))
        .await
        .unwrap()
}

/// Bob's reports on `proxy` with each of `tickets`: each refused as an unknown id is, and
/// none recording anything.
async fn refused(server: &TestServer, store: &str, why: &str, proxy: &ProxyId, tickets: &[&str]) {
    let before = cooldowns(server, proxy).await;
    for ticket in tickets {
        let body = json!({"proxy_id": proxy, "domain": SHOP, "verdict": "slow", "ticket": ticket});
        let reply = server.feedback_unticketed(BOB, None, &body).await;
        assert_eq!(reply.status, 404, "{store} {why}: {}", reply.text());
        reply.assert_error(404, "not_found");
    }
    assert_eq!(cooldowns(server, proxy).await, before, "{store} {why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_proxy_leaves_its_extraction_and_goes_to_nobody_else() {
    for (store, server, _redis) in on_each_store().await {
        server.seed("acme", 0, 2).await;
        let t = now_millis();
        assert_eq!(list_solo(&server, t, "pw-first-500").await, 1, "{store}");
        let c = solo("");
        let proxy = proxy_id_for(c.protocol, &c.host, c.port, Some("user500"));
        assert_eq!(passes_a_check(&server, t, &proxy).await, 1, "{store}");

        // Alice extracts it (keyed), then gives it back.
        let first = server.extract(ALICE, Some("a-1"), &from_solo(1)).await;
        assert_eq!(first.status, 200, "{store}: {}", first.text());
        let extraction = first.json();
        assert_eq!(extraction["proxies"][0]["id"], proxy.as_str(), "{store}");
        assert_eq!(extraction["proxies"][0]["password"], "pw-first-500");
        assert_eq!(extraction["proxies"][0]["returned"], false);
        let returned = server
            .feedback_unticketed(ALICE, None, &give_back(proxy.as_str()))
            .await;
        assert_eq!(returned.status, 200, "{store}: {}", returned.text());
        assert_eq!(returned.json()["returned"], true);

        // Her extraction no longer serves the credentials: read or replayed.
        let id = extraction["id"].as_str().unwrap();
        let read = server
            .get(&format!("/v1/extractions/{id}"), Some(ALICE))
            .await;
        assert_eq!(read.status, 200, "{store}: {}", read.text());
        let replay = server.extract(ALICE, Some("a-1"), &from_solo(1)).await;
        assert_eq!(replay.status, 200, "{store}: {}", replay.text());
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        for (what, answer) in [("read", &read), ("replay", &replay)] {
            let shown = &answer.json()["proxies"][0];
            assert_eq!(shown["id"], proxy.as_str(), "{store} {what}");
            assert_eq!(shown["returned"], true, "{store} {what}");
            assert!(shown["username"].is_null(), "{store} {what}: {shown}");
            assert!(shown["password"].is_null(), "{store} {what}: {shown}");
            assert!(
                !answer.text().contains("pw-first-500"),
                "{store} {what}: {}",
                answer.text()
            );
        }
        assert_eq!(read.json()["proxies"], replay.json()["proxies"], "{store}");

        // Bob, asking for exactly that proxy's upstream, gets nothing (not alice's proxy),
        // and no gateway may lease it.
        let bobs = server.extract(BOB, None, &from_solo(1)).await;
        match bobs.status {
            200 => assert_eq!(
                bobs.json()["proxies"],
                json!([]),
                "{store}: {}",
                bobs.text()
            ),
            _ => {
                bobs.assert_error(409, "insufficient_inventory");
            }
        }
        let all = server
            .extract(
                BOB,
                None,
                &json!({"count": 1, "mode": "all_or_nothing", "filters": {"upstream": "solo"}}),
            )
            .await;
        assert_ne!(all.status, 200, "{store}: {}", all.text());
        let gateway = WorkerId::new("gw-1").unwrap();
        assert_eq!(
            server
                .pool
                .assign(now_millis(), &proxy, &gateway, 60_000)
                .await,
            Err(PoolError::Conflict(Conflict::Status)),
            "{store}"
        );
        // A passing check does not bring it back either.
        assert_eq!(
            passes_a_check(&server, now_millis(), &proxy).await,
            0,
            "{store}"
        );
        let again = server.extract(BOB, None, &from_solo(1)).await;
        assert!(
            !again.text().contains("pw-first-500"),
            "{store}: {}",
            again.text()
        );

        // The vendor lists it unchanged: still nobody's. With a new password it is a new
        // proxy, checked, then handed out with the new credentials only.
        assert_eq!(list_solo(&server, now_millis(), "pw-first-500").await, 0);
        assert_eq!(list_solo(&server, now_millis(), "pw-second-500").await, 1);
        assert_eq!(passes_a_check(&server, now_millis(), &proxy).await, 1);
        let renewed = server.extract(BOB, None, &from_solo(1)).await;
        assert_eq!(renewed.status, 200, "{store}: {}", renewed.text());
        assert_eq!(
            renewed.json()["proxies"][0]["id"],
            proxy.as_str(),
            "{store}"
        );
        assert_eq!(renewed.json()["proxies"][0]["password"], "pw-second-500");
        let still = server
            .get(&format!("/v1/extractions/{id}"), Some(ALICE))
            .await;
        assert!(!still.text().contains("pw-"), "{store}: {}", still.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_from_before_the_proxy_moved_on_is_refused() {
    for (store, server, _redis) in on_each_store().await {
        let proxy = server.seed("solo", 600, 1).await.remove(0);
        let bob = client_of(BOB).unwrap();
        let report = |ticket: &str| json!({"proxy_id": proxy, "domain": SHOP, "verdict": "slow", "ticket": ticket});
        let ticket_in = |epoch: u64| {
            server.ticket_under(&bob, &proxy, epoch, now_millis() + TICKET_LIFETIME_MS)
        };
        let (gw1, gw2, gw3) = (
            WorkerId::new("gw-1").unwrap(),
            WorkerId::new("gw-2").unwrap(),
            WorkerId::new("gw-3").unwrap(),
        );

        // A gateway leases it and routes bob through it: his ticket is good, also after
        // the lease lapsed while nobody else took the proxy.
        let t = now_millis();
        let first = server.pool.assign(t, &proxy, &gw1, 10).await.unwrap();
        let in_first = ticket_in(first.epoch).await;
        let ok = server
            .feedback_unticketed(BOB, None, &report(&in_first))
            .await;
        assert_eq!(ok.status, 200, "{store}: {}", ok.text());
        server.pool.expire(t + 10, 100).await.unwrap();
        let ok = server
            .feedback_unticketed(BOB, None, &report(&in_first))
            .await;
        assert_eq!(ok.status, 200, "{store}: {}", ok.text());

        // Leased again (to another gateway): the old ticket is refused, the new one good.
        let second = server.pool.assign(t + 20, &proxy, &gw2, 10).await.unwrap();
        refused(&server, store, "another lease", &proxy, &[&in_first]).await;
        let in_second = ticket_in(second.epoch).await;
        let ok = server
            .feedback_unticketed(BOB, None, &report(&in_second))
            .await;
        assert_eq!(ok.status, 200, "{store}: {}", ok.text());
        server.pool.expire(t + 30, 100).await.unwrap();

        // Alice extracts it and gives it back: no ticket of before opens it.
        let taken = server.extract(ALICE, None, &from_solo(1)).await;
        assert_eq!(taken.json()["proxies"][0]["id"], proxy.as_str(), "{store}");
        let before = [in_first.as_str(), in_second.as_str()];
        refused(&server, store, "extracted", &proxy, &before).await;
        let back = server
            .feedback_unticketed(ALICE, None, &give_back(proxy.as_str()))
            .await;
        assert_eq!(back.status, 200, "{store}: {}", back.text());
        refused(&server, store, "given back", &proxy, &before).await;

        // Re-issued by the vendor and checked: a new generation no gateway leased yet, so
        // no ticket at all; then a new lease, whose ticket alone is good.
        let mut renewed = candidate(600);
        renewed.credentials = Some(Credentials::new("user600", "pw-renewed-600"));
        let relisted = server
            .pool
            .upsert(
                now_millis(),
                FetchedBatch {
                    upstream: upstream("solo"),
                    operation_id: None,
                    ttl_ms: 600_000,
                    safety_margin_ms: 5_000,
                    max_size: 1_000,
                    default_max_sessions: 4,
                    candidates: vec![renewed],
                },
            )
            .await
            .unwrap();
        assert_eq!(relisted.inserted, 1, "{store}");
        assert_eq!(passes_a_check(&server, now_millis(), &proxy).await, 1);
        let unleased = ticket_in(0).await;
        let mut any = before.to_vec();
        any.push(&unleased);
        refused(&server, store, "a new generation", &proxy, &any).await;
        let third = server
            .pool
            .assign(now_millis(), &proxy, &gw3, 60_000)
            .await
            .unwrap();
        refused(&server, store, "before the new lease", &proxy, &before).await;
        let in_third = ticket_in(third.epoch).await;
        let ok = server
            .feedback_unticketed(BOB, None, &report(&in_third))
            .await;
        assert_eq!(ok.status, 200, "{store}: {}", ok.text());
    }
}
