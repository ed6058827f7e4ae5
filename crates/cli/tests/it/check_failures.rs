//! Why a proxy is unhealthy, end to end on `proxypool serve`: an `https` proxy whose
//! certificate the checker does not trust fails its checks as `proxy_tls`, and that reason
//! shows on `GET /v1/admin/proxies`, in the health-check metric's `reason` label, in one
//! warning on the log (later failures of the same reason are not warned again) and, with a
//! browser, on the dashboard's Proxies page (screenshot under `target/ui-screenshots/`).

use crate::common::exposition::{samples, scrape, total};
use crate::common::{Proc, Scratch, api, curl_or_skip, eventually, free_port, sim_upstream};
use proxypool_sim::{ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use proxypool_testkit::{TestCa, browser_or_skip};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

const TOKEN: &str = "ops-api-token-0001";
/// The https proxy's password: it must never reach the log.
const SECRET: &str = "tls-proxy-secret-0001";

/// An https proxy (the simulated vendor's kind) certified by `ca`, requiring our
/// credentials.
fn untrusted_https_proxy(runtime: &tokio::runtime::Runtime, ca: &TestCa) -> UpstreamProxy {
    let files = ca.server("untrusted-proxy").unwrap();
    let tls = proxypool_edge::ServerTls::load(proxypool_edge::ServerTlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap()
    .current();
    runtime
        .block_on(UpstreamProxy::start(UpstreamProxyConfig {
            kind: ProxyKind::Http,
            exit_ip: Ipv4Addr::new(127, 254, 9, 1),
            credentials: Some(("tls-user".into(), SECRET.into())),
            tls: Some(tls),
            ..UpstreamProxyConfig::default()
        }))
        .unwrap()
}

/// The rows of `GET /v1/admin/proxies` of `upstream`.
fn listed(api_base: &str, upstream: &str) -> Vec<Value> {
    let answer = api::call(
        "GET",
        &format!("{api_base}/v1/admin/proxies?upstream={upstream}"),
        Some(TOKEN),
        None,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["proxies"].as_array().unwrap().clone()
}

#[test]
fn an_untrusted_https_proxy_fails_as_proxy_tls_in_the_listing_the_metric_and_the_log() {
    // Its browser part must not run beside the dashboard's (two browsers and two stacks
    // are too much for a small machine).
    let _one = crate::dashboard::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !curl_or_skip() {
        return;
    }
    let (runtime, sim) = crate::common::sim_vendor(2);
    // The checker trusts the public roots for this upstream: this CA is no one's.
    let ca = TestCa::new("a vendor ca nobody configured").unwrap();
    let https = untrusted_https_proxy(&runtime, &ca);
    let scratch = Scratch::new("check-failures");
    let api_port = free_port();
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[quota]
url = "sqlite://data/quota.sqlite3"

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api_port}"

[checker]
interval = "200ms"

{sim_upstream}

[[upstreams]]
id = "tls_vendor"
ttl = "10m"
max_size = 10
[upstreams.credentials]
username = "tls-user"
password = {{ env = "TLS_PROXY_PASSWORD" }}
[upstreams.provider]
kind = "static"
proxies = ["https://127.0.0.1:{https_port}"]
interval = "2s"
[upstreams.health]
interval = "1s"
[[upstreams.health.targets]]
url = "{target}"

[[clients]]
id = "ops"
project = "ops"
admin = true
api_token = {{ env = "OPS_TOKEN" }}

[gateway]
worker_id = "box-1"
[gateway.listeners]
http = "127.0.0.1:{http_port}"
"#,
            sim_upstream = sim_upstream(&sim),
            https_port = https.addr().port(),
            target = sim.origin().url("/health"),
            http_port = free_port(),
        ),
    );
    let _serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &[("OPS_TOKEN", TOKEN), ("TLS_PROXY_PASSWORD", SECRET)],
        &scratch.path,
    );
    let api_base = format!("http://127.0.0.1:{api_port}");
    let metrics = format!("{api_base}/metrics");
    let checks = "proxypool_controller_health_checks_total";

    // Checked at least twice (a first failure makes it SUSPECT, due again at once).
    let waited = eventually(
        "two failed checks of the https proxy, counted as proxy_tls",
        Duration::from_secs(60),
        || {
            scrape(&metrics).is_some_and(|text| {
                total(
                    &text,
                    checks,
                    &[
                        "upstream=\"tls_vendor\"",
                        "outcome=\"failure\"",
                        "reason=\"proxy_tls\"",
                    ],
                ) >= 2.0
            })
        },
    );
    eprintln!("two failed checks after {waited:?}");

    // The listing says why, for that proxy; the healthy ones say nothing.
    let rows = listed(&api_base, "tls_vendor");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["last_check_error"], "proxy_tls", "{rows:?}");
    assert!(rows[0]["failures"].as_u64().unwrap() >= 1, "{rows:?}");
    eventually(
        "the simulated vendor's proxies checked fine",
        Duration::from_secs(30),
        || {
            let rows = listed(&api_base, "sim");
            !rows.is_empty()
                && rows
                    .iter()
                    .all(|r| r["status"] == "AVAILABLE" && r["last_check_error"].is_null())
        },
    );

    // The metric: successes under reason "none", failures only under their reason.
    let text = scrape(&metrics).unwrap();
    assert!(
        total(
            &text,
            checks,
            &["upstream=\"sim\"", "outcome=\"success\"", "reason=\"none\""]
        ) >= 1.0,
        "{text}"
    );
    for (labels, _) in samples(&text, checks) {
        assert!(labels.contains("reason=\""), "{labels}");
        if labels.contains("upstream=\"tls_vendor\"") {
            assert!(labels.contains("reason=\"proxy_tls\""), "{labels}");
        }
    }
    assert_eq!(
        https.stats().tunnels,
        0,
        "nothing past the failed handshake"
    );

    // One warning, with TLS's reason, for however many failures; never the password.
    let log = std::fs::read_to_string(scratch.path.join("serve.stderr")).unwrap();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("WARN")
                && l.contains("health check failed")
                && l.contains("upstream=tls_vendor")
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    eprintln!("the warning: {}", warnings[0]);
    assert!(warnings[0].contains("reason=proxy_tls"), "{log}");
    assert!(warnings[0].contains("UnknownIssuer"), "{log}");
    assert!(!log.contains(SECRET), "{log}");

    // The dashboard's Proxies page shows it too.
    let Some(mut browser) = browser_or_skip(1400, 700) else {
        return;
    };
    browser.navigate(&format!("{api_base}/ui/")).unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'false'",
            Duration::from_secs(5),
        )
        .unwrap();
    browser
        .eval(&format!(
            "document.getElementById('token').value = '{TOKEN}'; \
             document.getElementById('signin-button').click(); true"
        ))
        .unwrap();
    browser
        .wait_for(
            "document.body.dataset.signedIn === 'true'",
            Duration::from_secs(5),
        )
        .unwrap();
    browser
        .eval("document.querySelector('#tabs [data-tab=proxies]').click(); true")
        .unwrap();
    let id = rows[0]["id"].as_str().unwrap();
    let cell = browser
        .wait_for(
            &format!(
                "(() => {{ const row = document.querySelector('#px-table tr[data-proxy=\"{id}\"]'); \
                 return row && row.dataset.checkError === 'proxy_tls' && \
                 row.lastElementChild.textContent + ' | ' + row.lastElementChild.firstChild.title; }})()"
            ),
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(
        cell,
        "proxy_tls | TLS to the https proxy failed: a certificate its trust does not vouch \
         for, a wrong name, the handshake"
    );
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("ui-screenshots")
        .join("proxies-check-failures.png");
    browser.screenshot(&shot, true).unwrap();
    eprintln!("screenshot: {}", shot.display());
}
