//! The admin listener of `proxypool serve` is private by default: in one process the
//! gateway's admin `/metrics` renders the same registry as the client API's, tenants'
//! usage included, and its `/status` lists cooldowns by domain. Without `[gateway]
//! admin_token` anyone who reaches the listener reads only the aggregate: no series with a
//! tenant's label, no cooldown's domain or project, no client named anywhere. A reload
//! that sets the token closes both routes to a scrape without it and shows everything to
//! one with it; the probes stay open throughout.

use crate::common::exposition::scrape;
use crate::common::{
    Proc, Scratch, allow_sim_origin, curl, curl_or_skip, eventually, free_port, gateway_proxies,
    sim_upstream, sim_vendor,
};
use proxypool_sim::StatusCode;
use serde_json::Value;
use std::net::IpAddr;
use std::time::Duration;

/// The host the origin bans every exit for: what the cooldowns name.
const BANNED: &str = "shop-a.test";
const ADMIN_TOKEN: &str = "serve-admin-token-0123456789";
const ENV: [(&str, &str); 3] = [
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
    ("GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN),
];

fn serve_config(
    sim: &proxypool_sim::SimVendor,
    (api, http, admin): (u16, u16, u16),
    admin_token: &str,
) -> String {
    format!(
        r#"
[quota]
url = "sqlite://data/quota.sqlite3"

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

[ownership]
per_worker_target = 4
interval = "200ms"

[checker]
interval = "200ms"

[cooldowns]
base = "10m"

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}

[gateway]
worker_id = "box-1"
{admin_token}
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
{destinations}
"#,
        sim_upstream = sim_upstream(sim),
        destinations = allow_sim_origin(sim),
    )
}

/// `GET url` with optional bearer `token`: (HTTP status, body).
fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let bearer = token.map(|t| format!("Authorization: Bearer {t}"));
    let mut args = vec!["-w", "\n%{http_code}"];
    if let Some(bearer) = &bearer {
        args.extend(["-H", bearer.as_str()]);
    }
    args.push(url);
    let (_, out) = curl(&args);
    let (body, status) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// The sample lines of an exposition that carry a tenant's label.
fn tenant_samples(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            proxypool_metrics::TENANT_LABELS.iter().any(|label| {
                line.contains(&format!("{{{label}=\"")) || line.contains(&format!(",{label}=\""))
            })
        })
        .collect()
}

#[test]
fn serve_admin_listener_shows_no_tenant_detail_without_its_token_and_all_with_it() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(4);
    let scratch = Scratch::new("admin-private");
    let ports = (free_port(), free_port(), free_port());
    let (api, http, admin) = ports;
    let config = scratch.write("proxypool.toml", &serve_config(&sim, ports, ""));
    let serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &ENV,
        &scratch.path,
    );
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the in-process gateway holds every proxy",
        Duration::from_secs(30),
        || gateway_proxies(&admin) == 4,
    );

    // acme routes through the gateway: usage series by client, and cooldowns by domain.
    for proxy in sim.proxies() {
        sim.origin()
            .ban(IpAddr::V4(proxy.exit_ip()), BANNED, StatusCode::FORBIDDEN);
    }
    let through = format!("http://acme:acme-gateway-password@127.0.0.1:{http}");
    let (code, _) = curl(&[
        "-f",
        "-x",
        &through,
        &sim.origin().host_url("shop-b.test", "/"),
    ]);
    assert_eq!(code, 0, "a request through the gateway");
    let admin_metrics = format!("http://{admin}/metrics");
    let admin_status = format!("http://{admin}/status");
    eventually(
        "the gateway cools proxies for the banned host",
        Duration::from_secs(30),
        || {
            curl(&["-x", &through, &sim.origin().host_url(BANNED, "/")]);
            let (_, body) = get(&admin_status, None);
            serde_json::from_str::<Value>(&body)
                .is_ok_and(|s| s["cooldowns"]["cooling"].as_u64() > Some(0))
        },
    );

    // No token: the aggregate only.
    let (status, text) = get(&admin_metrics, None);
    assert_eq!(status, 200, "{text}");
    assert_eq!(tenant_samples(&text), Vec::<&str>::new(), "{text}");
    assert!(!text.contains("acme"), "a tenant is named:\n{text}");
    assert!(
        text.contains("# TYPE proxypool_usage_requests_total counter"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("proxypool_gateway_connections_total") && !l.ends_with(" 0")),
        "the aggregate counts the traffic:\n{text}"
    );
    // The client API renders the same registry, under the same rule.
    let api_text = scrape(&format!("http://127.0.0.1:{api}/metrics")).expect("API /metrics");
    assert_eq!(tenant_samples(&api_text), Vec::<&str>::new(), "{api_text}");
    let (status, body) = get(&admin_status, None);
    assert_eq!(status, 200, "{body}");
    let open: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(open["detail"], false, "{open}");
    assert!(open["cooldowns"]["cooling"].as_u64() > Some(0), "{open}");
    for detail in [BANNED, "acme", "project", "\"domain\"", "entries"] {
        assert!(!body.contains(detail), "{detail} on /status: {body}");
    }
    assert_eq!(open["snapshot"]["proxies"], 4, "{open}");

    // A reload sets the token: nothing without it, everything with it.
    let token_line = "admin_token = { env = \"GATEWAY_ADMIN_TOKEN\" }";
    scratch.write("proxypool.toml", &serve_config(&sim, ports, token_line));
    serve.signal("HUP");
    eventually(
        "the token guards the admin routes",
        Duration::from_secs(10),
        || get(&admin_metrics, None).0 == 401,
    );
    assert_eq!(get(&admin_status, None).0, 401);
    assert_eq!(get(&format!("http://{admin}/healthz"), None).0, 200);
    let (status, text) = get(&admin_metrics, Some(ADMIN_TOKEN));
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("proxypool_usage_requests_total{client=\"acme\",upstream=\"sim\"}"),
        "{text}"
    );
    let (status, body) = get(&admin_status, Some(ADMIN_TOKEN));
    assert_eq!(status, 200, "{body}");
    let full: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(full["detail"], true, "{full}");
    let entries = full["cooldowns"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !entries.is_empty() && entries.iter().all(|e| e["domain"] == BANNED),
        "{full}"
    );

    let mut serve = serve;
    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
}
