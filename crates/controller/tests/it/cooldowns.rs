//! Cooldowns through the worker control API: a runtime report's cooldown changes reach the
//! store and come back in the next snapshot's advisories with the `[cooldowns]` policy;
//! session feedback reaches the workers that serve its client until it expires.

use crate::common::*;
use hyper::{Method, StatusCode};
use proxypool_core::{
    ClientId, CooldownPolicy, CooldownStore, Domain, DomainCooldown, ProxyId, SecretHash,
    SessionFeedback, Verdict, WorkerId,
};
use serde_json::{Value, json};

const COOLDOWNS: &str = r#"
[cooldowns]
base = "2s"
cap = "1m"
memory = "5m"
"#;

const POLICY: CooldownPolicy = CooldownPolicy {
    base_ms: 2_000,
    cap_ms: 60_000,
    memory_ms: 300_000,
};

fn gateway_client(id: &str) -> String {
    let hash = SecretHash::derive("gateway-pw", "testsalt").unwrap();
    format!(
        r#"
[[clients]]
id = "{id}"
project = "acme"
gateway_password = {{ hash = "{hash}" }}
"#,
        hash = hash.as_str()
    )
}

fn config(extra: &str) -> proxypool_controller::config::Config {
    parse_config(&config_text(&format!(
        "{}{COOLDOWNS}{extra}",
        static_upstream("acme")
    )))
}

/// A runtime report with cooldown changes (as JSON, the way a gateway sends it).
async fn report_with_cooldowns(
    client: &ControlClient,
    worker: &str,
    session: &str,
    sequence: u64,
    reference: &Value,
    cooldowns: Value,
) -> Reply {
    let path = proxypool_core::control::report_path(&WorkerId::new(worker).unwrap());
    client
        .send(
            Method::POST,
            &path,
            Some(json!({
                "worker": worker, "session_id": session, "sequence": sequence,
                "snapshot": reference, "entries": [], "cooldowns": cooldowns
            })),
        )
        .await
}

fn ban(proxy: &str, domain: &str, until_ms: u64, forget_at_ms: u64) -> Value {
    json!({
        "op": "set", "proxy_id": proxy, "domain": domain,
        "until_ms": until_ms, "strikes": 1, "forget_at_ms": forget_at_ms
    })
}

#[tokio::test]
async fn a_reported_cooldown_comes_back_in_the_next_snapshot_with_the_policy() {
    let (controller, pool, _clock) = controller(config(""));
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();

    let first = client.snapshot("gw-a", "s", 0, 0).await.json();
    assert_eq!(
        serde_json::from_value::<CooldownPolicy>(first["advisories"]["policy"].clone()).unwrap(),
        POLICY
    );
    assert!(first["advisories"].get("cooldowns").is_none());
    let reference = first["reference"].clone();
    assert_eq!(
        client.ack("gw-a", "s", &reference).await.status,
        StatusCode::NO_CONTENT
    );
    let owned: Vec<String> = first["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!owned.is_empty());

    // Nothing of an invalid report is taken: the cooldown is not stored, the sequence
    // number stays free.
    let backwards = json!([ban(&owned[0], "shop.test", T0 + 9_000, T0 + 1_000)]);
    let refused = report_with_cooldowns(&client, "gw-a", "s", 1, &reference, backwards).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let proxy = ProxyId::new(&owned[0]).unwrap();
    assert!(
        pool.cooldowns_of(T0, std::slice::from_ref(&proxy))
            .await
            .unwrap()
            .is_empty()
    );

    let changes = json!([
        ban(&owned[0], "shop.test", T0 + 60_000, T0 + 120_000),
        ban(
            "0123456789abcdef0123456789abcdef",
            "shop.test",
            T0 + 60_000,
            T0 + 120_000
        ),
    ]);
    let accepted =
        report_with_cooldowns(&client, "gw-a", "s", 1, &reference, changes.clone()).await;
    assert_eq!(
        (accepted.status, accepted.json()["outcome"].clone()),
        (StatusCode::OK, json!("accepted")),
        "{:?}",
        String::from_utf8_lossy(&accepted.body)
    );
    let expected = DomainCooldown {
        project: None,
        proxy_id: proxy.clone(),
        domain: Domain::new("shop.test").unwrap(),
        until_ms: T0 + 60_000,
        strikes: 1,
        forget_at_ms: T0 + 120_000,
    };
    // A resent report (its answer was lost) is a replay; the merge leaves one entry.
    let replay = report_with_cooldowns(&client, "gw-a", "s", 1, &reference, changes).await;
    assert_eq!(replay.json()["outcome"], "replayed");
    assert_eq!(
        pool.cooldowns_of(T0, std::slice::from_ref(&proxy))
            .await
            .unwrap(),
        vec![expected.clone()]
    );

    let version = reference["version"].as_u64().unwrap();
    let next = client.snapshot("gw-a", "s", version, 0).await;
    assert_eq!(
        next.status,
        StatusCode::OK,
        "the cooldown makes a new version"
    );
    let next = next.json();
    assert_eq!(next["reference"]["version"].as_u64().unwrap(), version + 1);
    let advisories: proxypool_core::control::Advisories =
        serde_json::from_value(next["advisories"].clone()).unwrap();
    assert_eq!(advisories.policy, Some(POLICY));
    assert_eq!(advisories.cooldowns, vec![expected]);
    // Nothing changed since: the caller is up to date.
    let after = next["reference"]["version"].as_u64().unwrap();
    assert_eq!(
        client.snapshot("gw-a", "s", after, 0).await.status,
        StatusCode::NO_CONTENT
    );
}

fn feedback(id: &str, client: &str, expires_at_ms: u64) -> SessionFeedback {
    SessionFeedback {
        project: None,
        id: id.to_owned(),
        client: ClientId::new(client).unwrap(),
        session: "sess-1".to_owned(),
        domain: Domain::new("shop.test").unwrap(),
        verdict: Verdict::Banned,
        ttl_ms: None,
        expires_at_ms,
    }
}

#[tokio::test]
async fn session_feedback_reaches_the_workers_of_its_client_until_it_expires() {
    let (controller, pool, clock) = controller(config(&gateway_client("scraper")));
    seed_available(pool.as_ref(), T0, "acme", 2).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();
    let (reference, _) = client.sync("gw-a", "s", 0).await;
    let version = reference["version"].as_u64().unwrap();

    // Feedback on another client's session is not this worker's business.
    pool.add_session_feedback(T0, feedback("f-other", "someone-else", T0 + 5_000))
        .await
        .unwrap();
    pool.add_session_feedback(T0, feedback("f-1", "scraper", T0 + 5_000))
        .await
        .unwrap();
    let with = client.snapshot("gw-a", "s", version, 0).await;
    assert_eq!(
        with.status,
        StatusCode::OK,
        "new feedback makes a new version"
    );
    let with = with.json();
    let advisories: proxypool_core::control::Advisories =
        serde_json::from_value(with["advisories"].clone()).unwrap();
    assert_eq!(
        advisories.session_feedback,
        vec![feedback("f-1", "scraper", T0 + 5_000)]
    );
    let with_version = with["reference"]["version"].as_u64().unwrap();
    client.ack("gw-a", "s", &with["reference"]).await;

    // Once it expires, the next snapshot no longer carries it.
    clock.set(T0 + 5_000);
    let without = client.snapshot("gw-a", "s", with_version, 0).await;
    assert_eq!(without.status, StatusCode::OK);
    let without = without.json();
    assert!(
        without["advisories"].get("session_feedback").is_none(),
        "{without}"
    );
    assert!(without["reference"]["version"].as_u64().unwrap() > with_version);
}

#[tokio::test]
async fn snapshots_carry_the_store_s_ticket_key_counted_in_their_checksum() {
    use proxypool_core::TicketKeyStore;
    use proxypool_core::control::WorkerSnapshot;
    use proxypool_snapshot::snapshot_checksum;
    let (controller, pool, _clock) = controller(config(""));
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();

    let snapshot: WorkerSnapshot =
        serde_json::from_value(client.snapshot("gw-a", "s", 0, 0).await.json()).unwrap();
    let key = pool.ticket_key(T0).await.unwrap();
    assert_eq!(
        snapshot.ticket_key,
        Some(key.clone()),
        "the store's one key"
    );
    let parts = (
        &snapshot.proxies,
        &snapshot.held,
        &snapshot.clients,
        &snapshot.advisories,
    );
    assert_eq!(
        snapshot.reference.checksum,
        snapshot_checksum(parts.0, parts.1, parts.2, parts.3, Some(&key), &[])
    );
    assert_ne!(
        snapshot.reference.checksum,
        snapshot_checksum(parts.0, parts.1, parts.2, parts.3, None, &[]),
        "a new key is a new snapshot"
    );
}

/// A controller on each store: the memory store, and a private Redis (skipped, with a
/// banner, where there is none; under `CI=true` a missing one fails). The Redis is
/// returned with it so it lives as long as the test.
async fn on_each_store(
    extra: &str,
) -> Vec<(
    &'static str,
    proxypool_controller::Controller,
    std::sync::Arc<dyn proxypool_core::ActivityPool>,
    Option<proxypool_testkit::RedisServer>,
)> {
    let (memory, pool, _clock) = controller(config(extra));
    let mut stores: Vec<(_, _, std::sync::Arc<dyn proxypool_core::ActivityPool>, _)> =
        vec![("memory", memory, pool, None)];
    if let Some(redis) = proxypool_testkit::private_redis_or_skip() {
        let store = format!(
            "[store]\nurl = \"{}\"\nkey_prefix = \"scopes\"\ncall_timeout = \"250ms\"\nleader_lease = \"2s\"\n",
            redis.url()
        );
        let config = parse_config(&config_text(&format!(
            "{store}{}{COOLDOWNS}{extra}",
            static_upstream("acme")
        )));
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

/// Registers `gw-a`, hands it proxies and takes its first snapshot: (reference, proxy ids).
async fn registered_worker(
    controller: &proxypool_controller::Controller,
    pool: &dyn proxypool_core::ActivityPool,
) -> (ControlClient, Value, Vec<String>) {
    seed_available(pool, T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();
    let (reference, owned) = client.sync("gw-a", "s", 0).await;
    assert!(owned.len() >= 2, "{owned:?}");
    (client, reference, owned)
}

fn scoped_ban(proxy: &str, domain: &str, project: &str, forget_at_ms: u64) -> Value {
    let mut change = ban(proxy, domain, T0 + 60_000, forget_at_ms);
    change["project"] = json!(project);
    change
}

fn scopes_of(entries: &[DomainCooldown]) -> std::collections::BTreeSet<Option<String>> {
    entries
        .iter()
        .map(|e| e.project.as_ref().map(|p| p.to_string()))
        .collect()
}

/// The cooldowns the worker's next snapshot carries.
async fn advised(client: &ControlClient, reference: &Value) -> Vec<DomainCooldown> {
    let version = reference["version"].as_u64().unwrap();
    let next = client.snapshot("gw-a", "s", version, 0).await;
    assert_eq!(
        next.status,
        StatusCode::OK,
        "the report makes a new version"
    );
    let advisories: proxypool_core::control::Advisories =
        serde_json::from_value(next.json()["advisories"].clone()).unwrap();
    advisories.cooldowns
}

/// A gateway (or a leaked worker token) reporting cooldowns in made-up project scopes:
/// the report is taken (its other changes too, so a gateway with a stale client list after
/// a reload keeps its report), and the made-up scopes reach neither the store nor the
/// next snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_s_cooldowns_in_unconfigured_scopes_change_nothing() {
    for (store, controller, pool, _redis) in on_each_store(&gateway_client("scraper")).await {
        let (client, reference, owned) = registered_worker(&controller, pool.as_ref()).await;
        let (first, second) = (&owned[0], &owned[1]);
        let mut changes = vec![
            ban(first, "shop.test", T0 + 60_000, T0 + 120_000),
            scoped_ban(first, "shop.test", "acme", T0 + 120_000),
            scoped_ban(first, "shop.test", "made-up", T0 + 120_000),
            json!({"op": "clear", "proxy_id": first, "domain": "shop.test", "project": "nobody"}),
        ];
        // A flood of made-up scopes on the other proxy.
        changes.extend(
            (0..40).map(|i| scoped_ban(second, "shop.test", &format!("fake-{i:02}"), T0 + 120_000)),
        );
        let reply =
            report_with_cooldowns(&client, "gw-a", "s", 1, &reference, json!(changes)).await;
        assert_eq!(
            (reply.status, reply.json()["outcome"].clone()),
            (StatusCode::OK, json!("accepted")),
            "{store}: {:?}",
            String::from_utf8_lossy(&reply.body)
        );
        let ids: Vec<ProxyId> = [first, second]
            .iter()
            .map(|id| ProxyId::new(id.as_str()).unwrap())
            .collect();
        let stored = pool.cooldowns_of(T0, &ids).await.unwrap();
        let expected = std::collections::BTreeSet::from([None, Some("acme".to_owned())]);
        assert_eq!(scopes_of(&stored), expected, "{store}: {stored:?}");
        assert!(
            stored.iter().all(|e| e.proxy_id == ids[0]),
            "{store}: nothing on the flooded proxy: {stored:?}"
        );
        let advised = advised(&client, &reference).await;
        assert_eq!(
            advised, stored,
            "{store}: the snapshot carries what the store kept"
        );
    }
}

/// `n` gateway clients, each in a project of its own (`p00`, `p01`, ...).
fn clients_in_projects(n: usize) -> String {
    let hash = SecretHash::derive("gateway-pw", "testsalt").unwrap();
    (0..n)
        .map(|i| {
            format!(
                "[[clients]]\nid = \"c{i:02}\"\nproject = \"p{i:02}\"\ngateway_password = {{ hash = \"{}\" }}\n",
                hash.as_str()
            )
        })
        .collect()
}

/// A report flooding one proxy with cooldowns in many configured scopes leaves it at most
/// `MAX_PROJECT_SCOPES_PER_PROXY` project scopes beside the shared one (those remembered
/// longest), in the store and in the next snapshot; a second flood changes which, never
/// how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_flooding_one_proxy_s_scopes_stops_at_the_bound() {
    use proxypool_core::cooldown::{MAX_COOLDOWNS_PER_PROXY, MAX_PROJECT_SCOPES_PER_PROXY};
    let projects = MAX_PROJECT_SCOPES_PER_PROXY + 6;
    for (store, controller, pool, _redis) in on_each_store(&clients_in_projects(projects)).await {
        let (client, reference, owned) = registered_worker(&controller, pool.as_ref()).await;
        let proxy = &owned[0];
        // Every project's scope filled with its most domains; p00 is forgotten first.
        let mut changes = vec![ban(proxy, "shop.test", T0 + 60_000, T0 + 90_000)];
        for i in 0..projects {
            for d in 0..MAX_COOLDOWNS_PER_PROXY {
                let forget = T0 + 120_000 + i as u64;
                changes.push(scoped_ban(
                    proxy,
                    &format!("d{d:02}.test"),
                    &format!("p{i:02}"),
                    forget,
                ));
            }
        }
        let reply =
            report_with_cooldowns(&client, "gw-a", "s", 1, &reference, json!(changes)).await;
        assert_eq!(reply.status, StatusCode::OK, "{store}");
        let id = ProxyId::new(proxy.as_str()).unwrap();
        let stored = pool
            .cooldowns_of(T0, std::slice::from_ref(&id))
            .await
            .unwrap();
        let mut expected: std::collections::BTreeSet<Option<String>> =
            (projects - MAX_PROJECT_SCOPES_PER_PROXY..projects)
                .map(|i| Some(format!("p{i:02}")))
                .collect();
        expected.insert(None);
        assert_eq!(scopes_of(&stored), expected, "{store}");
        assert_eq!(
            stored.len(),
            1 + MAX_PROJECT_SCOPES_PER_PROXY * MAX_COOLDOWNS_PER_PROXY,
            "{store}"
        );
        assert_eq!(advised(&client, &reference).await, stored, "{store}");

        // The first projects again, remembered longer now: they take the places of the
        // soonest forgotten, and the count stays.
        let again: Vec<Value> = (0..4)
            .map(|i| scoped_ban(proxy, "shop.test", &format!("p{i:02}"), T0 + 200_000))
            .collect();
        let reply = report_with_cooldowns(&client, "gw-a", "s", 2, &reference, json!(again)).await;
        assert_eq!(reply.status, StatusCode::OK, "{store}");
        let stored = pool
            .cooldowns_of(T0, std::slice::from_ref(&id))
            .await
            .unwrap();
        let project_scopes = scopes_of(&stored).into_iter().flatten().count();
        assert_eq!(project_scopes, MAX_PROJECT_SCOPES_PER_PROXY, "{store}");
        assert!(
            scopes_of(&stored).contains(&Some("p00".to_owned())),
            "{store}"
        );
        assert!(scopes_of(&stored).contains(&None), "{store}");
    }
}
