//! End to end in split mode: one `proxypool controller` and two `proxypool gateway`
//! processes on a private Redis (activity pool, leader lease) and a private PostgreSQL
//! (quota, migrated by `proxypool migrate` with a least-privilege role), against a
//! simulated vendor. A gateway killed with SIGKILL says goodbye to nobody; once its
//! lease lapses, its proxies go to the surviving gateway.
//!
//! Run twice: with TLS on every link (client API and control API over https with
//! gateway client certificates, Redis over TLS, PostgreSQL with `sslmode=verify-full`, the
//! vendor list over https; certificates from a test CA), and in plain text.

use crate::common::split::{
    Tls, controller_config, gateway_config, migrate_quota, sim_upstream_tls,
};
use crate::common::{
    Proc, Scratch, curl, curl_or_skip, eventually, exit_of, free_port, gateway_proxies, run,
    sim_upstream, sim_vendor, try_exit_via,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

const PROXIES: usize = 10;
const EXTRACTED: usize = 2;

/// The exits seen through `proxy` over `n` requests.
fn exits(proxy: &str, origin: &str, n: usize) -> BTreeSet<String> {
    (0..n).filter_map(|_| try_exit_via(proxy, origin)).collect()
}

#[test]
fn over_tls_one_controller_two_gateways_and_a_killed_gateway_s_proxies_move_to_the_other() {
    split(true);
}

#[test]
fn in_plain_text_one_controller_two_gateways_and_a_killed_gateway_s_proxies_move_to_the_other() {
    split(false);
}

fn split(with_tls: bool) {
    if !curl_or_skip() {
        return;
    }
    let tls = with_tls.then(|| Tls {
        ca: proxypool_testkit::TestCa::new("split test ca").unwrap(),
    });
    let redis = match &tls {
        Some(tls) => proxypool_testkit::private_redis_tls_or_skip(&tls.ca),
        None => proxypool_testkit::private_redis_or_skip(),
    };
    let Some(redis) = redis else {
        return;
    };
    let pg = match &tls {
        Some(tls) => proxypool_testkit::private_postgres_tls_or_skip(&tls.ca),
        None => proxypool_testkit::private_postgres_or_skip(),
    };
    let Some(pg) = pg else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let admin_url = match &tls {
        Some(tls) => tls.pg(&admin_url),
        None => admin_url,
    };
    let (runtime, sim) = sim_vendor(PROXIES);
    let upstream = match &tls {
        Some(tls) => {
            let files = tls.ca.server("vendor").unwrap();
            let server = proxypool_edge::ServerTls::load(proxypool_edge::ServerTlsFiles {
                cert: files.cert,
                key: files.key,
                client_ca: None,
            })
            .unwrap();
            let list = runtime
                .block_on(sim.serve_list_tls(server.current()))
                .unwrap();
            assert!(list.starts_with("https://"));
            sim_upstream_tls(&list, &sim, tls)
        }
        None => sim_upstream(&sim),
    };
    let scratch = Scratch::new("split");
    let (control, api) = (free_port(), free_port());
    let config = scratch.write(
        "controller.toml",
        &controller_config(
            &redis,
            pg.port(),
            control,
            api,
            PROXIES,
            &upstream,
            tls.as_ref(),
        ),
    );
    let config = config.to_str().unwrap();
    let env = [
        ("WORKER_TOKEN_A", "split-worker-token-a"),
        ("WORKER_TOKEN_B", "split-worker-token-b"),
        ("ACME_TOKEN", "acme-api-token-0001"),
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("QUOTA_PASSWORD", "quota-role-password"),
        ("PG_ADMIN_URL", admin_url.as_str()),
    ];

    // The quota tables and the least-privilege role, as an operator would set them up.
    let stdout = migrate_quota(config, &env);
    assert!(stdout.contains("role proxypool_quota"), "{stdout}");

    let mut controller = Proc::start(
        "controller",
        &["controller", "--config", config],
        &env,
        &scratch.path,
    );

    // Before any gateway registers, every proxy is unowned: extract two through the API
    // (PostgreSQL quota, Redis pool). They must never be routed by a gateway later.
    let scheme = if tls.is_some() { "https" } else { "http" };
    let api_url = format!("{scheme}://127.0.0.1:{api}");
    let token = [("PROXYPOOL_TOKEN", "acme-api-token-0001")];
    let count = EXTRACTED.to_string();
    let ca_flag: Vec<String> = match &tls {
        Some(tls) => vec!["--ca".into(), tls.ca()],
        None => Vec::new(),
    };
    let mut extracted = Value::Null;
    eventually(
        "the controller has checked proxies to extract",
        Duration::from_secs(30),
        || {
            let mut args = vec![
                "extract",
                "--api",
                &api_url,
                "--count",
                &count,
                "--mode",
                "all-or-nothing",
                "--json",
            ];
            args.extend(ca_flag.iter().map(String::as_str));
            let (code, stdout, _) = run(&args, &token);
            if code == 0 {
                extracted = serde_json::from_str(&stdout).unwrap();
            }
            code == 0
        },
    );
    let origin = sim.origin().url("/");
    let extracted_exits: BTreeSet<String> = extracted["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let scheme = if p["protocol"] == "socks5" {
                "socks5h"
            } else {
                "http"
            };
            let url = format!(
                "{scheme}://{}:{}@{}:{}",
                p["username"].as_str().unwrap(),
                p["password"].as_str().unwrap(),
                p["host"].as_str().unwrap(),
                p["port"]
            );
            let (code, body) = curl(&["-x", &url, &origin]);
            assert_eq!(code, 0, "{url}");
            exit_of(&body)
        })
        .collect();
    assert_eq!(extracted_exits.len(), EXTRACTED);
    if tls.is_some() {
        // The TLS-only client API refuses plain HTTP readably, and so does the control API.
        for port in [api, control] {
            let (_, body) = curl(&[&format!("http://127.0.0.1:{port}/")]);
            assert!(body.contains("tls_required"), "{port}: {body}");
        }
    }

    // Two gateways, separate processes.
    let ports_a = (free_port(), free_port());
    let ports_b = (free_port(), free_port());
    let file_a = scratch.write(
        "gw-a.toml",
        &gateway_config("gw-a", &[control], ports_a.0, ports_a.1, &sim, tls.as_ref()),
    );
    let file_b = scratch.write(
        "gw-b.toml",
        &gateway_config("gw-b", &[control], ports_b.0, ports_b.1, &sim, tls.as_ref()),
    );
    let mut gateway_a = Proc::start(
        "gw-a",
        &["gateway", "--config", file_a.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let mut gateway_b = Proc::start(
        "gw-b",
        &["gateway", "--config", file_b.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let (admin_a, admin_b) = (
        format!("127.0.0.1:{}", ports_a.1),
        format!("127.0.0.1:{}", ports_b.1),
    );
    let half = ((PROXIES - EXTRACTED) / 2) as u64;
    let balanced = eventually(
        "both gateways hold half of the proxies",
        Duration::from_secs(45),
        || gateway_proxies(&admin_a) == half && gateway_proxies(&admin_b) == half,
    );
    eprintln!("balanced after {balanced:?}");

    // Traffic through both: each leaves through its own proxies only.
    let proxy_a = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_a.0);
    let proxy_b = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_b.0);
    let exits_a = exits(&proxy_a, &origin, 12);
    let exits_b = exits(&proxy_b, &origin, 12);
    assert_eq!(exits_a.len() as u64, half, "{exits_a:?}");
    assert_eq!(exits_b.len() as u64, half, "{exits_b:?}");
    assert!(exits_a.is_disjoint(&exits_b), "{exits_a:?} / {exits_b:?}");
    assert!(exits_a.is_disjoint(&extracted_exits) && exits_b.is_disjoint(&extracted_exits));

    // Gateway B crashes: no clean shutdown, no session end. Its session (3 s) or its
    // leases (6 s) lapse and the surviving gateway gets its proxies.
    gateway_b.signal("KILL");
    gateway_b.wait(Duration::from_secs(10));
    let moved = eventually(
        "gateway A takes over B's proxies",
        Duration::from_secs(45),
        || gateway_proxies(&admin_a) == 2 * half,
    );
    eprintln!("reassigned {moved:?} after the kill (lease 6s, session ttl 3s)");
    // Not at once: nobody told the controller; it waited for the session or the lease.
    assert!(moved >= Duration::from_millis(500), "{moved:?}");
    let after: BTreeSet<String> = exits(&proxy_a, &origin, 24);
    assert!(
        exits_b.is_subset(&after),
        "B's exits {exits_b:?} now through A: {after:?}"
    );
    assert!(after.is_disjoint(&extracted_exits), "{after:?}");

    // Clean stops.
    gateway_a.signal("TERM");
    assert_eq!(
        gateway_a.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        gateway_a.stderr_tail()
    );
    controller.signal("TERM");
    assert_eq!(
        controller.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        controller.stderr_tail()
    );
    let logs = controller.stderr_tail();
    for secret in [
        "split-worker-token-a",
        "split-worker-token-b",
        "acme-api-token-0001",
        "acme-gateway-password",
        "quota-role-password",
    ] {
        assert!(!logs.contains(secret), "{secret} in the controller's log");
    }
    assert!(Path::new(&scratch.path).exists());
    drop(redis);
    drop(pg);
}
