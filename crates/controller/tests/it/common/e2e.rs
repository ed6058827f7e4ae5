//! The issue's "done means" scenario, shared by the memory and the Redis end-to-end tests:
//! a controller started from a config file fetches from a local vendor endpoint
//! (`proxypool-sim`), checks the proxies through real connections, assigns them to a
//! registered worker and serves that worker a snapshot, which then works (a request
//! through a listed proxy reaches the origin).

use super::ControlClient;
use hyper::StatusCode;
use proxypool_controller::RunningController;
use proxypool_controller::config::Env;
use proxypool_sim::{ListFormat, ProxyKind, SimConfig, SimVendor};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The config the tests run (also quoted in the issue note); `STORE_SECTION` is the
/// `[store]` table of the store under test.
pub const CONFIG: &str = r#"
STORE_SECTION

[listen]
control = "127.0.0.1:0"

[snapshot]
long_poll_wait = "2s"
session_ttl = "10s"
report_interval = "1s"
poll_interval = "100ms"

[ownership]
lease = "10s"
renew_before = "4s"
interval = "100ms"

[checker]
concurrency = 8
timeout = "2s"
interval = "100ms"

[[worker_tokens]]
name = "gateways"
token = { env = "E2E_WORKER_TOKEN" }

[[upstreams]]
id = "sim"
ttl = "5m"
safety_margin = "5s"
max_size = 100
max_sessions = 8

[upstreams.provider]
kind = "http"
# the simulated vendor: plain HTTP on loopback, listing loopback proxies
allow_plaintext = true
allow_private_hosts = true
url = "VENDOR_URL"
format = "json"
interval = "1s"
timeout = "2s"

[upstreams.health]
interval = "30s"

[[upstreams.health.targets]]
url = "ORIGIN_URL"
expect_status = 200

[[clients]]
id = "scraper"
project = "acme"
gateway_password = { env = "E2E_GATEWAY_PASSWORD" }
"#;

/// Four proxies, HTTP and SOCKS5 with credentials, a JSON list, exits from `first_exit`.
pub async fn start_vendor(first_exit: Ipv4Addr) -> SimVendor {
    SimVendor::start(SimConfig {
        proxies: 4,
        kinds: vec![ProxyKind::Http, ProxyKind::Socks5],
        format: ListFormat::Json,
        first_exit,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

/// Writes [`CONFIG`] with `store_section` (and `files`, e.g. a password file, relative to
/// the config) into a fresh directory; returns the config's path.
pub fn write_config(store_section: &str, vendor: &SimVendor, files: &[(&str, &str)]) -> PathBuf {
    // One directory per call: tests run in parallel.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("proxypool-e2e-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let path = dir.join("proxypool.toml");
    let text = CONFIG
        .replace("STORE_SECTION", store_section)
        .replace("VENDOR_URL", &vendor.list_url())
        .replace("ORIGIN_URL", &vendor.origin().url("/health"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The variables [`CONFIG`]'s secret references name.
pub fn env() -> Env {
    Env::from_pairs([
        ("E2E_WORKER_TOKEN", "e2e-worker-token"),
        ("E2E_GATEWAY_PASSWORD", "e2e-gateway-password"),
    ])
}

/// Registers a worker on `running` and checks the whole path: every vendor proxy is
/// fetched, checked through its exit, assigned and listed in the worker's snapshot, and a
/// listed proxy carries a request to the origin.
pub async fn serves_a_worker_checked_proxies(running: &RunningController, vendor: &SimVendor) {
    let client = ControlClient::new(running.control_addr(), Some("e2e-worker-token"));

    let grant = client.register("gw-1", "session-1").await;
    assert_eq!(grant.status, StatusCode::OK);

    // Long-poll until the snapshot lists every vendor proxy (fetched, checked, assigned).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut after = 0;
    let snapshot = loop {
        assert!(
            Instant::now() < deadline,
            "the worker never got all proxies"
        );
        let reply = client.snapshot("gw-1", "session-1", after, 1_000).await;
        if reply.status == StatusCode::NO_CONTENT {
            continue;
        }
        assert_eq!(reply.status, StatusCode::OK);
        let snapshot = reply.json();
        after = snapshot["reference"]["version"].as_u64().unwrap();
        let ack = client
            .ack("gw-1", "session-1", &snapshot["reference"])
            .await;
        assert_eq!(ack.status, StatusCode::NO_CONTENT);
        if snapshot["proxies"].as_array().unwrap().len() == 4 {
            break snapshot;
        }
    };

    // Every listed proxy is one of the vendor's, with the credentials needed to dial it.
    let vendor_ports: Vec<u16> = vendor.proxies().iter().map(|p| p.addr().port()).collect();
    for proxy in snapshot["proxies"].as_array().unwrap() {
        let port = proxy["port"].as_u64().unwrap() as u16;
        assert!(vendor_ports.contains(&port));
        assert_eq!(proxy["credentials"]["username"], "sim-user");
        assert_eq!(proxy["credentials"]["password"], "sim-pass");
        assert_eq!(proxy["max_sessions"], 8);
        assert!(
            proxy["lease_until_ms"].as_u64().unwrap() <= proxy["usable_until_ms"].as_u64().unwrap()
        );
    }
    // Checks went through the proxies to the origin, from their own exits.
    assert!(
        vendor.origin().requests_by_exit().len() >= 4,
        "{:?}",
        vendor.origin().requests_by_exit()
    );
    // The gateway client is in the snapshot with a hash of its password, never the password.
    let clients = snapshot["clients"].as_array().unwrap();
    assert_eq!(clients[0]["id"], "scraper");
    let hash: proxypool_core::SecretHash =
        serde_json::from_value(clients[0]["password_hash"].clone()).unwrap();
    assert!(hash.verify("e2e-gateway-password"));
    assert!(!snapshot.to_string().contains("e2e-gateway-password"));

    // The snapshot is usable: dial a listed HTTP proxy to the origin.
    let http = snapshot["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["protocol"] == "http")
        .unwrap();
    let addr: std::net::SocketAddr = format!("{}:{}", http["host"].as_str().unwrap(), http["port"])
        .parse()
        .unwrap();
    let fetched = proxypool_sim::client::get_via_http_proxy(
        addr,
        Some(("sim-user", "sim-pass")),
        vendor.origin().addr(),
        "/through-snapshot",
    )
    .await
    .unwrap();
    let echo = fetched
        .echo()
        .expect("the origin answered through the proxy");
    assert_eq!(echo.path, "/through-snapshot");

    // Reports keep the session; a clean shutdown stops everything.
    let report = client
        .report("gw-1", "session-1", 1, &snapshot["reference"], &[])
        .await;
    assert_eq!(report.status, StatusCode::OK);
    let status = running.controller().status_board().all();
    assert_eq!(status[0].last_error, None);
    assert!(status[0].last_inserted + status[0].last_refreshed >= 4);
}
