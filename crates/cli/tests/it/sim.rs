//! `proxypool sim` as a person uses it: it prints its list URL, proxies and origin; the
//! list serves exactly the printed proxies; a printed proxy carries a request to the origin
//! from its printed exit; the printed `[[upstreams]]` entry is a valid configuration; a
//! signal stops it cleanly.

use crate::common::sim::{banner_field, start_sim};
use crate::common::{Proc, Scratch, curl, curl_or_skip, exit_of, run};
use serde_json::Value;
use std::time::Duration;

#[test]
fn sim_prints_what_it_serves_and_stops_on_a_signal() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("sim");
    let mut sim = start_sim(&scratch, 4);
    let lines = sim.stdout.clone();
    let list_url = banner_field(&lines, "vendor list");
    let origin = banner_field(&lines, "origin");
    assert_eq!(banner_field(&lines, "proxies"), "4");

    // The printed proxies: "kind addr  exit ip  user:pass".
    let printed: Vec<Vec<&str>> = lines
        .iter()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|words| words.len() == 5 && (words[0] == "http" || words[0] == "socks5"))
        .collect();
    assert_eq!(printed.len(), 4, "{lines:#?}");

    // The list serves exactly those addresses.
    let (code, body) = curl(&[list_url]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&body).unwrap();
    let text = listed.to_string();
    for proxy in &printed {
        let port = proxy[1].rsplit(':').next().unwrap();
        assert!(text.contains(port), "{} not listed in {text}", proxy[1]);
    }

    // The vendor API and the Basic text list answer as printed, and refuse without their
    // credentials.
    let api = banner_field(&lines, "vendor API");
    let (code, out) = curl(&["-s", "-o", "/dev/null", "-w", "%{http_code}", api]);
    assert_eq!((code, out.as_str()), (0, "401"));
    let (code, body) = curl(&[
        "-s",
        "--compressed",
        "-H",
        "Authorization: Token sim-api-token",
        api,
    ]);
    assert_eq!(code, 0);
    assert!(serde_json::from_str::<Value>(&body).is_ok(), "{body}");
    let basic = banner_field(&lines, "basic list");
    let (code, body) = curl(&["-s", "-u", "list-user:list-pass", basic]);
    assert_eq!(code, 0);
    assert!(body.lines().count() >= 1, "{body}");

    // An HTTP proxy as printed carries a request to the origin from its printed exit.
    let http = printed.iter().find(|p| p[0] == "http").unwrap();
    let via = format!("http://{}@{}", http[4], http[1]);
    let (code, body) = curl(&["-x", &via, origin]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(exit_of(&body), http[3]);

    // The HTTPS proxy as printed: reached over TLS with the printed CA, not without it.
    let https_line = lines
        .iter()
        .find(|line| line.trim_start().starts_with("https proxy"))
        .unwrap_or_else(|| panic!("no https proxy in {lines:#?}"));
    let https_addr = banner_field(&lines, "https proxy");
    let ca = https_line
        .rsplit("CA ")
        .next()
        .unwrap()
        .trim_end_matches(')');
    let via = format!("https://sim-user:sim-pass@{https_addr}");
    let (code, body) = curl(&["-s", "--proxy-cacert", ca, "-x", &via, origin]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(exit_of(&body), "127.254.1.1");
    let (code, _) = curl(&["-s", "-x", &via, origin]);
    assert_ne!(
        code, 0,
        "without the printed CA the proxy's certificate is refused"
    );

    // The printed upstream entry is a configuration `check-config` accepts.
    let start = lines.iter().position(|l| l == "[[upstreams]]").unwrap();
    let entry = lines[start..]
        .iter()
        .take_while(|l| !l.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    let file = scratch.write("controller.toml", &format!("{entry}\n"));
    let (code, stdout, stderr) = run(&["check-config", file.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");

    sim.signal("TERM");
    assert_eq!(sim.wait(Duration::from_secs(10)).code(), Some(0));
}

/// The `[[upstreams]]` entry starting at the `n`th such line of the banner (0-based).
fn printed_entry(lines: &[String], n: usize) -> String {
    let start = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| *line == "[[upstreams]]")
        .nth(n)
        .map(|(at, _)| at)
        .unwrap_or_else(|| panic!("no upstream entry {n} in {lines:#?}"));
    lines[start..]
        .iter()
        .take_while(|l| !l.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The backconnect entry `sim` prints, used as printed by `serve`: its sessions are
/// proxies of their own, extracted by region, each keeping its exit at the simulated
/// gateway, and the gateway's sticky sessions ride on the one it leases.
#[test]
fn the_printed_backconnect_entry_serves_sessions_as_proxies() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("sim-bc");
    let mut sim = start_sim(&scratch, 2);
    let lines = sim.stdout.clone();
    let origin = banner_field(&lines, "origin").to_owned();
    let backconnect = banner_field(&lines, "backconnect").to_owned();
    let entry = printed_entry(&lines, 1);
    assert!(entry.contains("kind = \"backconnect\""), "{entry}");
    let origin_port = origin.rsplit(':').next().unwrap().trim_end_matches('/');
    let (api, http, admin) = (
        crate::common::free_port(),
        crate::common::free_port(),
        crate::common::free_port(),
    );
    let config = scratch.write(
        "serve.toml",
        &format!(
            r#"
[quota]
url = "sqlite://data/quota.sqlite3"
[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"
[ownership]
per_worker_target = 1
interval = "200ms"
[checker]
interval = "200ms"

{entry}

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
[gateway.destinations]
allow_cidrs = ["127.0.0.1/32"]
ports = [{origin_port}]
"#
        ),
    );
    let env = [
        ("ACME_TOKEN", "acme-api-token-0001"),
        ("ACME_PASSWORD", "acme-gateway-password"),
        ("SIM_BC_PASSWORD", "sim-bc-pass"),
    ];
    let (code, stdout, stderr) = run(&["check-config", config.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let mut serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &env,
        &scratch.path,
    );

    // A us and a de session, each handed out: proxies on the gateway's address under their
    // own usernames. (The gateway leases one of the four sessions, so each country has
    // one that no one holds.)
    let extract = |region: &str| {
        let body = format!(r#"{{"count":1,"filters":{{"region":"{region}"}}}}"#);
        let answer = curl(&[
            "-s",
            "-H",
            "Authorization: Bearer acme-api-token-0001",
            "-H",
            "Content-Type: application/json",
            "-d",
            &body,
            &format!("http://127.0.0.1:{api}/v1/extractions"),
        ])
        .1;
        serde_json::from_str::<Value>(&answer).unwrap_or(Value::Null)
    };
    let mut proxies = Vec::new();
    for region in ["us", "de"] {
        let mut extracted = Value::Null;
        crate::common::eventually(
            "a session of each country can be extracted",
            Duration::from_secs(30),
            || {
                extracted = extract(region);
                extracted["returned"] == 1
            },
        );
        proxies.push(extracted["proxies"][0].clone());
    }
    let mut exits = std::collections::BTreeSet::new();
    for proxy in &proxies {
        assert_eq!(
            format!("{}:{}", proxy["host"].as_str().unwrap(), proxy["port"]),
            backconnect
        );
        let user = proxy["username"].as_str().unwrap();
        let region = proxy["region"].as_str().unwrap();
        assert!(
            user.starts_with(&format!("sim-bc-country-{region}-session-")),
            "{user}"
        );
        let via = format!(
            "http://{user}:{}@{backconnect}",
            proxy["password"].as_str().unwrap()
        );
        let first = exit_of(&curl(&["-s", "-x", &via, &origin]).1);
        let second = exit_of(&curl(&["-s", "-x", &via, &origin]).1);
        assert!(first.starts_with("127.254.0."), "{first}");
        assert_eq!(first, second, "a session keeps its exit: {user}");
        exits.insert(first);
    }
    assert_eq!(exits.len(), 2, "two sessions, two exits: {exits:?}");

    // Through proxypool's own gateway, a sticky session rides on one session proxy.
    let sticky = format!("http://acme-session-s1:acme-gateway-password@127.0.0.1:{http}");
    let mut first = None;
    crate::common::eventually(
        "the gateway routes through a session",
        Duration::from_secs(30),
        || {
            first = crate::common::try_exit_via(&sticky, &origin);
            first.is_some()
        },
    );
    for _ in 0..3 {
        assert_eq!(crate::common::try_exit_via(&sticky, &origin), first);
    }
    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(15)).code(), Some(0));
    sim.signal("TERM");
    assert_eq!(sim.wait(Duration::from_secs(10)).code(), Some(0));
}
