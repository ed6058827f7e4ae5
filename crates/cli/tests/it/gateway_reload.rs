//! Live reload of a split `proxypool gateway`: its own file is edited while it runs and
//! SIGHUP applies it; its controller reloads its own file and the gateway serves the new
//! clients from its next snapshot. A tightened shield applies to the next connection, a key that needs
//! a restart (a listener) is reported and not applied, a broken file is refused whole and
//! shown on `/status`, and the gateway keeps serving throughout.

use crate::common::{
    Proc, Scratch, allow_sim_origin, curl, curl_or_skip, eventually, free_port, sim_upstream,
    sim_vendor, try_exit_via,
};
use serde_json::Value;
use std::time::Duration;

fn controller_config(
    control: u16,
    api: u16,
    sim: &proxypool_sim::SimVendor,
    client: &str,
) -> String {
    format!(
        r#"
[listen]
control = "127.0.0.1:{control}"
api = "127.0.0.1:{api}"

[ownership]
per_worker_target = 3
interval = "200ms"

[checker]
interval = "200ms"

[[worker_tokens]]
name = "gateways"
token = {{ env = "WORKER_TOKEN" }}

{sim_upstream}

[[clients]]
id = "acme"
project = "acme"
gateway_password = {{ env = "ACME_PASSWORD" }}

[[clients]]
id = "{client}"
project = "acme"
gateway_password = {{ env = "OTHER_PASSWORD" }}
"#,
        sim_upstream = sim_upstream(sim),
    )
}

fn gateway_config(
    control: u16,
    http: u16,
    admin: u16,
    shield: &str,
    sim: &proxypool_sim::SimVendor,
) -> String {
    let destinations = allow_sim_origin(sim);
    // The reload's key lists are tenants' detail: /status shows them to the token.
    let admin_token = crate::common::gateway_admin_token_toml();
    format!(
        r#"
[gateway]
worker_id = "gw-reload"
controller_url = "http://127.0.0.1:{control}"
worker_token = {{ env = "WORKER_TOKEN" }}
{admin_token}
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
{destinations}
[gateway.shield]
{shield}
"#
    )
}

fn status(admin: u16) -> Value {
    crate::common::gateway_status(&format!("127.0.0.1:{admin}")).unwrap_or(Value::Null)
}

fn code_via(proxy: &str, origin: &str) -> String {
    let (_, code) = curl(&["-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, origin]);
    code
}

#[test]
fn sighup_applies_a_split_gateway_s_own_settings_and_refuses_a_broken_file() {
    if !curl_or_skip() {
        return;
    }
    let (_runtime, sim) = sim_vendor(3);
    let scratch = Scratch::new("gateway-reload");
    let (control, api, http, admin) = (free_port(), free_port(), free_port(), free_port());
    let controller_file = scratch.write(
        "controller.toml",
        &controller_config(control, api, &sim, "zed"),
    );
    let generous = "requests_per_second = 1000.0\nburst = 2000.0";
    let gateway_file = scratch.write(
        "gateway.toml",
        &gateway_config(control, http, admin, generous, &sim),
    );
    let env = [
        ("WORKER_TOKEN", "reload-worker-token"),
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("OTHER_PASSWORD", "other-gateway-password"),
    ];
    let mut controller = Proc::start(
        "controller",
        &["controller", "--config", controller_file.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let mut gateway = Proc::start(
        "gateway",
        &["gateway", "--config", gateway_file.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let proxy = format!("http://acme:acme-gateway-password@127.0.0.1:{http}");
    let origin = sim.origin().url("/");
    eventually("the gateway serves", Duration::from_secs(30), || {
        try_exit_via(&proxy, &origin).is_some()
    });
    for _ in 0..3 {
        assert_eq!(code_via(&proxy, &origin), "200");
    }

    // The controller's file changes its clients: zed goes, beta comes. The split gateway
    // learns it from its next snapshot.
    let zed = format!("http://zed:other-gateway-password@127.0.0.1:{http}");
    let beta = format!("http://beta:other-gateway-password@127.0.0.1:{http}");
    assert_eq!(code_via(&zed, &origin), "200");
    assert_eq!(code_via(&beta, &origin), "407");
    scratch.write(
        "controller.toml",
        &controller_config(control, api, &sim, "beta"),
    );
    controller.signal("HUP");
    let took = eventually(
        "the split gateway serves the new client",
        Duration::from_secs(2),
        || code_via(&beta, &origin) == "200",
    );
    eprintln!("new client served through the split gateway {took:?} after SIGHUP");
    assert_eq!(code_via(&zed, &origin), "407");

    // A shield of one token per 100 s from each address, and a moved listener.
    let tight = "requests_per_second = 0.01\nburst = 1.0";
    let moved = free_port();
    scratch.write(
        "gateway.toml",
        &gateway_config(control, moved, admin, tight, &sim),
    );
    gateway.signal("HUP");
    eventually("the reload is reported", Duration::from_secs(5), || {
        status(admin)["config_reload"]["result"] == "applied"
    });
    let report = status(admin)["config_reload"].clone();
    assert_eq!(
        report["restart_required"],
        serde_json::json!(["gateway.listeners.http"]),
        "{report}"
    );
    assert!(
        report["live"].to_string().contains("gateway.shield"),
        "{report}"
    );
    // The listener stays where it was; the new shield admits one request, then 429.
    let codes: Vec<String> = (0..3).map(|_| code_via(&proxy, &origin)).collect();
    assert_eq!(codes[0], "200", "{codes:?}");
    assert!(codes[1..].iter().all(|c| c == "429"), "{codes:?}");

    // A broken file is refused whole; the running settings stay.
    scratch.write(
        "gateway.toml",
        &gateway_config(control, http, admin, generous, &sim)
            .replace("[gateway.shield]", "[gateway.shield]\nburts = 3.0"),
    );
    gateway.signal("HUP");
    eventually("the refusal is reported", Duration::from_secs(5), || {
        status(admin)["config_reload"]["result"] == "refused"
    });
    let report = status(admin)["config_reload"].clone();
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("burts") && error.contains("line"),
        "{report}"
    );
    assert_eq!(report["reloads_refused"], 1, "{report}");
    assert_eq!(code_via(&proxy, &origin), "429", "the running shield stays");
    let [flag, header] = crate::common::gateway_admin_header();
    let (_, metrics) = curl(&[&flag, &header, &format!("http://127.0.0.1:{admin}/metrics")]);
    assert!(
        metrics.contains("proxypool_config_reloads_total{result=\"refused\"} 1"),
        "{metrics}"
    );

    gateway.signal("TERM");
    assert_eq!(gateway.wait(Duration::from_secs(30)).code(), Some(0));
    controller.signal("TERM");
    assert_eq!(controller.wait(Duration::from_secs(30)).code(), Some(0));
}
