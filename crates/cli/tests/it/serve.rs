//! End to end on `proxypool serve --config FILE`: controller, client API and gateway in
//! one process from a config file, against a simulated vendor; and how that gateway and
//! extraction share the pool (by default half stays unowned; a file that gives the gateway
//! everything is warned about and shown on `/readyz`).

use crate::common::{
    Proc, Scratch, allow_sim_origin, api, curl, curl_or_skip, eventually, eventually_some,
    free_port, gateway_proxies, sim_upstream, sim_vendor, try_exit_via,
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

/// A `serve` file with `sim`'s list as its one upstream, a client `acme` that extracts
/// (token `acme-api-token-0001`) and uses the gateway, and `ownership` as the only
/// `[ownership]` keys besides a short interval. Returns the file and the API, gateway and
/// admin ports.
fn shared_pool_config(
    scratch: &Scratch,
    sim: &proxypool_sim::SimVendor,
    ownership: &str,
) -> (std::path::PathBuf, u16, u16, u16) {
    let (api, http, admin) = (free_port(), free_port(), free_port());
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

[ownership]
interval = "200ms"
{ownership}

[checker]
interval = "200ms"

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}

[gateway]
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
{destinations}
"#,
            sim_upstream = sim_upstream(sim),
            destinations = allow_sim_origin(sim),
        ),
    );
    (config, api, http, admin)
}

const SHARED_ENV: [(&str, &str); 2] = [
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
];

/// How many of upstream `sim`'s proxies passed their checks, as the API's inventory says.
fn available(api: u16) -> u64 {
    let answer = api::call(
        "GET",
        &format!("http://127.0.0.1:{api}/v1/upstreams/sim/inventory"),
        Some("acme-api-token-0001"),
        None,
    );
    answer.json()["by_status"]["AVAILABLE"]
        .as_u64()
        .unwrap_or(0)
}

/// `/readyz` of the API on `api`, once it answers 200.
fn ready(api: u16) -> serde_json::Value {
    let answer = api::call("GET", &format!("http://127.0.0.1:{api}/readyz"), None, None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()
}

/// A fresh `serve` whose file says nothing of the split keeps half of the pool for
/// extraction: once the list is checked, extraction gets the other half at once while the
/// gateway routes over its own, and `/readyz` shows the split.
#[test]
fn a_fresh_serve_keeps_half_of_the_pool_for_extraction_while_its_gateway_serves() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(6);
    let scratch = Scratch::new("serve-share");
    let (config, api, http, admin) = shared_pool_config(&scratch, &sim, "");
    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &SHARED_ENV,
        &scratch.path,
    );
    let proxy = format!("http://acme:acme-gateway-password@127.0.0.1:{http}");
    let origin = sim.origin().url("/");
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the whole list is checked and the gateway serves over its half",
        Duration::from_secs(30),
        || {
            available(api) == 6
                && gateway_proxies(&admin) >= 3
                && try_exit_via(&proxy, &origin).is_some()
        },
    );

    let (code, stdout, stderr) = api::run_retrying(
        &[
            "extract",
            "--api",
            &format!("http://127.0.0.1:{api}"),
            "--count",
            "3",
            "--mode",
            "all-or-nothing",
        ],
        &[("PROXYPOOL_TOKEN", "acme-api-token-0001")],
    );
    assert_eq!(
        code, 0,
        "extraction found the unowned half: {stdout}{stderr}"
    );
    assert!(stdout.contains("3 of 3"), "{stdout}");
    assert_eq!(gateway_proxies(&admin), 3, "the gateway kept its half");
    assert!(
        try_exit_via(&proxy, &origin).is_some(),
        "the gateway still serves"
    );

    // The split as the ownership manager saw it: extraction took its share, so now the
    // gateway holds every usable proxy, which readiness reports without failing.
    let detail = eventually_some(
        "readyz shows the split after the extraction",
        Duration::from_secs(15),
        || {
            let extraction = ready(api)["extraction"].clone();
            (extraction["unowned"] == 0).then_some(extraction)
        },
    );
    assert_eq!(detail["share"], 0.5, "{detail}");
    assert_eq!(detail["leased_to_gateways"], 3, "{detail}");
    assert!(detail["gateways_hold_all_since_ms"].is_u64(), "{detail}");
    let warning = detail["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("taken its share"), "{detail}");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
}

/// A `serve` file that gives the gateway everything: `check-config` warns before it runs,
/// `serve` says so at start, and `/readyz` says since when the gateway has held every
/// usable proxy (still ready: the process serves, it is the inventory that is all leased).
#[test]
fn a_serve_that_leases_everything_is_warned_about_and_readyz_says_so() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(4);
    let scratch = Scratch::new("serve-no-share");
    let (config, api, _http, admin) = shared_pool_config(&scratch, &sim, "extraction_share = 0");
    let path = config.to_str().unwrap();
    let (code, stdout, stderr) = crate::common::run(&["check-config", path], &SHARED_ENV);
    assert_eq!(code, 0, "a warning is not an error: {stderr}");
    assert!(stdout.contains("no share kept for extraction"), "{stdout}");
    assert!(
        stderr.contains("warning: [ownership] extraction_share = 0 leaves extraction nothing"),
        "{stderr}"
    );

    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", path],
        &SHARED_ENV,
        &scratch.path,
    );
    let admin = format!("127.0.0.1:{admin}");
    eventually(
        "the gateway leases the whole checked list",
        Duration::from_secs(30),
        || available(api) == 4 && gateway_proxies(&admin) == 4,
    );
    let detail = eventually_some(
        "readyz says the gateway holds every usable proxy",
        Duration::from_secs(15),
        || {
            let extraction = ready(api)["extraction"].clone();
            (extraction["leased_to_gateways"] == 4).then_some(extraction)
        },
    );
    assert_eq!(detail["unowned"], 0, "{detail}");
    assert_eq!(detail["share"], 0.0, "{detail}");
    assert!(detail["gateways_hold_all_since_ms"].is_u64(), "{detail}");
    let warning = detail["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("extraction_share"), "{detail}");
    let ready = ready(api);
    assert_eq!(ready["status"], "ready", "{ready}");

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));
    let logs = serve.stderr_tail();
    assert!(logs.contains("leaves extraction nothing"), "{logs}");
    assert!(logs.contains("gateways hold every usable proxy"), "{logs}");
}
