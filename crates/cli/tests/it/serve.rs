//! End to end on `proxypool serve --config FILE`: controller, client API and gateway in
//! one process from a config file, against a simulated vendor.

use crate::common::{
    Proc, Scratch, allow_sim_origin, api, curl, curl_or_skip, eventually, free_port,
    gateway_proxies, sim_upstream, sim_vendor, try_exit_via,
};
use std::collections::BTreeSet;
use std::time::Duration;

#[test]
fn serve_from_a_config_file_proxies_extracts_and_stops_on_sigterm() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(6);
    let scratch = Scratch::new("serve");
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
per_worker_target = 3
interval = "200ms"

[checker]
interval = "200ms"

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}

[[clients]]
id = "narrow"
project = "acme"
gateway_password = {{ env = "ACME_PASSWORD" }}
allowed_ports = [443]

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
    let proxy = format!("http://acme:acme-gateway-password@127.0.0.1:{http}");
    let origin = sim.origin().url("/");
    let ready = eventually(
        "serve answers through its gateway",
        Duration::from_secs(30),
        || try_exit_via(&proxy, &origin).is_some(),
    );
    eprintln!("serve ready after {ready:?}");
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the gateway holds its share",
        Duration::from_secs(15),
        || gateway_proxies(&admin) == 3,
    );
    let exits: BTreeSet<String> = (0..9)
        .filter_map(|_| try_exit_via(&proxy, &origin))
        .collect();
    assert_eq!(
        exits.len(),
        3,
        "round robin over the 3 leased proxies: {exits:?}"
    );

    // The destination policy: internal targets are refused before any dial, and a
    // client's port override (sent by the controller in the snapshot) replaces the list.
    let refused = |user: &str, target: &str, tunnel: bool| {
        let proxy = format!("http://{user}:acme-gateway-password@127.0.0.1:{http}");
        // Through a tunnel, the CONNECT answer's status is `http_connect`.
        let code = if tunnel {
            "%{http_connect}"
        } else {
            "%{http_code}"
        };
        let mut args = vec!["-s", "-o", "/dev/null", "-w", code, "-x", &proxy];
        if tunnel {
            args.push("-p");
        }
        args.push(target);
        curl(&args).1
    };
    for target in [
        "http://127.0.0.1:6379/",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        assert_eq!(refused("acme", target, false), "403", "{target}");
        assert_eq!(refused("acme", target, true), "403", "CONNECT {target}");
    }
    assert_eq!(
        refused("narrow", &origin, false),
        "403",
        "narrow: port 443 only"
    );
    assert_eq!(
        refused("acme", &origin, false),
        "200",
        "acme: the gateway's ports"
    );
    let (_, headers) = curl(&[
        "-s",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-x",
        &proxy,
        "http://127.0.0.1:6379/",
    ]);
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("x-proxypool-error: destination_denied"),
        "{headers}"
    );

    let api_url = format!("http://127.0.0.1:{api}");
    let (code, stdout, stderr) = api::run_retrying(
        &[
            "extract",
            "--api",
            &api_url,
            "--count",
            "3",
            "--mode",
            "all-or-nothing",
        ],
        &[("PROXYPOOL_TOKEN", "acme-api-token-0001")],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("3 of 3"), "{stdout}");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
    assert!(scratch.file("data/quota.sqlite3").exists());
    let logs = serve.stderr_tail();
    assert!(logs.contains("proxypool serve stopped"), "{logs}");
    assert!(!logs.contains("acme-gateway-password") && !logs.contains("acme-api-token-0001"));
}
