//! End to end on `proxypool dev`: the built binary started as a process, driven with
//! real `curl` and `proxypool extract`, stopped with SIGTERM.

use crate::common::{
    Scratch, api, curl, curl_or_skip, exit_of, exit_via_http, exit_via_socks5, shell, start_dev,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// No rotation: these tests count exits and must not see the vendor replace a proxy.
const STILL: [&str; 2] = ["--proxy-ttl", "0"];

#[test]
fn dev_prints_its_addresses_and_the_printed_commands_work_verbatim() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("banner");
    let started = Instant::now();
    let (mut dev, banner) = start_dev("dev", &scratch, &STILL);
    eprintln!("dev ready after {:?}", started.elapsed());
    for label in [
        "gateway HTTP",
        "gateway HTTPS",
        "gateway TLS cert",
        "gateway SOCKS5",
        "client API",
        "dashboard",
        "origin",
        "proxy username",
        "proxy password",
        "API token",
    ] {
        assert!(!banner.get(label).is_empty(), "{label} is printed");
    }
    assert_eq!(banner.get("proxy username"), "dev");
    assert_eq!(
        banner.get("dashboard"),
        format!("http://{}/ui/", banner.api().trim_start_matches("http://"))
    );
    assert_eq!(banner.commands.len(), 6, "{:?}", banner.commands);

    // The commands, exactly as printed.
    let (code, body) = shell(&banner.commands[0]);
    assert_eq!(code, 0, "{}", banner.commands[0]);
    assert!(exit_of(&body).starts_with("127.0.0."), "{body}");
    let (code, body) = shell(&banner.commands[1]);
    assert_eq!(code, 0, "{}", banner.commands[1]);
    assert!(exit_of(&body).starts_with("127.0.0."), "{body}");
    let (code, body) = shell(&banner.commands[2]);
    assert_eq!(code, 0, "{}", banner.commands[2]);
    let extraction: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(extraction["returned"], 2, "{body}");
    let (code, body) = shell(&banner.commands[3]);
    assert_eq!(code, 0, "{}", banner.commands[3]);
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains(r#""host":"shop-a.test:"#), "{body}");
    // Through the TLS listener, trusting the self-signed certificate dev made.
    assert!(
        banner.commands[4].contains("--proxy https://"),
        "{}",
        banner.commands[4]
    );
    let (code, body) = shell(&banner.commands[4]);
    assert_eq!(code, 0, "{}", banner.commands[4]);
    assert!(exit_of(&body).starts_with("127.0.0."), "{body}");
    // An inspected https request, trusting the inspection CA dev made: the answer inside
    // the tunnel names the proxy that carried it.
    assert!(
        banner.commands[5].contains("-inspect:"),
        "{}",
        banner.commands[5]
    );
    let (code, body) = shell(&banner.commands[5]);
    assert_eq!(code, 0, "{}", banner.commands[5]);
    assert!(
        body.to_ascii_lowercase().contains("x-proxypool-proxy: "),
        "{body}"
    );
    assert!(body.contains(r#""host":"shop-a.test:"#), "{body}");
    // And the CLI line below them.
    let (code, table) = shell(banner.get("extract command"));
    assert_eq!(code, 0, "{}", banner.get("extract command"));
    assert!(table.contains("2 of 2"), "{table}");

    dev.signal("TERM");
    assert_eq!(dev.wait(Duration::from_secs(30)).code(), Some(0));
}

#[test]
fn banned_exits_are_refused_for_their_host_only() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("bans");
    // Two proxies, both banned for shop-a.test (dev leases one of them to its gateway):
    // the first request is refused by the origin, and from then on the gateway's proxy
    // cools down for shop-a.test, which the gateway says itself. shop-b.test is not
    // affected.
    let (_dev, banner) = start_dev(
        "dev",
        &scratch,
        &[
            "--proxy-ttl",
            "0",
            "--proxies",
            "2",
            "--ban-exit",
            "127.0.0.2=shop-a.test:429",
            "--ban-exit",
            "127.0.0.3=Shop-A.test",
        ],
    );
    let port = banner
        .origin()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/');
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    let status_of = |host: &str| {
        let url = format!("http://{host}:{port}/");
        let (code, out) = curl(&["-s", "-i", "-x", &proxy, &url]);
        assert_eq!(code, 0, "curl {url}");
        out
    };
    let first = status_of("shop-a.test");
    assert!(
        first.starts_with("HTTP/1.1 429") || first.starts_with("HTTP/1.1 403"),
        "{first}"
    );
    for _ in 0..3 {
        let refused = status_of("shop-a.test");
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(
            refused
                .to_ascii_lowercase()
                .contains("x-proxypool-error: domain_cooling_down"),
            "{refused}"
        );
        assert!(status_of("shop-b.test").starts_with("HTTP/1.1 200"));
    }
}

#[test]
fn feedback_gives_a_banned_proxy_back_and_replaces_it() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("feedback");
    let (_dev, banner) = start_dev("dev", &scratch, &STILL);
    let post = |path: &str, body: &str| {
        let url = format!("{}{path}", banner.api());
        let answer = api::call("POST", &url, Some(banner.token()), Some(body));
        assert_eq!(answer.status, 200, "POST {path}: {answer:?}");
        answer.json()
    };
    let extraction = post("/v1/extractions", r#"{"count":1}"#);
    let held = extraction["proxies"][0]["id"].as_str().unwrap().to_owned();
    let answer = post(
        "/v1/feedback",
        &format!(
            r#"{{"proxy_id":"{held}","domain":"http://www.shop-a.test/","verdict":"banned","return":true,"replacement":{{}}}}"#
        ),
    );
    assert_eq!(answer["outcome"], "cooling", "{answer}");
    assert_eq!(answer["domain"], "shop-a.test");
    assert_eq!(answer["cooldown"]["strikes"], 1);
    assert_eq!(answer["returned"], true);
    let replacement = answer["replacement"]["proxies"][0]["id"].as_str().unwrap();
    assert_ne!(replacement, held, "{answer}");
}

#[test]
fn curl_through_http_and_socks5_reaches_the_origin_via_several_exits() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("rotation");
    let (_dev, banner) = start_dev("dev", &scratch, &STILL);
    let mut http = BTreeSet::new();
    let mut socks5 = BTreeSet::new();
    for _ in 0..12 {
        http.insert(exit_via_http(&banner, "dev"));
        socks5.insert(exit_via_socks5(&banner, "dev"));
    }
    assert!(http.len() >= 3, "HTTP exits: {http:?}");
    assert!(socks5.len() >= 3, "SOCKS5 exits: {socks5:?}");
}

#[test]
fn a_sticky_session_keeps_one_exit() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("sticky");
    let (_dev, banner) = start_dev("dev", &scratch, &STILL);
    for session in ["alpha", "beta"] {
        let user = format!("dev-session-{session}");
        let exits: BTreeSet<String> = (0..8).map(|_| exit_via_http(&banner, &user)).collect();
        assert_eq!(exits.len(), 1, "session {session} moved: {exits:?}");
        let over_socks: BTreeSet<String> =
            (0..4).map(|_| exit_via_socks5(&banner, &user)).collect();
        assert_eq!(
            over_socks, exits,
            "one session, one exit, whatever the listener"
        );
    }
    // Without a session the same client rotates.
    let rotating: BTreeSet<String> = (0..8).map(|_| exit_via_http(&banner, "dev")).collect();
    assert!(rotating.len() > 1, "{rotating:?}");
}

#[test]
fn extracted_proxies_are_never_routed_by_the_gateway_nor_extracted_again() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("extract");
    let (_dev, banner) = start_dev("dev", &scratch, &STILL);
    let api = banner.api().to_owned();
    let token = banner.token().to_owned();

    // The CLI, table and JSON.
    let env = [("PROXYPOOL_TOKEN", token.as_str())];
    let (code, table, stderr) =
        api::run_retrying(&["extract", "--api", &api, "--count", "1"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        table.contains("PROXY") && table.contains("1 of 1"),
        "{table}"
    );
    let (code, json, stderr) = api::run_retrying(
        &[
            "extract",
            "--api",
            &api,
            "--count",
            "3",
            "--json",
            "--idempotency-key",
            "k-1",
        ],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    let first: Value = serde_json::from_str(&json).unwrap();
    // A retry with the same key is the same extraction, not a new one.
    let (_, replay, _) = api::run_retrying(
        &[
            "extract",
            "--api",
            &api,
            "--count",
            "3",
            "--json",
            "--idempotency-key",
            "k-1",
        ],
        &env,
    );
    assert_eq!(serde_json::from_str::<Value>(&replay).unwrap(), first);

    // Plain curl against the API takes what is left.
    let answer = api::call(
        "POST",
        &format!("{api}/v1/extractions"),
        Some(&token),
        Some(r#"{"count":100}"#),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let rest: Value = answer.json();

    let mut extracted = Vec::new();
    for answer in [&first, &rest] {
        extracted.extend(answer["proxies"].as_array().unwrap().iter().cloned());
    }
    let ids: BTreeSet<&str> = extracted
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), extracted.len(), "a proxy was extracted twice");
    assert!(extracted.len() >= 4, "{extracted:?}");

    // Nothing left for another extraction: exit code 4 (insufficient).
    let (code, _, stderr) = api::run_retrying(
        &[
            "extract",
            "--api",
            &api,
            "--count",
            "1",
            "--mode",
            "all-or-nothing",
        ],
        &env,
    );
    assert_eq!(code, 4, "{stderr}");
    // A wrong token: exit code 3.
    let (code, _, _) = api::run_retrying(
        &["extract", "--api", &api],
        &[("PROXYPOOL_TOKEN", "not-the-token")],
    );
    assert_eq!(code, 3);

    // Each extracted proxy works for its owner, and its exit is never the gateway's.
    let mut extracted_exits = BTreeSet::new();
    for proxy in &extracted {
        let scheme = match proxy["protocol"].as_str().unwrap() {
            "socks5" => "socks5h",
            other => other,
        };
        let url = format!(
            "{scheme}://{}:{}@{}:{}",
            proxy["username"].as_str().unwrap(),
            proxy["password"].as_str().unwrap(),
            proxy["host"].as_str().unwrap(),
            proxy["port"]
        );
        let (code, body) = curl(&["-x", &url, banner.origin()]);
        assert_eq!(code, 0, "{url}");
        extracted_exits.insert(exit_of(&body));
    }
    let mut gateway_exits = BTreeSet::new();
    for _ in 0..24 {
        gateway_exits.insert(exit_via_http(&banner, "dev"));
        gateway_exits.insert(exit_via_socks5(&banner, "dev"));
    }
    assert!(gateway_exits.len() >= 3, "{gateway_exits:?}");
    assert!(
        gateway_exits.is_disjoint(&extracted_exits),
        "the gateway used extracted proxies: {:?}",
        gateway_exits
            .intersection(&extracted_exits)
            .collect::<Vec<_>>()
    );
}

#[test]
fn sigterm_during_traffic_shuts_down_cleanly_with_exit_code_0() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("sigterm");
    let (mut dev, banner) = start_dev("dev", &scratch, &[]);
    exit_via_http(&banner, "dev");
    // A request in flight while the signal lands still gets its answer.
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    let origin = banner.origin().to_owned();
    let in_flight = std::thread::spawn(move || curl(&["-x", &proxy, &origin]));
    dev.signal("TERM");
    let status = dev.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", dev.stderr_tail());
    let (code, _) = in_flight.join().unwrap();
    // Depending on where the signal lands it finished (0) or found the listener closed
    // (7, or 52/56 when the kernel had queued the connection): never a hang (28).
    assert_ne!(code, 28, "an in-flight request hung through the shutdown");
    // Everything is closed: nothing answers on the gateway any more.
    let (code, _) = curl(&["-x", &format!("http://{}", banner.http()), banner.origin()]);
    assert_ne!(code, 0);
    let stderr = dev.stderr_tail();
    assert!(stderr.contains("shutdown requested"), "{stderr}");
    assert!(!stderr.contains(banner.password()) && !stderr.contains(banner.token()));
}

#[test]
fn the_dev_gateway_reaches_the_origin_and_no_other_port_on_loopback() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("destinations");
    let (_dev, banner) = start_dev("dev", &scratch, &STILL);
    assert!(exit_via_http(&banner, "dev").starts_with("127.0.0."));
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    // The default destination ports, on the origin's own address: refused before any
    // dial (403), not tried and failed (502).
    for port in [80, 443, 8080, 8443] {
        let (code, head) = curl(&["-i", "-x", &proxy, &format!("http://127.0.0.1:{port}/")]);
        assert_eq!(code, 0, "{head}");
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 403"), "port {port}: {head}");
        assert!(
            head.contains("x-proxypool-error: destination_denied"),
            "port {port}: {head}"
        );
    }
}
