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
