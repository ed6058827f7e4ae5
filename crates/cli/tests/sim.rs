//! `proxypool sim` as a person uses it: it prints its list URL, proxies and origin; the
//! list serves exactly the printed proxies; a printed proxy carries a request to the origin
//! from its printed exit; the printed `[[upstreams]]` entry is a valid configuration; a
//! signal stops it cleanly.

mod common;

use common::{Proc, Scratch, curl, curl_or_skip, exit_of, run};
use serde_json::Value;
use std::time::Duration;

/// The value after `label` on a banner line (`  label   value   (comment)`).
fn field<'a>(lines: &'a [String], label: &str) -> &'a str {
    lines
        .iter()
        .find_map(|line| line.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {label:?} in {lines:#?}"))
}

#[test]
fn sim_prints_what_it_serves_and_stops_on_a_signal() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("sim");
    let mut sim = Proc::start(
        "sim",
        &["sim", "--proxies", "4", "--proxy-ttl", "0"],
        &[],
        &scratch.path,
    );
    sim.read_until(Duration::from_secs(20), |line| line == "Stop with Ctrl-C.");
    let lines = sim.stdout.clone();
    let list_url = field(&lines, "vendor list");
    let origin = field(&lines, "origin");
    assert_eq!(field(&lines, "proxies"), "4");

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

    // An HTTP proxy as printed carries a request to the origin from its printed exit.
    let http = printed.iter().find(|p| p[0] == "http").unwrap();
    let via = format!("http://{}@{}", http[4], http[1]);
    let (code, body) = curl(&["-x", &via, origin]);
    assert_eq!(code, 0, "{body}");
    assert_eq!(exit_of(&body), http[3]);

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
