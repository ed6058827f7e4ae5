//! TLS inspection under `proxypool dev`, as its banner shows it: the inspected curl line
//! works as printed (the https answer names its proxy, with a ticket), the client reports
//! a ban on that proxy with the ticket through `POST /v1/feedback` (accepted, and the
//! gateway then avoids that proxy for the domain), the CA is kept across runs, and the
//! CA's key appears nowhere in the process's output, at debug level.

use crate::common::{Proc, Scratch, api, curl_or_skip, eventually, parse_banner};
use std::time::Duration;

/// Starts dev at debug level on free ports with its data in `scratch`.
fn start(name: &str, scratch: &Scratch) -> (Proc, Vec<String>) {
    let data = scratch.file("data");
    let args = [
        "dev",
        "--http",
        "127.0.0.1:0",
        "--socks5",
        "127.0.0.1:0",
        "--https",
        "127.0.0.1:0",
        "--api",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let mut proc = Proc::start(name, &args, &[("PROXYPOOL_LOG", "debug")], &scratch.path);
    proc.read_until(Duration::from_secs(60), |line| {
        line.starts_with("Stop with")
    });
    let lines = proc.stdout.clone();
    (proc, lines)
}

/// Runs a banner's curl line (its words; no quoting in it) with the response head shown;
/// the head's status, headers (lower-cased names) and the body.
fn run_curl(line: &str) -> (u16, Vec<(String, String)>, String) {
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    let output = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(&words)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // -i shows the proxy's CONNECT answer first, then the origin's (the last head).
    let last = text.rfind("HTTP/1.1 ").unwrap_or(0);
    let (head, body) = text[last..]
        .split_once("\r\n\r\n")
        .unwrap_or((&text[last..], ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

#[test]
fn an_inspected_https_request_under_dev_is_named_ticketed_and_reportable() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("dev-inspection");
    let (mut proc, lines) = start("dev-inspection", &scratch);
    let banner = parse_banner(&lines);
    let line = banner
        .commands
        .iter()
        .find(|c| c.contains("-inspect:"))
        .expect("an inspected curl line")
        .clone();
    let (status, headers, body) = run_curl(&line);
    assert_eq!(status, 200, "{line}: {headers:?} {body}");
    assert!(body.contains("\"host\":\"shop-a.test:"), "{body}");
    let proxy_id = header(&headers, "x-proxypool-proxy").to_owned();
    let ticket = header(&headers, "x-proxypool-ticket").to_owned();
    assert!(
        !proxy_id.is_empty() && ticket.starts_with("v2."),
        "{headers:?}"
    );

    // The client reports a ban on that proxy for the domain with the gateway's ticket.
    let api_addr = banner.api();
    let body = serde_json::json!({ "proxy_id": proxy_id, "domain": "shop-a.test",
                                   "verdict": "banned", "ticket": ticket });
    let answer = api::call(
        "POST",
        &format!("{api_addr}/v1/feedback"),
        Some(banner.token()),
        Some(&body.to_string()),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    // The gateway learns it: inspected requests to the domain leave through others.
    eventually(
        "the reported proxy avoided",
        Duration::from_secs(20),
        || {
            (0..4).all(|_| {
                let (status, headers, _) = run_curl(&line);
                status == 200 && header(&headers, "x-proxypool-proxy") != proxy_id
            })
        },
    );

    // The CA's key appears in nothing the process wrote, at debug level.
    proc.signal("TERM");
    let _ = proc.wait(Duration::from_secs(20));
    let key = std::fs::read_to_string(scratch.file("data/ca/ca-key.pem")).unwrap();
    let stderr = std::fs::read_to_string(scratch.path.join("dev-inspection.stderr")).unwrap();
    assert!(
        stderr.contains("DEBUG") || stderr.contains("debug"),
        "debug logs were written"
    );
    for part in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!stderr.contains(part), "the CA key is in the log");
        assert!(
            !lines.iter().any(|l| l.contains(part)),
            "the CA key is on stdout"
        );
    }

    // A second run keeps the CA (clients keep trusting it).
    let cert = std::fs::read(scratch.file("data/ca/ca.pem")).unwrap();
    let (_again, _) = start("dev-inspection-again", &scratch);
    assert_eq!(std::fs::read(scratch.file("data/ca/ca.pem")).unwrap(), cert);
}
