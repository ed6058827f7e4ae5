//! `POST /v1/feedback` over HTTP on a MemoryPool: each verdict's effect read back from the
//! store, cooldowns growing with repeated bans, session feedback queued, a proxy given back
//! and replaced in one call, `for_domain` on extractions, and every refusal changing
//! nothing.

use crate::common::*;
use proxypool_core::ticket::TicketSubject;
use proxypool_core::{
    ClientId, CooldownChange, Domain, DomainCooldown, ProjectId, ProxyId, ProxyStatus, Reporter,
    TICKET_LIFETIME_MS, TicketKey, UnixMillis, Verdict, WorkerId, issue_ticket, now_millis,
};
use proxypool_quota::Operation;
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::RedisServer;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const SHOP_A: &str = "shop-a.test";
const MINUTE: u64 = 60_000;
/// The `[cooldowns]` cap of the default policy: no cooldown lasts longer.
const CAP: u64 = 60 * MINUTE;

/// A server on each real store: a MemoryPool, and a RedisPool in a private `redis-server`
/// (kept alive beside it; without one the Redis half is skipped, unless `CI` is set).
pub(crate) async fn on_each_store() -> Vec<(&'static str, TestServer, Option<RedisServer>)> {
    on_each_store_with(Setup::default).await
}

/// [`on_each_store`] with servers made from `setup`.
pub(crate) async fn on_each_store_with(
    setup: fn() -> Setup,
) -> Vec<(&'static str, TestServer, Option<RedisServer>)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut servers = vec![("memory", TestServer::memory(setup()).await, None)];
    if let Some(redis) = proxypool_testkit::private_redis_or_skip() {
        let prefix = format!(
            "feedback_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let pool = Arc::new(
            RedisPool::new(
                RedisClient::open(redis.url()).unwrap(),
                RedisPoolOptions {
                    key_prefix: prefix,
                    ..RedisPoolOptions::default()
                },
            )
            .unwrap(),
        );
        let server = TestServer::start_on(
            setup().with_quota(quota_config(1000)),
            pool,
            Quota::new(QuotaKind::Memory).await,
        )
        .await;
        servers.push(("redis", server, Some(redis)));
    }
    servers
}

/// The client id of a test token (`token-<id>-0123456789`); none for another text.
pub(crate) fn client_of(token: &str) -> Option<ClientId> {
    token
        .strip_prefix("token-")
        .and_then(|rest| rest.strip_suffix("-0123456789"))
        .and_then(|id| ClientId::new(id).ok())
}

impl TestServer {
    /// A feedback as a client a gateway routed through the proxy sends it: a body naming a
    /// valid `proxy_id` (and no `session` or `ticket` of its own) carries the ticket the
    /// gateway would have given the token's client for it. See [`Self::feedback_unticketed`].
    async fn feedback(&self, token: &str, key: Option<&str>, body: &Value) -> Reply {
        let mut body = body.clone();
        let proxy = body["proxy_id"].as_str().and_then(|p| ProxyId::new(p).ok());
        if let (Some(proxy), Some(client)) = (proxy, client_of(token))
            && body.get("session").is_none()
            && body.get("ticket").is_none()
        {
            body["ticket"] = json!(self.ticket(&client, &proxy, now_millis()).await);
        }
        self.feedback_unticketed(token, key, &body).await
    }

    /// A feedback with exactly the body given.
    pub(crate) async fn feedback_unticketed(
        &self,
        token: &str,
        key: Option<&str>,
        body: &Value,
    ) -> Reply {
        self.post_json("/v1/feedback", token, key, body).await
    }

    /// The ticket a gateway gives `client` at `now` for `proxy`, with the store's key and
    /// bound to the lease it routed through the proxy under ([`Self::routed`]).
    pub(crate) async fn ticket(
        &self,
        client: &ClientId,
        proxy: &ProxyId,
        now: UnixMillis,
    ) -> String {
        let lease_epoch = self.routed(proxy, now).await;
        self.ticket_under(client, proxy, lease_epoch, now + TICKET_LIFETIME_MS)
            .await
    }

    /// The ticket for `client` on `proxy` in its lease `lease_epoch`, good until
    /// `expires_at_ms`, under the store's key.
    pub(crate) async fn ticket_under(
        &self,
        client: &ClientId,
        proxy: &ProxyId,
        lease_epoch: u64,
        expires_at_ms: UnixMillis,
    ) -> String {
        let key = self.pool.ticket_key(now_millis()).await.unwrap();
        let subject = TicketSubject {
            client,
            proxy,
            lease_epoch,
        };
        issue_ticket(&key, subject, expires_at_ms)
    }

    /// The epoch of the lease a gateway routed through `proxy` under: its latest lease,
    /// or, for a proxy not leased since it entered the pool, one a test gateway takes and
    /// ends at once (a lease that lapsed: the proxy is the pool's again). 0, which no
    /// ticket is bound to, for a proxy no gateway may lease.
    pub(crate) async fn routed(&self, proxy: &ProxyId, now: UnixMillis) -> u64 {
        let anyone = ClientId::new("alice").unwrap();
        match self.pool.may_report(now, &anyone, proxy).await.unwrap() {
            Reporter::Unheld {
                lease_epoch: Some(epoch),
            } => epoch,
            Reporter::Unheld { lease_epoch: None } => {
                let gateway = WorkerId::new("gw-test").unwrap();
                let Ok(lease) = self.pool.assign(now, proxy, &gateway, 1).await else {
                    return 0;
                };
                self.pool.expire(now + 1, 100).await.unwrap();
                lease.epoch
            }
            Reporter::Holder | Reporter::No => 0,
        }
    }

    /// A feedback call that must succeed, with the time window it ran in (cooldown ends
    /// are checked against it).
    async fn feedback_ok(&self, token: &str, body: &Value) -> (Reply, (UnixMillis, UnixMillis)) {
        let before = now_millis();
        let reply = self.feedback(token, None, body).await;
        let after = now_millis();
        assert_eq!(reply.status, 200, "{}", reply.text());
        (reply, (before, after))
    }

    async fn cooldowns(&self, proxy: &ProxyId) -> Vec<DomainCooldown> {
        self.pool
            .cooldowns_of(now_millis(), std::slice::from_ref(proxy))
            .await
            .unwrap()
    }

    async fn with_status(&self, status: ProxyStatus) -> u64 {
        self.pool
            .inventory(now_millis(), &upstream("acme"))
            .await
            .unwrap()
            .by_status
            .get(&status)
            .copied()
            .unwrap_or(0)
    }
}

/// The one entry of `proxy`, checked to end `ttl` after a moment in `[before, after]`.
fn assert_cooling(
    entries: &[DomainCooldown],
    domain: &str,
    strikes: u32,
    ttl: u64,
    (before, after): (UnixMillis, UnixMillis),
) {
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.domain, Domain::new(domain).unwrap());
    assert_eq!(entry.strikes, strikes, "{entry:?}");
    assert!(
        (before + ttl..=after + ttl).contains(&entry.until_ms),
        "until {} not {ttl} ms after [{before}, {after}]",
        entry.until_ms
    );
    assert!(entry.forget_at_ms >= entry.until_ms);
}

fn proxy_ids(extraction: &Value) -> Vec<String> {
    extraction["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_verdict_changes_the_cooldown_and_bans_grow() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 2).await;
    let (first, second) = (&ids[0], &ids[1]);

    // A URL is reduced to its registrable domain; the first ban lasts the policy's base.
    let (reply, window) = server.feedback_ok(ALICE, &json!({"proxy_id": first, "domain": "https://WWW.Shop-A.test:8443/cart?x=1", "verdict": "banned"})).await;
    let body = reply.json();
    assert_eq!(body["outcome"], "cooling");
    assert_eq!(body["domain"], SHOP_A);
    assert_eq!(body["proxy_id"], first.as_str());
    assert_eq!(body["returned"], false);
    assert_eq!(body["cooldown"]["strikes"], 1);
    assert!(body.get("replacement").is_none());
    assert_eq!(
        reply.header("ratelimit-policy"),
        Some("\"inspect\";q=1000;w=300")
    );
    let stored = server.cooldowns(first).await;
    assert_cooling(&stored, SHOP_A, 1, MINUTE, window);
    assert_eq!(body["cooldown"]["until"], stored[0].until_ms);

    // A captcha is a ban too: the second in a row doubles the cooldown.
    let (_, window) = server
        .feedback_ok(
            ALICE,
            &json!({"proxy_id": first, "domain": SHOP_A, "verdict": "captcha"}),
        )
        .await;
    assert_cooling(
        &server.cooldowns(first).await,
        SHOP_A,
        2,
        2 * MINUTE,
        window,
    );

    // A third with the client's own estimate: the strikes still grow, the TTL is its own.
    let (_, window) = server
        .feedback_ok(
            ALICE,
            &json!({"proxy_id": first, "domain": SHOP_A, "verdict": "banned", "ttl": "45m"}),
        )
        .await;
    assert_cooling(
        &server.cooldowns(first).await,
        SHOP_A,
        3,
        45 * MINUTE,
        window,
    );
    let alice_scope = ProjectId::new("p-alice").unwrap();
    assert_eq!(
        server.cooldowns(first).await[0].project,
        Some(alice_scope.clone()),
        "a client's report is kept in its project's scope"
    );

    // Another project's report on the same proxy and domain is an entry of its own: it
    // neither grows nor shortens alice's.
    let (reply, window) = server
        .feedback_ok(
            BOB,
            &json!({"proxy_id": first, "domain": SHOP_A, "verdict": "banned"}),
        )
        .await;
    assert_eq!(reply.json()["cooldown"]["strikes"], 1);
    assert_eq!(reply.json()["cooldown"]["project"], "p-bob");
    let both = server.cooldowns(first).await;
    assert_eq!(both.len(), 2, "{both:?}");
    let of = |project: &str| -> Vec<DomainCooldown> {
        both.iter()
            .filter(|e| e.project == Some(ProjectId::new(project).unwrap()))
            .cloned()
            .collect()
    };
    assert_cooling(&of("p-bob"), SHOP_A, 1, MINUTE, window);
    assert_eq!(of("p-alice")[0].strikes, 3);

    // Slow holds for the TTL given and leaves the strikes alone.
    let (reply, window) = server
        .feedback_ok(
            ALICE,
            &json!({"proxy_id": second, "domain": "shop-b.test", "verdict": "slow", "ttl": "5s"}),
        )
        .await;
    assert_eq!(reply.json()["cooldown"]["strikes"], 0);
    assert_cooling(
        &server.cooldowns(second).await,
        "shop-b.test",
        0,
        5_000,
        window,
    );

    // Ok ends the cooldown of that domain only, and only the caller's project's: bob's
    // report stays.
    let reply = server
        .feedback(
            ALICE,
            None,
            &json!({"proxy_id": first, "domain": "www.shop-a.test", "verdict": "ok"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["outcome"], "cleared");
    assert!(reply.json().get("cooldown").is_none());
    let left = server.cooldowns(first).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].project, Some(ProjectId::new("p-bob").unwrap()));
    assert_eq!(server.cooldowns(second).await.len(), 1);

    // Each feedback cost one inspect unit of the caller.
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Inspect)
            .await,
        5
    );
    assert_eq!(
        server
            .quota
            .consumed("p-bob", "bob", Operation::Inspect)
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_feedback_is_queued_for_the_gateway() {
    let server = TestServer::memory(Setup::default()).await;
    let before = now_millis();
    let reply = server
        .feedback(
            ALICE,
            None,
            &json!({"session": "cart_1", "domain": "shop-a.test", "verdict": "captcha", "ttl": "2m"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["outcome"], "queued");
    assert_eq!(body["session"], "cart_1");
    let id = body["feedback_id"].as_str().unwrap().to_owned();
    let queued = server
        .pool
        .session_feedback(now_millis(), 10)
        .await
        .unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    let feedback = &queued[0];
    assert_eq!(feedback.id, id);
    assert_eq!(feedback.client, ClientId::new("alice").unwrap());
    assert_eq!(feedback.session, "cart_1");
    assert_eq!(feedback.domain, Domain::new(SHOP_A).unwrap());
    assert_eq!(feedback.verdict, Verdict::Captcha);
    assert_eq!(feedback.ttl_ms, Some(2 * MINUTE));
    assert_eq!(
        feedback.project,
        Some(ProjectId::new("p-alice").unwrap()),
        "the session's cooldown goes to the reporting client's project"
    );
    assert_eq!(body["expires_at"], feedback.expires_at_ms);
    assert!(feedback.expires_at_ms >= before + proxypool_core::cooldown::SESSION_FEEDBACK_TTL_MS);

    // A second feedback is another entry, with an id of its own.
    let again = server
        .feedback(
            ALICE,
            None,
            &json!({"session": "cart_1", "domain": "shop-a.test", "verdict": "ok"}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_ne!(again.json()["feedback_id"], id.as_str());
    assert_eq!(
        server
            .pool
            .session_feedback(now_millis(), 10)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_proxy_is_withheld_and_replaced_by_one_not_cooling_for_the_domain() {
    let server = TestServer::memory(Setup::default()).await;
    let seeded = server.seed("acme", 0, 3).await;
    let extraction = server.extract(ALICE, None, &body(1)).await;
    assert_eq!(extraction.status, 200, "{}", extraction.text());
    let held = proxy_ids(&extraction.json()).remove(0);
    let others: Vec<&ProxyId> = seeded.iter().filter(|id| id.as_str() != held).collect();
    // One of the two left is cooling for shop-a.test for everyone (a ban a gateway saw is
    // shared); the other only for bob's project, which binds nobody of alice's.
    let now = now_millis();
    let seen = CooldownChange::Set(DomainCooldown {
        proxy_id: others[0].clone(),
        domain: Domain::new(SHOP_A).unwrap(),
        project: None,
        until_ms: now + MINUTE,
        strikes: 1,
        forget_at_ms: now + 2 * MINUTE,
    });
    server.pool.apply_cooldowns(now, &[seen]).await.unwrap();
    let cooling = server
        .feedback(
            BOB,
            None,
            &json!({"proxy_id": others[1], "domain": SHOP_A, "verdict": "banned"}),
        )
        .await;
    assert_eq!(cooling.status, 200, "{}", cooling.text());

    let reply = server
        .feedback(
            ALICE,
            Some("swap-1"),
            &json!({
                "proxy_id": held,
                "domain": "www.shop-a.test",
                "verdict": "banned",
                "return": true,
                "replacement": {"count": 2}
            }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["returned"], true);
    assert_eq!(body["outcome"], "cooling");
    // Neither the returned proxy (withheld) nor the one cooling for the domain for
    // everyone: the third, which only bob's project avoids.
    let replacement = &body["replacement"];
    assert_eq!(replacement["requested"], 2);
    assert_eq!(proxy_ids(replacement), [others[1].as_str()]);
    assert!(replacement["proxies"][0]["password"].is_string());
    assert_eq!(reply.header("idempotent-replayed"), Some("false"));
    assert_eq!(
        reply.header("ratelimit-policy"),
        Some("\"extract\";q=1000;w=300")
    );
    // The returned one stays EXTRACTED (nobody's, unchecked) beside the replacement.
    assert_eq!(server.with_status(ProxyStatus::Suspect).await, 0);
    assert_eq!(server.with_status(ProxyStatus::Extracted).await, 2);
    assert_eq!(
        server.cooldowns(&ProxyId::new(&held).unwrap()).await.len(),
        1,
        "the ban is remembered too"
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Extract)
            .await,
        2
    );
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Inspect)
            .await,
        1
    );

    // Given back once, it is not the client's any more.
    let twice = server
        .feedback(
            ALICE,
            None,
            &json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned", "return": true}),
        )
        .await;
    twice.assert_error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_cannot_be_made_is_reported_beside_the_applied_feedback() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 1).await;
    let reply = server
        .feedback(
            ALICE,
            None,
            &json!({
                "proxy_id": ids[0],
                "domain": SHOP_A,
                "verdict": "banned",
                "replacement": {"mode": "all_or_nothing", "for_domain": "shop-a.test"}
            }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["outcome"], "cooling");
    assert_eq!(body["replacement_error"]["code"], "insufficient_inventory");
    assert!(body.get("replacement").is_none());
    assert_eq!(server.cooldowns(&ids[0]).await.len(), 1);
    assert_eq!(server.unextracted("acme").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extraction_for_a_domain_skips_proxies_cooling_for_it() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 2).await;
    let ban = server
        .feedback(
            ALICE,
            None,
            &json!({"proxy_id": ids[0], "domain": SHOP_A, "verdict": "banned"}),
        )
        .await;
    assert_eq!(ban.status, 200, "{}", ban.text());

    let reply = server
        .extract(
            ALICE,
            None,
            &json!({"count": 2, "for_domain": "https://www.shop-a.test/"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(proxy_ids(&reply.json()), [ids[1].as_str()]);
    // For another domain the cooling proxy is as good as any.
    let reply = server
        .extract(BOB, None, &json!({"count": 1, "for_domain": "shop-b.test"}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(proxy_ids(&reply.json()), [ids[0].as_str()]);

    let bad = server
        .extract(
            ALICE,
            None,
            &json!({"count": 1, "for_domain": "not a host"}),
        )
        .await;
    let message = bad.assert_error(400, "invalid_request");
    assert!(message.starts_with("for_domain: "), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_it_is_401() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 1).await;
    let reply = Reply::from(
        server
            .http
            .post(server.url("/v1/feedback"))
            .header("content-type", "application/json")
            .body(json!({"proxy_id": ids[0], "domain": SHOP_A, "verdict": "banned"}).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    reply.assert_error(401, "unauthenticated");
    let wrong = server
        .feedback(
            "token-nobody",
            None,
            &json!({"proxy_id": ids[0], "domain": SHOP_A, "verdict": "banned"}),
        )
        .await;
    wrong.assert_error(401, "unauthenticated");
    assert!(server.cooldowns(&ids[0]).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_400_naming_the_field_and_change_nothing() {
    let server = TestServer::memory(Setup::default()).await;
    let ids = server.seed("acme", 0, 2).await;
    let extraction = server.extract(ALICE, None, &body(1)).await;
    let held = proxy_ids(&extraction.json()).remove(0);
    let buckets = server.quota.buckets().await;
    let proxy = ids[0].as_str();
    let cases: Vec<(Option<&str>, Value, &str)> = vec![
        (
            None,
            json!({"domain": SHOP_A, "verdict": "banned"}),
            "proxy_id, session",
        ),
        (
            None,
            json!({"proxy_id": proxy, "session": "s1", "domain": SHOP_A, "verdict": "banned"}),
            "proxy_id, session",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": "bad host", "verdict": "banned"}),
            "domain",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": "https:///x", "verdict": "banned"}),
            "domain",
        ),
        (
            None,
            json!({"proxy_id": proxy, "verdict": "banned"}),
            "domain",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "meh"}),
            "verdict",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A}),
            "verdict",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "banned", "ttl": "25h"}),
            "ttl",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "banned", "ttl": "30"}),
            "ttl",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "ok", "ttl": "30s"}),
            "ttl",
        ),
        (
            None,
            json!({"proxy_id": "xyz", "domain": SHOP_A, "verdict": "banned"}),
            "proxy_id",
        ),
        (
            None,
            json!({"session": "no spaces", "domain": SHOP_A, "verdict": "banned"}),
            "session",
        ),
        (
            None,
            json!({"session": "s1", "domain": SHOP_A, "verdict": "banned", "return": true}),
            "return",
        ),
        (
            None,
            json!({"proxy_id": held, "domain": SHOP_A, "verdict": "ok", "return": true}),
            "return",
        ),
        (
            None,
            json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "banned", "later": 1}),
            "later",
        ),
        (
            None,
            json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned", "return": true,
                   "replacement": {"count": 0}}),
            "replacement.count",
        ),
        (
            None,
            json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned", "return": true,
                   "replacement": {"count": 1, "colour": "red"}}),
            "colour",
        ),
        (
            None,
            json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned",
                   "replacement": {"for_domain": "bad host"}}),
            "replacement.for_domain",
        ),
    ];
    for (key, body, field) in cases {
        let reply = server.feedback(ALICE, key, &body).await;
        let message = reply.assert_error(400, "invalid_request");
        assert!(
            message.contains(field),
            "{body}: {message:?} should name {field}"
        );
    }
    let oversized = json!({
        "proxy_id": proxy, "domain": SHOP_A, "verdict": "banned", "ttl": "x".repeat(20_000)
    });
    server
        .feedback(ALICE, None, &oversized)
        .await
        .assert_error(413, "payload_too_large");

    // Nothing changed: no cooldown, no session feedback, the held proxy still held, and no
    // quota charged.
    for id in &ids {
        assert!(server.cooldowns(id).await.is_empty());
    }
    assert!(
        server
            .pool
            .session_feedback(now_millis(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(server.with_status(ProxyStatus::Extracted).await, 1);
    assert_eq!(server.with_status(ProxyStatus::Suspect).await, 0);
    assert_eq!(server.quota.buckets().await, buckets);
    assert_eq!(
        server
            .quota
            .consumed("p-alice", "alice", Operation::Inspect)
            .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_proxy_cannot_be_returned_and_unknown_proxies_are_404() {
    let server = TestServer::memory(Setup::default()).await;
    server.seed("acme", 0, 2).await;
    let extraction = server.extract(ALICE, None, &body(1)).await;
    let held = proxy_ids(&extraction.json()).remove(0);

    let reply = server
        .feedback(
            BOB,
            None,
            &json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned", "return": true,
                    "replacement": {}}),
        )
        .await;
    reply.assert_error(404, "not_found");
    assert!(
        server
            .cooldowns(&ProxyId::new(&held).unwrap())
            .await
            .is_empty()
    );
    assert_eq!(server.with_status(ProxyStatus::Extracted).await, 1);
    assert_eq!(server.with_status(ProxyStatus::Suspect).await, 0);
    assert_eq!(server.unextracted("acme").await, 1, "no replacement made");
    assert_eq!(
        server
            .quota
            .consumed("p-bob", "bob", Operation::Extract)
            .await,
        0
    );

    let unknown = "0123456789abcdef0123456789abcdef";
    for verdict in ["banned", "ok"] {
        server
            .feedback(
                ALICE,
                None,
                &json!({"proxy_id": unknown, "domain": SHOP_A, "verdict": verdict}),
            )
            .await
            .assert_error(404, "not_found");
    }
    assert!(
        server
            .cooldowns(&ProxyId::new(unknown).unwrap())
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_ttl_is_clamped_to_the_policy_cap() {
    for (store, server, _redis) in on_each_store().await {
        let ids = server.seed("acme", 0, 1).await;
        let proxy = &ids[0];

        // A day asked for is the cap's hour, and the answer says so.
        let (reply, window) = server
            .feedback_ok(
                ALICE,
                &json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "banned", "ttl": "24h"}),
            )
            .await;
        assert_eq!(reply.json()["ttl_ms"], CAP, "{store}: {}", reply.text());
        assert_cooling(&server.cooldowns(proxy).await, SHOP_A, 1, CAP, window);

        // A slow hold is clamped the same way.
        let (reply, window) = server
            .feedback_ok(
                ALICE,
                &json!({"proxy_id": proxy, "domain": "shop-b.test", "verdict": "slow", "ttl": "20h"}),
            )
            .await;
        assert_eq!(reply.json()["ttl_ms"], CAP, "{store}");
        let entries = server.cooldowns(proxy).await;
        assert_cooling(&entries[1..], "shop-b.test", 0, CAP, window);

        // Within the cap the client's estimate stands.
        let (reply, _) = server
            .feedback_ok(
                ALICE,
                &json!({"proxy_id": proxy, "domain": "shop-c.test", "verdict": "banned", "ttl": "10m"}),
            )
            .await;
        assert_eq!(reply.json()["ttl_ms"], 10 * MINUTE, "{store}");

        // Session feedback carries the clamped ttl to the gateway.
        let (reply, _) = server
            .feedback_ok(
                ALICE,
                &json!({"session": "s1", "domain": SHOP_A, "verdict": "banned", "ttl": "24h"}),
            )
            .await;
        assert_eq!(reply.json()["ttl_ms"], CAP, "{store}");
        let queued = server
            .pool
            .session_feedback(now_millis(), 10)
            .await
            .unwrap();
        assert_eq!(queued.len(), 1, "{store}");
        assert_eq!(queued[0].ttl_ms, Some(CAP), "{store}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feedback_flood_is_429_on_its_own_bucket_and_changes_nothing() {
    fn three_at_once() -> Setup {
        Setup {
            feedback_rate: Some(proxypool_api::FeedbackRate {
                per_minute: 1,
                burst: 3,
            }),
            ..Setup::default()
        }
    }
    for (store, server, _redis) in on_each_store_with(three_at_once).await {
        let ids = server.seed("acme", 0, 2).await;
        let proxy = &ids[0];
        for i in 0..3 {
            server
                .feedback_ok(
                    ALICE,
                    &json!({"proxy_id": proxy, "domain": format!("shop-{i}.test"), "verdict": "banned"}),
                )
                .await;
        }
        // The flood: every further report is refused before it is charged or applied.
        for i in 3..20 {
            let reply = server
                .feedback(
                    ALICE,
                    None,
                    &json!({"proxy_id": proxy, "domain": format!("shop-{i}.test"), "verdict": "banned"}),
                )
                .await;
            reply.assert_error(429, "rate_limited");
            let retry_after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
            assert!(retry_after >= 1, "{store}: Retry-After {retry_after}");
        }
        assert_eq!(server.cooldowns(proxy).await.len(), 3, "{store}");
        assert_eq!(
            server
                .quota
                .consumed("p-alice", "alice", Operation::Inspect)
                .await,
            3,
            "{store}"
        );
        // Other clients have buckets of their own, and its extractions are not the
        // feedback's bucket.
        server
            .feedback_ok(
                BOB,
                &json!({"proxy_id": &ids[1], "domain": SHOP_A, "verdict": "banned"}),
            )
            .await;
        let extraction = server.extract(ALICE, None, &body(1)).await;
        assert_eq!(extraction.status, 200, "{store}: {}", extraction.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_foreign_proxy_ids_get_the_same_answer() {
    for (store, server, _redis) in on_each_store().await {
        let ids = server.seed("acme", 0, 2).await;
        let extraction = server.extract(ALICE, None, &body(1)).await;
        let held = proxy_ids(&extraction.json()).remove(0);
        let spare = ids.iter().find(|id| id.as_str() != held).unwrap().clone();
        let unknown = "0123456789abcdef0123456789abcdef";

        // Bob on Alice's extracted proxy and on an id the pool never held: one answer.
        for verdict in ["banned", "ok"] {
            let answer =
                |proxy: &str| json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": verdict});
            let foreign = server.feedback(BOB, None, &answer(&held)).await;
            let missing = server.feedback(BOB, None, &answer(unknown)).await;
            foreign.assert_error(404, "not_found");
            missing.assert_error(404, "not_found");
            assert_eq!(
                foreign.json()["error"],
                missing.json()["error"],
                "{store} {verdict}"
            );
            let names = |reply: &Reply| {
                let mut names: Vec<String> = reply
                    .headers
                    .keys()
                    .map(|name| name.as_str().to_owned())
                    .filter(|name| !matches!(name.as_str(), "date" | "x-request-id"))
                    .collect();
                names.sort();
                names
            };
            assert_eq!(names(&foreign), names(&missing), "{store} {verdict}");
        }
        // Nothing was recorded on Alice's proxy.
        assert!(
            server
                .cooldowns(&ProxyId::new(&held).unwrap())
                .await
                .is_empty(),
            "{store}"
        );

        // Its holder reports it (no ticket needed); a proxy nobody extracted is reported by
        // a client a gateway routed through it, with the gateway's ticket.
        let reply = server
            .feedback_unticketed(
                ALICE,
                None,
                &json!({"proxy_id": held, "domain": SHOP_A, "verdict": "banned"}),
            )
            .await;
        assert_eq!(reply.status, 200, "{store}: {}", reply.text());
        server
            .feedback_ok(
                BOB,
                &json!({"proxy_id": spare, "domain": SHOP_A, "verdict": "banned"}),
            )
            .await;
        // Bob cannot clear the ban on Alice's proxy either.
        server
            .feedback(
                BOB,
                None,
                &json!({"proxy_id": held, "domain": SHOP_A, "verdict": "ok"}),
            )
            .await
            .assert_error(404, "not_found");
        assert_eq!(
            server.cooldowns(&ProxyId::new(&held).unwrap()).await.len(),
            1,
            "{store}"
        );
    }
}

/// How far the ticket test moved its API clock.
static TICKET_CLOCK_OFFSET_MS: AtomicU64 = AtomicU64::new(0);

/// The wall clock moved forward by the ticket test's offset (only that test uses it).
fn ticket_clock() -> UnixMillis {
    now_millis() + TICKET_CLOCK_OFFSET_MS.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_nobody_extracted_is_reported_only_with_a_gateway_s_ticket_for_it() {
    fn setup() -> Setup {
        Setup {
            clock: Some(ticket_clock),
            ..Setup::default()
        }
    }
    for (store, server, _redis) in on_each_store_with(setup).await {
        TICKET_CLOCK_OFFSET_MS.store(0, Ordering::SeqCst);
        let ids = server.seed("acme", 0, 3).await;
        let extraction = server.extract(ALICE, None, &body(1)).await;
        let held = ProxyId::new(proxy_ids(&extraction.json()).remove(0)).unwrap();
        let spare: Vec<&ProxyId> = ids.iter().filter(|id| **id != held).collect();
        let (routed, other) = (spare[0], spare[1]);
        let (alice, bob) = (client_of(ALICE).unwrap(), client_of(BOB).unwrap());
        let now = now_millis();
        let report = |proxy: &ProxyId, ticket: Option<&str>| {
            let mut body = json!({"proxy_id": proxy, "domain": SHOP_A, "verdict": "banned"});
            if let Some(ticket) = ticket {
                body["ticket"] = json!(ticket);
            }
            body
        };
        let unknown = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let missing = server
            .feedback_unticketed(ALICE, None, &report(&unknown, None))
            .await;
        missing.assert_error(404, "not_found");

        // Without a ticket, or with one that is not Alice's for this proxy under the
        // store's key: the answer of an unknown id, and nothing recorded.
        let bobs = server.ticket(&bob, routed, now).await;
        let another_proxy = server.ticket(&alice, other, now).await;
        let epoch = server.routed(routed, now).await;
        let alice_on_routed = TicketSubject {
            client: &alice,
            proxy: routed,
            lease_epoch: epoch,
        };
        let another_key = issue_ticket(
            &TicketKey::generate().unwrap(),
            alice_on_routed,
            now + TICKET_LIFETIME_MS,
        );
        let another_lease = server
            .ticket_under(&alice, routed, epoch + 1, now + TICKET_LIFETIME_MS)
            .await;
        let short = server
            .ticket_under(&alice, routed, epoch, now + MINUTE)
            .await;
        // The same MAC under the old format, which binds no lease: refused.
        let as_v1 = short.replacen("v2.", "v1.", 1);
        for (why, ticket) in [
            ("none", None),
            ("bob's", Some(bobs.as_str())),
            ("another proxy's", Some(another_proxy.as_str())),
            ("another key's", Some(another_key.as_str())),
            ("another lease's", Some(another_lease.as_str())),
            ("v1", Some(as_v1.as_str())),
            ("garbage", Some("v2.1.zz")),
        ] {
            let reply = server
                .feedback_unticketed(ALICE, None, &report(routed, ticket))
                .await;
            reply.assert_error(404, "not_found");
            assert_eq!(
                reply.json()["error"],
                missing.json()["error"],
                "{store} {why}"
            );
        }
        // Past its expiry on the API's clock (the proxy itself is still the pool's).
        TICKET_CLOCK_OFFSET_MS.store(MINUTE + 1_000, Ordering::SeqCst);
        let expired = server
            .feedback_unticketed(ALICE, None, &report(routed, Some(&short)))
            .await;
        expired.assert_error(404, "not_found");
        assert_eq!(expired.json()["error"], missing.json()["error"], "{store}");
        assert!(server.cooldowns(routed).await.is_empty(), "{store}");
        TICKET_CLOCK_OFFSET_MS.store(0, Ordering::SeqCst);

        // Alice's own, still good: the report is made.
        let reply = server
            .feedback_unticketed(ALICE, None, &report(routed, Some(&short)))
            .await;
        assert_eq!(reply.status, 200, "{store}: {}", reply.text());
        assert_eq!(server.cooldowns(routed).await.len(), 1, "{store}");
        assert!(server.cooldowns(other).await.is_empty(), "{store}");

        // The holder of an extraction needs none; a ticket never opens another client's
        // extracted proxy.
        let reply = server
            .feedback_unticketed(ALICE, None, &report(&held, None))
            .await;
        assert_eq!(reply.status, 200, "{store}: {}", reply.text());
        let bob_on_held = server.ticket(&bob, &held, now).await;
        let reply = server
            .feedback_unticketed(BOB, None, &report(&held, Some(&bob_on_held)))
            .await;
        reply.assert_error(404, "not_found");
        assert_eq!(reply.json()["error"], missing.json()["error"], "{store}");
        assert_eq!(server.cooldowns(&held).await.len(), 1, "{store}");

        // A session is reported by its id alone.
        let mut on_session = json!({"session": "s1", "domain": SHOP_A, "verdict": "banned"});
        on_session["ticket"] = json!(short);
        server
            .feedback_unticketed(ALICE, None, &on_session)
            .await
            .assert_error(400, "invalid_request");
    }
}
