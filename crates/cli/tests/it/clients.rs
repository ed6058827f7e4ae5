//! The Python client package `clients/python/` (proxypool-client) and the client examples
//! of `examples/clients/` that use it (Python `requests`, the package's Scrapy add-on,
//! Playwright on Chromium), run against a running `proxypool dev`: the examples asserted on
//! their exit code and on what they printed (they must do what their README says), the
//! package by its own pytest suite, which must pass whole, none of it skipped. dev's https
//! side (its TLS listener, its https origin, the gateway's inspection CA) is handed to both,
//! so the https steps run too.
//!
//! `scripts/test.sh` builds the package's wheel, installs it with the pinned packages
//! (`examples/clients/requirements.txt`, `clients/python/requirements-test.txt`) into a
//! fresh virtual environment under `target/`, and names its python in
//! `PROXYPOOL_CLIENTS_PYTHON` and the wheel in `PROXYPOOL_CLIENTS_WHEEL`; without the
//! python the tests skip loudly (and fail under `CI=true`).

use crate::common::{Banner, Proc, Scratch, api, curl, exit_of, start_dev, tool_or_skip};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// No rotation: the examples count proxies, which the vendor must not replace meanwhile.
const STILL: [&str; 2] = ["--proxy-ttl", "0"];

/// The virtual environment's python, or `None` (after saying so) when the test skips.
fn clients_python() -> Option<String> {
    let env = proxypool_config::Env::from_process();
    let python = env.get("PROXYPOOL_CLIENTS_PYTHON").map(str::to_owned);
    if python.is_none() {
        assert!(
            !proxypool_testkit::running_in_ci(),
            "PROXYPOOL_CLIENTS_PYTHON is not set: scripts/test.sh installs the client \
             examples' packages and sets it"
        );
        eprintln!("SKIPPED: PROXYPOOL_CLIENTS_PYTHON is not set (scripts/test.sh sets it)");
    }
    python
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/clients")
}

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/python")
}

/// `--ban-exit` values banning each exit of `proxies` simulated proxies (127.0.0.2 up) on
/// a site of its own, `shop-N.test` for exit 127.0.0.N (403, or 429 for odd N): whichever
/// proxies dev leases to its gateway, the site of one of their exits bans exactly that one.
fn ban_every_exit(proxies: u8) -> Vec<String> {
    (2..proxies + 2)
        .map(|n| {
            let status = if n % 2 == 0 { 403 } else { 429 };
            format!("127.0.0.{n}=shop-{n}.test:{status}")
        })
        .collect()
}

/// `ARGS` for `proxypool dev`: each of `bans` after `--ban-exit`.
fn ban_args(bans: &[String]) -> Vec<&str> {
    bans.iter()
        .flat_map(|ban| ["--ban-exit", ban.as_str()])
        .collect()
}

/// The origin's port, for URLs that name it as a site under `.test`.
fn origin_port(banner: &Banner) -> &str {
    banner
        .origin()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
}

/// The first word after `label` on the line of dev's banner that starts with it (for
/// the lines the shared banner parser does not read).
fn banner_line<'a>(dev: &'a Proc, label: &str) -> &'a str {
    dev.stdout
        .iter()
        .find_map(|line| line.trim().strip_prefix(label)?.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {label:?} line in dev's banner: {:?}", dev.stdout))
}

/// dev's https side, as environment variables for the examples and the package's tests:
/// its https origin under a name that bans nobody, the gateway's inspection CA, the https
/// origin's own CA (in dev's data directory), the TLS listener and its certificate.
fn https_env(dev: &Proc, banner: &Banner, scratch: &Scratch) -> Vec<(&'static str, String)> {
    let https_origin = banner_line(dev, "https origin");
    let port = https_origin
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap();
    let site_ca = scratch.file("data").join("dev-origin-ca.pem");
    assert!(site_ca.is_file(), "dev wrote no {}", site_ca.display());
    let (tls, tls_ca) = banner.https();
    vec![
        ("HTTPS_TARGET_URL", format!("https://shop-b.test:{port}/")),
        (
            "PROXYPOOL_GATEWAY_CA",
            banner_line(dev, "inspection CA").to_owned(),
        ),
        ("SITE_CA", site_ca.to_str().unwrap().to_owned()),
        ("PROXYPOOL_GATEWAY_TLS", tls.to_owned()),
        ("PROXYPOOL_GATEWAY_TLS_CA", tls_ca.to_owned()),
    ]
}

/// What one example printed and how it ended.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn lines_starting(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|line| line.starts_with(prefix))
            .collect()
    }
}

/// Runs `python SCRIPT ARGS` from `examples/clients/` with dev's settings in the
/// environment variables the examples document, `target` as `TARGET_URL`, and `env`.
fn run_example(
    python: &str,
    script: &str,
    banner: &Banner,
    target: &str,
    args: &[&str],
    env: &[(&'static str, String)],
) -> Run {
    let output = Command::new("timeout")
        .args(["180", python, script])
        .args(args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .current_dir(examples_dir())
        .env("PROXYPOOL_API", banner.api())
        .env("PROXYPOOL_TOKEN", banner.token())
        .env("PROXYPOOL_GATEWAY", banner.http())
        .env("PROXYPOOL_USERNAME", "dev")
        .env("PROXYPOOL_PASSWORD", banner.password())
        .env("TARGET_URL", target)
        // No bytecode cache in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // A proxy of the machine's own must not come between the examples and dev.
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .expect("python runs");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    eprintln!("{script} {args:?} -> {:?}\n{}", run.code, run.stdout);
    run
}

/// The package's test suite run against `dev` (`banner`), `site` as the site that bans
/// nobody and `bans` as the sites that do, and dev's https side (`https`, from
/// [`https_env`]); what it printed and how it ended.
fn run_package_tests(
    python: &str,
    banner: &Banner,
    site: &str,
    bans: &[String],
    https: &[(&'static str, String)],
) -> Run {
    let https = |name: &str| {
        https
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
            .unwrap()
    };
    let wheel = std::env::var("PROXYPOOL_CLIENTS_WHEEL").unwrap_or_else(|_| {
        panic!("PROXYPOOL_CLIENTS_WHEEL is not set: scripts/test.sh builds the wheel and sets it")
    });
    // The settings its conftest.py documents; pytest's own options are in pyproject.toml.
    let output = Command::new("timeout")
        .args(["600", python, "-m", "pytest", "-q", "-rfEs", "tests"])
        .current_dir(package_dir())
        .env("PROXYPOOL_API", banner.api())
        .env("PROXYPOOL_TOKEN", banner.token())
        .env("PROXYPOOL_GATEWAY", banner.http())
        .env("PROXYPOOL_USERNAME", "dev")
        .env("PROXYPOOL_PASSWORD", banner.password())
        .env("PROXYPOOL_TEST_SITE", site)
        .env("PROXYPOOL_TEST_BANS", bans.join(","))
        .env("PROXYPOOL_TEST_HTTPS_SITE", https("HTTPS_TARGET_URL"))
        .env("PROXYPOOL_GATEWAY_CA", https("PROXYPOOL_GATEWAY_CA"))
        .env("PROXYPOOL_TEST_SITE_CA", https("SITE_CA"))
        .env("PROXYPOOL_GATEWAY_TLS", https("PROXYPOOL_GATEWAY_TLS"))
        .env(
            "PROXYPOOL_GATEWAY_TLS_CA",
            https("PROXYPOOL_GATEWAY_TLS_CA"),
        )
        .env("PROXYPOOL_TEST_WHEEL", wheel)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .expect("python runs");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    eprintln!("pytest -> {:?}\n{}\n{}", run.code, run.stdout, run.stderr);
    run
}

/// The number just before `word` in `line` ("8 requests through 3 proxies": 3 for
/// "proxies").
fn count_before(line: &str, word: &str) -> usize {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == word)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
    words[at - 1]
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[test]
fn the_requests_example_extracts_rotates_and_keeps_a_session() {
    let Some(python) = clients_python() else {
        return;
    };
    let scratch = Scratch::new("clients-requests");
    let (dev, banner) = start_dev("dev-clients-requests", &scratch, &STILL);
    let target = format!("http://shop-b.test:{}/", origin_port(&banner));
    let https = https_env(&dev, &banner, &scratch);

    let run = run_example(
        &python,
        "requests_example.py",
        &banner,
        &target,
        &[],
        &https,
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let extracted = run.lines_starting("extracted proxy ");
    assert_eq!(extracted.len(), 1, "{run:?}");
    assert!(
        extracted[0].contains("status 200, exit 127.0.0."),
        "{run:?}"
    );
    let rotation = run.lines_starting("rotation: ");
    assert_eq!(rotation.len(), 1, "{run:?}");
    assert!(count_before(rotation[0], "proxies,") > 1, "{run:?}");
    let sticky = run.lines_starting("sticky session dev-session-");
    assert_eq!(sticky.len(), 1, "{run:?}");
    assert_eq!(count_before(sticky[0], "requests"), 5, "{run:?}");
    assert_eq!(count_before(sticky[0], "proxy,"), 1, "{run:?}");
    // https both ways: a plain tunnel's answer is the site's alone; inspected, every
    // answer names its proxy and ticket, the requests inside one tunnel rotating.
    let tunnel = run.lines_starting("https tunnel: ");
    assert_eq!(tunnel.len(), 1, "{run:?}");
    assert!(
        tunnel[0].contains("status 200, exit 127.0.0.")
            && tunnel[0].ends_with("proxy named in the answer: no (TLS end to end)"),
        "{run:?}"
    );
    let inspected = run.lines_starting("https inspected: ");
    assert_eq!(inspected.len(), 1, "{run:?}");
    assert_eq!(count_before(inspected[0], "requests"), 6, "{run:?}");
    assert!(count_before(inspected[0], "proxies,") > 1, "{run:?}");
    assert_eq!(count_before(inspected[0], "answers"), 6, "{run:?}");
    assert_eq!(run.stdout.lines().last(), Some("OK"), "{run:?}");

    // A wrong gateway password is refused (407), and the example says so by its exit code.
    let mut wrong = banner.clone();
    wrong
        .fields
        .insert("proxy password".to_owned(), "not-the-password".to_owned());
    let refused = run_example(&python, "requests_example.py", &wrong, &target, &[], &[]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("407"), "{refused:?}");
    // And without a target it names what is missing; an https target without the
    // gateway's CA too (verification is never turned off to get by).
    let missing = run_example(&python, "requests_example.py", &banner, "", &[], &[]);
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(missing.stderr.contains("--target"), "{missing:?}");
    let no_ca: Vec<_> = https
        .iter()
        .filter(|(name, _)| *name != "PROXYPOOL_GATEWAY_CA")
        .cloned()
        .collect();
    let untrusted = run_example(
        &python,
        "requests_example.py",
        &banner,
        &target,
        &[],
        &no_ca,
    );
    assert_eq!(untrusted.code, Some(2), "{untrusted:?}");
    assert!(untrusted.stderr.contains("--gateway-ca"), "{untrusted:?}");
}

#[test]
fn the_scrapy_example_reports_a_ban_and_retries_through_another_proxy() {
    let Some(python) = clients_python() else {
        return;
    };
    let scratch = Scratch::new("clients-scrapy");
    // Each exit 127.0.0.N is banned for its own site shop-N.test (403 or 429), so whichever
    // proxies dev leases to its gateway, the site of one of their exits bans exactly one
    // of them.
    let bans = ban_every_exit(16);
    let mut args: Vec<&str> = STILL.to_vec();
    args.extend(ban_args(&bans));
    let (dev, banner) = start_dev("dev-clients-scrapy", &scratch, &args);
    let port = origin_port(&banner).to_owned();

    // An exit of a proxy the gateway holds: the origin by address is banned for nobody.
    let proxy = format!("http://dev:{}@{}", banner.password(), banner.http());
    let (code, body) = curl(&["-x", &proxy, banner.origin()]);
    assert_eq!(code, 0, "{body}");
    let exit = exit_of(&body);
    let n = exit.strip_prefix("127.0.0.").expect("a simulated exit");
    let banning = format!("http://shop-{n}.test:{port}/search");

    // Each search is a POST, which the gateway never sends twice: a ban reaches the
    // add-on's middleware. The gateway picks its proxies in turn, so 12 searches over its 8
    // proxies meet the banned one.
    let run = run_example(
        &python,
        "scrapy_run.py",
        &banner,
        &banning,
        &["--require-ban"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let lines = run.lines_starting("query-");
    let reported: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|line| line.contains(" answered "))
        .collect();
    assert!(!reported.is_empty(), "{run:?}");
    for line in &reported {
        // "query-3: proxy ID answered 403, reported: feedback 200 cooling"
        let query = line.split(':').next().unwrap();
        let banned = line.split_whitespace().nth(2).unwrap();
        assert!(
            line.contains("answered 403,") || line.contains("answered 429,"),
            "{line}"
        );
        assert!(line.ends_with("feedback 200 cooling"), "{line}");
        let served = lines
            .iter()
            .find(|l| l.starts_with(&format!("{query}: 200 through proxy ")))
            .unwrap_or_else(|| panic!("{query} was served: {run:?}"));
        let carrier = served.rsplit(' ').next().unwrap();
        assert_ne!(carrier, banned, "{query} was retried through another proxy");
    }
    let served: BTreeSet<&str> = lines
        .iter()
        .filter(|line| line.contains(": 200 through proxy "))
        .map(|line| line.split(':').next().unwrap())
        .collect();
    assert_eq!(served.len(), 12, "every search answered: {run:?}");
    assert!(run.stdout.ends_with("OK\n"), "{run:?}");

    // The ticket is what let the add-on report a proxy it never extracted: the same
    // report without it, or with a forged one, is refused like an unknown id.
    let banned = reported[0].split_whitespace().nth(2).unwrap();
    let forged = format!("v2.{}.{}", u64::MAX / 2, "0".repeat(64));
    for ticket in [None, Some(forged.as_str())] {
        let body = serde_json::json!({ "proxy_id": banned, "ticket": ticket,
                                       "domain": format!("shop-{n}.test"), "verdict": "banned" });
        let answer = api::call(
            "POST",
            &format!("{}/v1/feedback", banner.api()),
            Some(banner.token()),
            Some(&body.to_string()),
        );
        assert_eq!(answer.status, 404, "{ticket:?}: {answer:?}");
        assert_eq!(
            answer.json()["error"]["code"],
            "not_found",
            "{ticket:?}: {answer:?}"
        );
    }

    // The same crawl of a site that bans nobody meets no ban, and `--require-ban` says so.
    let open = format!("http://shop-b.test:{port}/search");
    let unbanned = run_example(
        &python,
        "scrapy_run.py",
        &banner,
        &open,
        &["--require-ban"],
        &[],
    );
    assert_eq!(unbanned.code, Some(1), "{unbanned:?}");
    assert!(
        unbanned
            .stdout
            .contains("12 of 12 queries answered, 0 bans"),
        "{unbanned:?}"
    );
    assert!(unbanned.stdout.contains("no ban met"), "{unbanned:?}");

    // https with --inspect: Scrapy verifies the gateway's leaves against the bundle the
    // example builds, and every answer names the proxy that carried it, as on plain http.
    let https = https_env(&dev, &banner, &scratch);
    let site = https
        .iter()
        .find(|(name, _)| *name == "HTTPS_TARGET_URL")
        .map(|(_, url)| format!("{url}search"))
        .unwrap();
    let inspected = run_example(
        &python,
        "scrapy_run.py",
        &banner,
        &site,
        &["--inspect"],
        &https,
    );
    assert_eq!(inspected.code, Some(0), "{inspected:?}");
    let answered: Vec<&str> = inspected
        .lines_starting("query-")
        .into_iter()
        .filter(|line| line.contains(": 200 through proxy "))
        .collect();
    assert_eq!(answered.len(), 12, "{inspected:?}");
    for line in answered {
        let proxy = line.rsplit(' ').next().unwrap();
        assert!(
            proxy.len() == 32 && proxy.bytes().all(|b| b.is_ascii_hexdigit()),
            "{line}"
        );
    }
    // The banning site over https, inspected: each ban inside the tunnel is reported by
    // the id of the proxy that met it and retried through another, as on plain http.
    let https_port = site
        .trim_end_matches("/search")
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    // The plain crawl left exit n cooling for shop-n.test: another leased exit's site.
    let other = (0..32)
        .find_map(|_| {
            let (code, body) = curl(&["-x", &proxy, banner.origin()]);
            let exit = (code == 0).then(|| exit_of(&body))?;
            let m = exit.strip_prefix("127.0.0.")?.to_owned();
            (m != n).then_some(m)
        })
        .expect("the gateway holds a second proxy");
    let banning_https = format!("https://shop-{other}.test:{https_port}/search");
    let banned_run = run_example(
        &python,
        "scrapy_run.py",
        &banner,
        &banning_https,
        &["--inspect", "--require-ban"],
        &https,
    );
    assert_eq!(banned_run.code, Some(0), "{banned_run:?}");
    let reported = banned_run.lines_starting("query-");
    let reported: Vec<&str> = reported
        .into_iter()
        .filter(|line| line.contains(" answered "))
        .collect();
    assert!(!reported.is_empty(), "{banned_run:?}");
    for line in &reported {
        let banned = line.split_whitespace().nth(2).unwrap();
        assert!(
            banned.len() == 32 && banned.bytes().all(|b| b.is_ascii_hexdigit()),
            "{line}"
        );
        assert!(line.ends_with("feedback 200 cooling"), "{line}");
    }
    // Trusting the wrong CA for the gateway's leaves, nothing is answered.
    let wrong_ca: Vec<_> = https
        .iter()
        .map(|(name, value)| match *name {
            "PROXYPOOL_GATEWAY_CA" => (*name, banner.https().1.to_owned()),
            _ => (*name, value.clone()),
        })
        .collect();
    let untrusted = run_example(
        &python,
        "scrapy_run.py",
        &banner,
        &site,
        &["--inspect"],
        &wrong_ca,
    );
    assert_eq!(untrusted.code, Some(1), "{untrusted:?}");
    assert!(
        untrusted.stdout.contains("0 of 12 queries answered"),
        "{untrusted:?}"
    );
}

#[test]
fn the_playwright_example_keeps_a_session_and_rotates_without_one() {
    let Some(python) = clients_python() else {
        return;
    };
    if !tool_or_skip("chromium") {
        return;
    }
    let scratch = Scratch::new("clients-playwright");
    let (_dev, banner) = start_dev("dev-clients-playwright", &scratch, &STILL);
    let target = format!("http://shop-b.test:{}/", origin_port(&banner));
    // The chromium on PATH (Debian's is /usr/bin/chromium, the example's default).
    let (code, found) = crate::common::shell("command -v chromium");
    assert_eq!(code, 0, "chromium answered --version but is not on PATH");
    let chromium = ["--chromium", found.trim()];

    let run = run_example(
        &python,
        "playwright_example.py",
        &banner,
        &target,
        &chromium,
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let sticky = run.lines_starting("sticky session dev-session-");
    assert_eq!(sticky.len(), 1, "{run:?}");
    assert_eq!(count_before(sticky[0], "page"), 4, "{run:?}");
    assert_eq!(count_before(sticky[0], "proxies"), 1, "{run:?}");
    assert!(sticky[0].contains("exits ['127.0.0."), "{run:?}");
    let rotation = run.lines_starting("rotation as dev: ");
    assert_eq!(rotation.len(), 1, "{run:?}");
    assert!(count_before(rotation[0], "proxies") > 1, "{run:?}");
    assert_eq!(run.stdout.lines().last(), Some("OK"), "{run:?}");

    // The browser's proxy credentials are the gateway's: a wrong password loads nothing.
    let mut wrong = banner.clone();
    wrong
        .fields
        .insert("proxy password".to_owned(), "not-the-password".to_owned());
    let refused = run_example(
        &python,
        "playwright_example.py",
        &wrong,
        &target,
        &chromium,
        &[],
    );
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("failed: 407"), "{refused:?}");
}

/// How many tests the package's suite holds today: fewer passing means some were lost.
const PACKAGE_TESTS: usize = 132;
/// dev's proxies for the package's tests: they extract about ten of the half dev keeps
/// for extraction, and ban four of the gateway's half.
const PACKAGE_PROXIES: u8 = 24;

#[test]
fn the_python_client_package_passes_its_own_tests_against_dev() {
    let Some(python) = clients_python() else {
        return;
    };
    let scratch = Scratch::new("clients-package");
    let bans = ban_every_exit(PACKAGE_PROXIES);
    let proxies = PACKAGE_PROXIES.to_string();
    let mut args: Vec<&str> = STILL.to_vec();
    args.extend(["--proxies", proxies.as_str()]);
    args.extend(ban_args(&bans));
    let (dev, banner) = start_dev("dev-clients-package", &scratch, &args);
    let site = format!("http://shop-b.test:{}/", origin_port(&banner));
    let https = https_env(&dev, &banner, &scratch);

    let run = run_package_tests(&python, &banner, &site, &bans, &https);
    // 0 only when every test collected passed (5: none collected; 1: a failure).
    assert_eq!(run.code, Some(0), "{run:?}");
    // "132 passed in 21.30s": every test ran, none skipped (the tests against dev skip
    // without their settings, the wheel's without its name), none left out.
    let summary = run
        .stdout
        .lines()
        .rev()
        .find(|line| line.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary: {run:?}"));
    for word in [
        "failed",
        "error",
        "skipped",
        "deselected",
        "xfailed",
        "xpassed",
    ] {
        assert!(!summary.contains(word), "{summary}");
    }
    let words: Vec<&str> = summary.split_whitespace().collect();
    let at = words
        .iter()
        .position(|word| word.trim_end_matches(',') == "passed")
        .unwrap_or_else(|| panic!("{summary}"));
    let passed: usize = words[at - 1]
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {summary}"));
    assert!(
        passed >= PACKAGE_TESTS,
        "{passed} passed, {PACKAGE_TESTS} expected: {summary}"
    );
}
