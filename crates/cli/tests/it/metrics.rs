//! Metrics end to end on the built binary: in one process every `/metrics` endpoint
//! renders the one registry (the client API's, the gateway's and the controller's
//! families on each), and a running `dev` exports every controller family with values
//! that match what it is doing.

use crate::common::exposition::{families, samples, scrape, total};
use crate::common::{
    Proc, Scratch, allow_sim_origin, curl_or_skip, eventually, free_port, gateway_proxies,
    sim_upstream, sim_vendor, start_dev,
};
use proxypool_controller::metrics::FAMILIES;
use std::time::Duration;

#[test]
fn serve_renders_every_roles_families_on_both_metrics_endpoints() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(4);
    let scratch = Scratch::new("serve-metrics");
    let (api, http, admin) = (free_port(), free_port(), free_port());
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[quota]
url = "sqlite://data/quota.sqlite3"

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

[ownership]
per_worker_target = 2
interval = "200ms"

[checker]
interval = "200ms"

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}

[gateway]
worker_id = "box-1"
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
{destinations}
"#,
            sim_upstream = sim_upstream(&sim),
            destinations = allow_sim_origin(&sim),
        ),
    );
    let env = [
        ("ACME_TOKEN", "acme-api-token-0001"),
        ("ACME_PASSWORD", "acme-gateway-password"),
    ];
    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the in-process gateway holds proxies",
        Duration::from_secs(30),
        || gateway_proxies(&admin) == 2,
    );
    let api_metrics = format!("http://127.0.0.1:{api}/metrics");
    let admin_metrics = format!("http://{admin}/metrics");
    // One request through the API first, so its request counter has a series.
    assert!(scrape(&format!("http://127.0.0.1:{api}/healthz")).is_some());

    let mut seen = Vec::new();
    for url in [&api_metrics, &admin_metrics] {
        let text = scrape(url).unwrap_or_else(|| panic!("{url} answers"));
        for family in [
            // the recorder's own
            "proxypool_build_info",
            // the client API's
            "proxypool_api_requests_total",
            // the gateway's (registered when it starts)
            "proxypool_gateway_connections_total",
            "proxypool_gateway_refusals_total",
            // the controller's
            "proxypool_pool_proxies",
            "proxypool_controller_leader",
            "proxypool_controller_fetches_total",
            // the process's
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
        ] {
            assert!(
                families(&text).contains(family),
                "{url}: no {family} in\n{text}"
            );
        }
        assert!(
            total(
                &text,
                "proxypool_api_requests_total",
                &["route=\"/healthz\""]
            ) >= 1.0,
            "{url}: the API request is counted\n{text}"
        );
        assert_eq!(
            total(&text, "proxypool_controller_leader", &[]),
            1.0,
            "{url}\n{text}"
        );
        assert!(!text.contains("another metrics recorder"), "{url}: {text}");
        seen.push(families(&text));
    }
    assert_eq!(seen[0], seen[1], "both endpoints render one registry");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
}

/// No rotation: the pool keeps exactly the 16 simulated proxies.
const STILL: [&str; 2] = ["--proxy-ttl", "0"];

#[test]
fn dev_exports_every_controller_family_with_values_that_match_the_pool() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("dev-metrics");
    let (mut dev, banner) = start_dev("dev", &scratch, &STILL);
    let url = format!("{}/metrics", banner.api());
    let mut text = String::new();
    // The gauges are read every 2 s and the loops need a round or two: poll for the
    // state a settled `dev` reaches, then check each family with its own message.
    eventually("dev's metrics settle", Duration::from_secs(60), || {
        text = scrape(&url).unwrap_or_default();
        total(&text, "proxypool_pool_proxies", &["upstream=\"sim\""]) == 16.0
            && total(&text, "proxypool_pool_proxies", &["state=\"available\""]) > 0.0
            && total(&text, "proxypool_controller_worker_leases", &[]) > 0.0
            && total(&text, "proxypool_controller_worker_sessions", &[]) >= 1.0
    });
    let declared = families(&text);
    for family in FAMILIES {
        assert!(declared.contains(family), "no {family} in\n{text}");
    }
    // The quota's decisions and settlements are the client API's to count.
    for family in [
        "proxypool_quota_decisions_total",
        "proxypool_api_quota_settlements_total",
    ] {
        assert!(declared.contains(family), "no {family} in\n{text}");
    }
    let value = |name: &str, with: &[&str]| total(&text, name, with);

    // Proxies by state: one series per state, summing to the pool.
    assert_eq!(
        samples(&text, "proxypool_pool_proxies").len(),
        8,
        "every state has a series\n{text}"
    );
    assert_eq!(value("proxypool_pool_proxies", &[]), 16.0, "{text}");
    // Provider rounds.
    let fetched = &["upstream=\"sim\"", "outcome=\"success\""];
    assert!(
        value("proxypool_controller_fetches_total", fetched) >= 1.0,
        "{text}"
    );
    assert!(
        value(
            "proxypool_controller_fetch_duration_seconds_count",
            &["upstream=\"sim\""]
        ) >= 1.0,
        "{text}"
    );
    assert!(
        value(
            "proxypool_controller_entries_accepted_total",
            &["upstream=\"sim\""]
        ) >= 16.0,
        "{text}"
    );
    assert_eq!(
        value(
            "proxypool_controller_entries_refused_total",
            &["reason=\"over_max_size\""]
        ),
        0.0,
        "{text}"
    );
    // Health checks.
    let checked = &["upstream=\"sim\"", "outcome=\"success\""];
    assert!(
        value("proxypool_controller_health_checks_total", checked) >= 1.0,
        "{text}"
    );
    assert!(
        value(
            "proxypool_controller_health_check_duration_seconds_count",
            &["upstream=\"sim\""]
        ) >= 1.0,
        "{text}"
    );
    // Workers: the in-process gateway has a session, leases, and a fresh snapshot.
    assert_eq!(
        value("proxypool_controller_worker_sessions", &[]),
        1.0,
        "{text}"
    );
    let ages = samples(&text, "proxypool_controller_worker_snapshot_age_seconds");
    assert_eq!(ages.len(), 1, "{text}");
    assert!((0.0..60.0).contains(&ages[0].1), "{ages:?}");
    // Leadership: the memory store's one controller leads in term 1.
    assert_eq!(value("proxypool_controller_leader", &[]), 1.0, "{text}");
    assert_eq!(
        value("proxypool_controller_leader_term", &[]),
        1.0,
        "{text}"
    );
    // Maintenance ran at least once (its first round comes with the term).
    assert!(
        value(
            "proxypool_controller_sweeps_total",
            &["outcome=\"success\""]
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        samples(&text, "proxypool_controller_sweep_removed_total").len(),
        4,
        "one series per kind\n{text}"
    );
    // Store calls as the controller makes them.
    for call in [
        "upsert",
        "due_for_check",
        "apply_health",
        "live_sessions",
        "inventory",
    ] {
        assert!(
            value(
                "proxypool_controller_store_duration_seconds_count",
                &[&format!("call=\"{call}\"")]
            ) >= 1.0,
            "{call}\n{text}"
        );
    }

    dev.signal("TERM");
    assert_eq!(dev.wait(Duration::from_secs(30)).code(), Some(0));
}
