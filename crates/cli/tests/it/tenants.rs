//! Tenants against each other, in split mode as processes: one `proxypool controller` and
//! one `proxypool gateway` on a private Redis and PostgreSQL, against the simulated vendor,
//! with three clients in two projects (`acme` and `acme-ops` in project acme, `beta` in
//! project beta). Each attack a client can make on what is another's is tried and fails,
//! while the other tenant's traffic through the gateway keeps going:
//!
//! 1. Enumeration: feedback on a proxy another client extracted is answered exactly as
//!    feedback on an id the pool never held.
//! 2. A day-long ban asked for is clamped to the operator's cap; feedback with another
//!    client's gateway ticket is answered as an unknown id.
//! 3. Another project's `ok` clears nothing of acme's; acme's own clear leaves the gateway
//!    with the next snapshot. A day-long report of beta's on every proxy binds beta's
//!    traffic only, and session feedback reaches only the reporting client's session.
//! 4. A flood of feedback is refused on the client's own bucket; another client's
//!    feedback still goes through.
//! 5. Requests to a target that refuses every connection make no proxy look failed.

use crate::common::split::{controller_config_as, migrate_quota};
use crate::common::{Proc, Scratch, curl, curl_or_skip, eventually, free_port, gateway_proxies};
use crate::common::{api, gateway_status, sim_upstream, sim_vendor};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const PROXIES: usize = 8;
/// Proxies the gateway leases; the others stay extractable.
const LEASED: usize = 4;
const SITE: &str = "shop-a.test";
const OTHER_SITE: &str = "shop-b.test";
/// A site only session feedback names.
const THIRD_SITE: &str = "shop-c.test";

const ENV: [(&str, &str); 9] = [
    ("WORKER_TOKEN_A", "tenants-worker-token-a"),
    ("WORKER_TOKEN_B", "tenants-worker-token-b"),
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
    ("OPS_TOKEN", "acme-ops-api-token-01"),
    ("OPS_PASSWORD", "acme-ops-gateway-password"),
    ("BETA_TOKEN", "beta-api-token-000001"),
    ("BETA_PASSWORD", "beta-gateway-password"),
    ("QUOTA_PASSWORD", "quota-role-password"),
];

/// The two more clients, and cooldowns and feedback limits small enough to see.
const MORE_TENANTS: &str = r#"
[[clients]]
id = "acme-ops"
project = "acme"
api_token = { env = "OPS_TOKEN" }
gateway_password = { env = "OPS_PASSWORD" }

[[clients]]
id = "beta"
project = "beta"
api_token = { env = "BETA_TOKEN" }
gateway_password = { env = "BETA_PASSWORD" }

[cooldowns]
cap = "1h"
feedback_per_minute = 60
feedback_burst = 10
"#;

/// One client API call, a 503 retried as a client does: (status, head, body).
fn call(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String, Value) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let text = body.map(Value::to_string);
    let answer = api::call(method, &url, Some(token), text.as_deref());
    assert_ne!(answer.status, 0, "{url}: no answer: {}", answer.body);
    (answer.status, answer.head.clone(), answer.json())
}

fn feedback(api: u16, token: &str, body: Value) -> (u16, String, Value) {
    call(api, token, "POST", "/v1/feedback", Some(&body))
}

/// A GET of `url` through the gateway as `user`: (status, the proxy id the gateway named).
fn through(proxy_port: u16, user: &str, password: &str, url: &str) -> (u16, Option<String>) {
    let (status, named) = through_ticketed(proxy_port, user, password, url);
    (status, named.map(|(id, _)| id))
}

/// [`through`], with the gateway's feedback ticket for the proxy it named.
fn through_ticketed(
    proxy_port: u16,
    user: &str,
    password: &str,
    url: &str,
) -> (u16, Option<(String, String)>) {
    let proxy = format!("http://{user}:{password}@127.0.0.1:{proxy_port}");
    let (code, out) = curl(&["-s", "-i", "-m", "5", "-x", &proxy, url]);
    if code != 0 {
        return (0, None);
    }
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header = |wanted: &str| {
        out.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_owned())
        })
    };
    let named = header("x-proxypool-proxy").map(|id| {
        let ticket = header("x-proxypool-ticket").expect("a ticket beside the proxy's id");
        (id, ticket)
    });
    (status, named)
}

/// Sum of the gateway's `family` series (from its admin `/metrics`).
fn gateway_metric_sum(admin: &str, family: &str) -> f64 {
    let [flag, header] = crate::common::gateway_admin_header();
    let (code, text) = curl(&["-s", &flag, &header, &format!("http://{admin}/metrics")]);
    assert_eq!(code, 0, "{text}");
    text.lines()
        .filter(|line| {
            line.starts_with(&format!("{family}{{")) || line.starts_with(&format!("{family} "))
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The running cooldowns the gateway lists for `domain`.
fn gateway_entries(admin: &str, domain: &str) -> Vec<Value> {
    gateway_status(admin)
        .and_then(|status| status["cooldowns"]["entries"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["domain"] == domain)
        .collect()
}

/// Whether the gateway lists a running cooldown of `proxy` for `domain`.
fn gateway_cooling(admin: &str, proxy: &str, domain: &str) -> bool {
    gateway_status(admin).is_some_and(|status| {
        status["cooldowns"]["entries"]
            .as_array()
            .is_some_and(|entries| {
                entries
                    .iter()
                    .any(|e| e["proxy_id"] == proxy && e["domain"] == domain)
            })
    })
}

#[test]
fn no_tenant_can_ban_clear_flood_enumerate_or_fail_what_is_anothers() {
    if !curl_or_skip() {
        return;
    }
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (_runtime, sim) = sim_vendor(PROXIES);
    let scratch = Scratch::new("tenants");
    let (control, api) = (free_port(), free_port());
    let config = format!(
        "{}\n{MORE_TENANTS}",
        controller_config_as(
            &redis,
            pg.port(),
            control,
            api,
            LEASED,
            &sim_upstream(&sim),
            false
        )
    );
    let config = scratch.write("controller.toml", &config);
    let config = config.to_str().unwrap();
    let mut env = ENV.to_vec();
    env.push(("PG_ADMIN_URL", admin_url.as_str()));
    migrate_quota(config, &env);
    let _controller = Proc::start(
        "controller",
        &["controller", "--config", config],
        &env,
        &scratch.path,
    );

    let (http, admin) = (free_port(), free_port());
    let origin = sim.origin();
    // Any port on the origin's address: the refusing target of step 5 is one of them.
    // With a token: `gateway_status` reads the cooldowns' domains and projects.
    let admin_token = crate::common::gateway_admin_token_toml();
    let gateway = format!(
        r#"
[gateway]
worker_id = "gw-a"
controller_url = ["http://127.0.0.1:{control}"]
worker_token = {{ env = "WORKER_TOKEN_A" }}
shutdown_grace = "2000ms"
{admin_token}
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
[gateway.control]
max_backoff = "500ms"
[gateway.destinations]
allow_cidrs = ["{}/32"]
ports = "*"
"#,
        origin.addr().ip()
    );
    let gateway = scratch.write("gw-a.toml", &gateway);
    let _gateway = Proc::start(
        "gw-a",
        &["gateway", "--config", gateway.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the gateway leases its share",
        Duration::from_secs(60),
        || gateway_proxies(&admin) == LEASED as u64,
    );
    let beta_sees_every_proxy = |what: &str| {
        let seen: BTreeSet<String> = (0..3 * LEASED)
            .filter_map(|_| {
                let (status, id) = through(
                    http,
                    "beta",
                    "beta-gateway-password",
                    &origin.host_url(OTHER_SITE, "/"),
                );
                assert_eq!(status, 200, "beta's request {what}");
                id
            })
            .collect();
        assert_eq!(
            seen.len(),
            LEASED,
            "beta reaches every proxy {what}: {seen:?}"
        );
    };
    beta_sees_every_proxy("at the start");

    // 1. Enumeration: acme's extracted proxy and an id the pool never held answer alike.
    let (status, _, extraction) = call(
        api,
        "acme-api-token-0001",
        "POST",
        "/v1/extractions",
        Some(&json!({"count": 2})),
    );
    assert_eq!(status, 200, "{extraction}");
    let extracted = extraction["proxies"][0]["id"].as_str().unwrap().to_owned();
    let ban = |id: &str| json!({"proxy_id": id, "domain": SITE, "verdict": "banned"});
    let (foreign_status, _, foreign) = feedback(api, "beta-api-token-000001", ban(&extracted));
    let (unknown_status, _, unknown) = feedback(api, "beta-api-token-000001", ban(&"0".repeat(32)));
    assert_eq!(foreign_status, 404, "{foreign}");
    assert_eq!(
        (foreign_status, &foreign["error"]),
        (unknown_status, &unknown["error"])
    );
    // Its owner may report it.
    let (status, _, own) = feedback(api, "acme-api-token-0001", ban(&extracted));
    assert_eq!(status, 200, "{own}");

    // 2. A day asked for is the operator's hour. acme-ops reports the proxy the gateway
    //    routed it through, with the gateway's ticket; beta, holding that ticket, cannot.
    let (status, named) = through_ticketed(
        http,
        "acme-ops",
        "acme-ops-gateway-password",
        &origin.host_url(SITE, "/"),
    );
    assert_eq!(status, 200);
    let (routed, ticket) = named.expect("the gateway names the proxy");
    let (stolen_status, _, stolen) = feedback(
        api,
        "beta-api-token-000001",
        json!({"proxy_id": routed, "domain": SITE, "verdict": "banned", "ticket": ticket}),
    );
    assert_eq!(
        (stolen_status, &stolen["error"]),
        (unknown_status, &unknown["error"]),
        "another client's ticket"
    );
    let (status, _, answer) = feedback(
        api,
        "acme-ops-api-token-01",
        json!({"proxy_id": routed, "domain": SITE, "verdict": "banned", "ttl": "24h",
               "ticket": ticket}),
    );
    assert_eq!(status, 200, "{answer}");
    let ttl = answer["ttl_ms"].as_u64().unwrap();
    assert!((1..=3_600_000).contains(&ttl), "{answer}");

    // 3. The gateway learns the ban, and unlearns it with the next snapshot after the clear.
    eventually(
        "the gateway cools the proxy",
        Duration::from_secs(10),
        || gateway_cooling(&admin, &routed, SITE),
    );
    // Another project's `ok` clears nothing of acme's, in the store or on the gateway.
    let version = |admin: &str| {
        gateway_status(admin).map_or(0, |s| s["snapshot"]["version"].as_u64().unwrap_or(0))
    };
    // beta has its own ticket for the proxy: the gateway routes it there too.
    let beta_ticket = (0..3 * LEASED)
        .find_map(|_| {
            let (_, named) = through_ticketed(
                http,
                "beta",
                "beta-gateway-password",
                &origin.host_url(OTHER_SITE, "/"),
            );
            named
                .filter(|(id, _)| *id == routed)
                .map(|(_, ticket)| ticket)
        })
        .expect("beta is routed through acme-ops's proxy too");
    let before = version(&admin);
    let (status, _, answer) = feedback(
        api,
        "beta-api-token-000001",
        json!({"proxy_id": routed, "domain": SITE, "verdict": "ok", "ticket": beta_ticket}),
    );
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("cleared")),
        "{answer}"
    );
    eventually(
        "a snapshot after beta's ok reaches the gateway",
        Duration::from_secs(10),
        || version(&admin) > before,
    );
    assert!(
        gateway_cooling(&admin, &routed, SITE),
        "beta's ok cleared acme's cooldown"
    );
    let (status, _, answer) = feedback(
        api,
        "acme-ops-api-token-01",
        json!({"proxy_id": routed, "domain": SITE, "verdict": "ok", "ticket": ticket}),
    );
    assert_eq!(status, 200, "{answer}");
    let cleared = eventually(
        "the clear reaches the gateway",
        Duration::from_secs(10),
        || !gateway_cooling(&admin, &routed, SITE),
    );
    eprintln!("a cleared cooldown left the gateway within {cleared:?}");
    beta_sees_every_proxy("after the clear");

    // 3b. beta reports every proxy it was routed through as banned on SITE for a day: its
    // own project stops using them there, acme's clients do not notice.
    let beta_routed: BTreeMap<String, String> = (0..3 * LEASED)
        .filter_map(|_| {
            through_ticketed(
                http,
                "beta",
                "beta-gateway-password",
                &origin.host_url(SITE, "/"),
            )
            .1
        })
        .collect();
    assert_eq!(beta_routed.len(), LEASED, "{beta_routed:?}");
    for (id, ticket) in &beta_routed {
        let report = json!({"proxy_id": id, "domain": SITE, "verdict": "banned", "ttl": "24h",
                            "ticket": ticket});
        let (status, _, answer) = feedback(api, "beta-api-token-000001", report);
        assert_eq!(status, 200, "{answer}");
    }
    eventually(
        "the gateway holds beta's reports",
        Duration::from_secs(10),
        || {
            beta_routed
                .keys()
                .all(|id| gateway_cooling(&admin, id, SITE))
        },
    );
    let (status, _) = through(
        http,
        "beta",
        "beta-gateway-password",
        &origin.host_url(SITE, "/"),
    );
    assert_eq!(status, 503, "beta's own reports bind beta");
    for _ in 0..2 * LEASED {
        let (status, _) = through(
            http,
            "acme",
            "acme-gateway-password",
            &origin.host_url(SITE, "/"),
        );
        assert_eq!(status, 200, "beta's reports must not keep acme off {SITE}");
    }

    // 3c. Session feedback reaches only the reporting client's own session: beta names
    // acme's session and changes nothing; acme's own report cools the session's proxy, in
    // acme's scope.
    let (status, pinned) = through(
        http,
        "acme-session-t1",
        "acme-gateway-password",
        &origin.host_url(OTHER_SITE, "/"),
    );
    assert_eq!(status, 200);
    let pinned = pinned.expect("the gateway names the session's proxy");
    let on_session = json!({"session": "t1", "domain": THIRD_SITE, "verdict": "banned"});
    let (status, _, answer) = feedback(api, "beta-api-token-000001", on_session.clone());
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("queued")),
        "{answer}"
    );
    let (status, _, answer) = feedback(api, "acme-api-token-0001", on_session);
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("queued")),
        "{answer}"
    );
    eventually(
        "acme's session feedback cools its session's proxy",
        Duration::from_secs(10),
        || gateway_cooling(&admin, &pinned, THIRD_SITE),
    );
    let entries = gateway_entries(&admin, THIRD_SITE);
    assert_eq!(entries.len(), 1, "only acme's session was hit: {entries:?}");
    assert_eq!(entries[0]["project"], "acme", "{entries:?}");

    // 4. A flood is refused on beta's own bucket (burst 10, eight of it spent above); acme's feedback still goes.
    let flood: Vec<(u16, String)> = (0..20)
        .map(|_| {
            let (status, head, _) = feedback(api, "beta-api-token-000001", ban(&"1".repeat(32)));
            (status, head)
        })
        .collect();
    let refused: Vec<&(u16, String)> = flood.iter().filter(|(status, _)| *status == 429).collect();
    assert!(
        refused.len() >= 9,
        "{:?}",
        flood.iter().map(|f| f.0).collect::<Vec<_>>()
    );
    assert!(
        refused
            .iter()
            .all(|(_, head)| head.contains("retry-after:"))
    );
    let (status, named) = through_ticketed(
        http,
        "acme",
        "acme-gateway-password",
        &origin.host_url(OTHER_SITE, "/"),
    );
    assert_eq!(status, 200);
    let (acme_routed, acme_ticket) = named.expect("the gateway names the proxy");
    let (status, _, answer) = feedback(
        api,
        "acme-api-token-0001",
        json!({"proxy_id": acme_routed, "domain": OTHER_SITE, "verdict": "ok",
               "ticket": acme_ticket}),
    );
    assert_eq!(status, 200, "acme's feedback after beta's flood: {answer}");

    // 5. acme hammers a port nobody listens on: the target's failures, not the proxies'.
    let closed = format!("http://{}:{}/", origin.addr().ip(), free_port());
    for _ in 0..3 * LEASED {
        let (status, _) = through(http, "acme", "acme-gateway-password", &closed);
        assert!(matches!(status, 502 | 504), "{status}");
    }
    assert_eq!(
        gateway_metric_sum(&admin, "proxypool_gateway_upstream_failures_total"),
        0.0,
        "a target's failures were counted against the proxies"
    );
    assert!(gateway_metric_sum(&admin, "proxypool_gateway_target_failures_total") > 0.0);
    assert_eq!(gateway_proxies(&admin), LEASED as u64);
    beta_sees_every_proxy("after acme's failing targets");
}
