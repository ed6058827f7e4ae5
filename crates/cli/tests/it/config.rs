//! `proxypool check-config`, `proxypool migrate` and `proxypool hash-secret` as a user
//! runs them: the examples check out, mistakes are reported with their file and key and a
//! non-zero exit code, a hash made by `hash-secret` stands in for a token (asked for in a
//! terminal, silently read from a pipe), and `PROXYPOOL_CONFIG` names the file when
//! `--config` (or check-config's FILE) does not.

use crate::common::{BIN, Scratch, run, tool_or_skip};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_commented_examples_check_out() {
    let scratch = Scratch::new("examples");
    let full = scratch.write("proxypool.toml", &example("proxypool.toml"));
    std::fs::create_dir_all(scratch.file("secrets")).unwrap();
    scratch.write("secrets/dc-password", "dc-secret\n");
    let env = [
        ("PROXYPOOL_WORKER_TOKEN", "worker-secret-value-1"),
        ("ACME_PROXY_PASSWORD", "acme-secret"),
        ("SCRAPER_API_TOKEN", "api-secret-value-0001"),
        ("SCRAPER_GATEWAY_PASSWORD", "gateway-secret-value"),
    ];
    let (code, stdout, stderr) = run(&["check-config", full.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(": OK"), "{stdout}");
    for part in [
        "store",
        "quota",
        "upstreams   2",
        "clients     1",
        "gateway     worker local",
    ] {
        assert!(stdout.contains(part), "{part} in {stdout}");
    }
    for secret in [
        "worker-secret-value-1",
        "acme-secret",
        "api-secret-value-0001",
        "gateway-secret-value",
        "dc-secret",
    ] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret));
    }

    // --effective: the resolved file, overrides applied, secrets only as references.
    let mut with_override = env.to_vec();
    with_override.push(("PROXYPOOL__CHECKER__TIMEOUT", "4s"));
    let (code, stdout, stderr) = run(
        &["check-config", full.to_str().unwrap(), "--effective"],
        &with_override,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("timeout = \"4s\""), "{stdout}");
    assert!(stdout.contains("env = \"SCRAPER_API_TOKEN\""), "{stdout}");
    for secret in [
        "worker-secret-value-1",
        "acme-secret",
        "api-secret-value-0001",
        "gateway-secret-value",
        "dc-secret",
    ] {
        assert!(!stdout.contains(secret), "{secret} in --effective");
    }

    let gateway = scratch.write("gateway.toml", &example("gateway.toml"));
    let (code, stdout, stderr) = run(&["check-config", gateway.to_str().unwrap()], &env[..1]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("worker gw-1, controller http://127.0.0.1:7070"),
        "{stdout}"
    );
}

#[test]
fn mistakes_name_the_file_and_key_and_exit_non_zero() {
    let scratch = Scratch::new("mistakes");
    let cases = [
        (
            "typo.toml",
            "[listen]\ncontorl = \"127.0.0.1:1\"\n",
            "listen",
        ),
        ("syntax.toml", "[store\nurl = 1\n", "syntax.toml:1:"),
        (
            "gateway.toml",
            "[gateway]\nworker_id = \"gw\"\ncontroller_url = \"http://127.0.0.1:1\"\nworker_token = { env = \"WT\" }\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n[gateway.dial]\nmax_attempts = 0\n",
            "dial.max_attempts",
        ),
        (
            "api.toml",
            "[api.limits]\nmax_connection = 1\n",
            "api.limits",
        ),
        (
            "destinations.toml",
            "[gateway]\nworker_id = \"gw\"\ncontroller_url = \"http://127.0.0.1:1\"\nworker_token = { env = \"WT\" }\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n[gateway.destinations]\nallow_cidrs = [\"10.0.0.0/8\", \"10.0.0.0/33\"]\n",
            "line 8: gateway.destinations.allow_cidrs[1]",
        ),
        ("empty.toml", "", "nothing to run"),
        (
            "city_without_country.toml",
            "[[upstreams]]\nid = \"bc\"\nttl = \"10m\"\nmax_size = 10\n[upstreams.credentials]\nusername = \"acct\"\npassword = { env = \"WT\" }\n[upstreams.provider]\nkind = \"backconnect\"\n[upstreams.provider.backconnect]\nhost = \"gate.vendor.example\"\nport = 7777\nusername = \"{account}[-cc-{country|upper}][-city-{city|lower|underscore}]-sessid-{session}\"\n[[upstreams.provider.backconnect.sessions]]\ncity = \"New York\"\ncount = 1\n[[upstreams.health.targets]]\nurl = \"http://example.com/\"\n",
            "upstreams[0].provider.backconnect.sessions[0].country: this group sets a city and the templates name {country}",
        ),
    ];
    for (name, text, expected) in cases {
        let path = scratch.write(name, text);
        let (code, _, stderr) = run(&["check-config", path.to_str().unwrap()], &[("WT", "t")]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let (code, _, stderr) = run(&["check-config", "/nonexistent/proxypool.toml"], &[]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn migrate_prepares_the_sqlite_quota() {
    let scratch = Scratch::new("migrate");
    let config = scratch.write(
        "proxypool.toml",
        "[quota]\nurl = \"sqlite://data/q.sqlite3\"\n",
    );
    let (code, stdout, stderr) = run(&["migrate", "--config", config.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("SQLite quota migrated"), "{stdout}");
    assert!(scratch.file("data/q.sqlite3").exists());
    // Twice is fine (migrations are idempotent); PostgreSQL-only flags are refused.
    let (code, _, _) = run(&["migrate", "--config", config.to_str().unwrap()], &[]);
    assert_eq!(code, 0);
    let (code, _, stderr) = run(
        &[
            "migrate",
            "--config",
            config.to_str().unwrap(),
            "--create-role",
            "q",
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
}

/// `proxypool hash-secret` with `input` on standard input: exit code, stdout, stderr.
fn hash_secret(input: &str) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .arg("hash-secret")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the proxypool binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_hash_from_hash_secret_stands_in_for_the_token_it_was_made_from() {
    let token = "scraper-api-token-made-by-hand-0001";
    let (code, reference, stderr) = hash_secret(&format!("{token}\n"));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "", "from a pipe: nothing but the reference");
    let reference = reference.trim();
    assert!(reference.starts_with("{ hash = \"sha256:"), "{reference}");
    assert!(!reference.contains(token), "{reference}");

    // The example's client token given as that hash: the file checks out without the
    // token's variable, and the effective file shows the hash, never a secret.
    let scratch = Scratch::new("hash-secret");
    let text = example("proxypool.toml").replace(
        "api_token = { env = \"SCRAPER_API_TOKEN\" }",
        &format!("api_token = {reference}"),
    );
    assert!(text.contains(reference));
    let file = scratch.write("proxypool.toml", &text);
    std::fs::create_dir_all(scratch.file("secrets")).unwrap();
    scratch.write("secrets/dc-password", "dc-secret\n");
    let env = [
        ("PROXYPOOL_WORKER_TOKEN", "worker-secret-value-1"),
        ("ACME_PROXY_PASSWORD", "acme-secret"),
        ("SCRAPER_GATEWAY_PASSWORD", "gateway-secret-value"),
    ];
    let (code, stdout, stderr) = run(
        &["check-config", file.to_str().unwrap(), "--effective"],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("[clients.api_token]\nhash = "),
        "the token is given as a hash: {stdout}"
    );
    let hash = reference
        .trim_start_matches("{ hash = \"")
        .trim_end_matches("\" }");
    let hash = proxypool_core::SecretHash::parse(hash).unwrap();
    assert!(hash.verify(token) && !hash.verify("scraper-api-token-made-by-hand-0002"));

    // Too short to guard anything: refused, and not echoed.
    let (code, stdout, stderr) = hash_secret("hunter2\n");
    assert_eq!(code, 2, "{stdout}");
    assert!(stderr.contains("7 characters"), "{stderr}");
    assert!(!stderr.contains("hunter2") && stdout.is_empty(), "{stderr}");
}

#[test]
fn proxypool_config_names_the_file_when_the_flag_does_not() {
    let scratch = Scratch::new("config-env");
    let missing = scratch.file("not-there.toml");
    for command in [
        &["serve"][..],
        &["controller"],
        &["gateway"],
        &["migrate"],
        &["check-config"],
        &["store", "status"],
    ] {
        let (code, _, stderr) = run(command, &[("PROXYPOOL_CONFIG", missing.to_str().unwrap())]);
        assert_eq!(code, 2, "{command:?}: {stderr}");
        assert!(
            stderr.contains("not-there.toml"),
            "{command:?} read the file PROXYPOOL_CONFIG names: {stderr}"
        );
    }
    // Neither: a usage error that names both ways.
    let (code, _, stderr) = run(&["serve"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--config"), "{stderr}");
    // check-config takes the file as its argument, or from the variable.
    let scratch_file = scratch.write("named.toml", "[gateway]\nworker_id = \"gw\"\ncontroller_url = \"http://127.0.0.1:1\"\nworker_token = { env = \"WT\" }\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n");
    let (code, stdout, stderr) = run(
        &["check-config"],
        &[
            ("PROXYPOOL_CONFIG", scratch_file.to_str().unwrap()),
            ("WT", "a-worker-token-of-16"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("named.toml: OK"), "{stdout}");
    let (code, _, stderr) = run(&["check-config"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("FILE"), "{stderr}");
}

/// In a terminal `hash-secret` asks for the secret on standard error and reads one line;
/// the reference alone goes to standard output. Run under `script`, which gives the
/// command a terminal (util-linux, on every Debian system).
#[test]
fn hash_secret_asks_for_the_secret_in_a_terminal() {
    if !tool_or_skip("script") {
        return;
    }
    let scratch = Scratch::new("hash-secret-tty");
    let err = scratch.file("stderr");
    let out = scratch.file("stdout");
    let line = format!(
        "{BIN} hash-secret 2>{} >{}",
        err.to_str().unwrap(),
        out.to_str().unwrap()
    );
    let mut child = Command::new("timeout")
        .args(["20", "script", "-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("script runs");
    let token = "a-token-typed-at-the-prompt-0001";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{token}\n").as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let prompt = std::fs::read_to_string(&err).unwrap();
    assert!(
        prompt.starts_with("The secret to hash") && prompt.contains("then Enter"),
        "{prompt:?}"
    );
    let reference = std::fs::read_to_string(&out).unwrap();
    let hash = reference
        .trim()
        .strip_prefix("{ hash = \"")
        .and_then(|rest| rest.strip_suffix("\" }"))
        .unwrap_or_else(|| panic!("not a reference: {reference:?}"));
    assert!(
        proxypool_core::SecretHash::parse(hash)
            .unwrap()
            .verify(token)
    );
}

/// `check-config` warns (exit 0) when a `serve` file lets its gateway lease everything
/// the upstreams can hold while clients with an API token would extract: no share kept,
/// and a `per_worker_target` at least as large as the upstreams' `max_size` together. It
/// stays quiet when extraction keeps a share, when the target leaves some over, when no
/// client extracts, and for a split controller, which cannot know its gateways.
#[test]
fn check_config_warns_when_the_gateway_of_serve_leaves_extraction_nothing() {
    let scratch = Scratch::new("share-warning");
    let upstream = "[[upstreams]]\nid = \"acme\"\nttl = \"10m\"\nmax_size = 40\n[upstreams.provider]\nkind = \"http\"\nurl = \"https://vendor.example/list\"\nformat = \"json\"\n[[upstreams.health.targets]]\nurl = \"https://example.com/\"\n";
    let extracting =
        "[[clients]]\nid = \"scraper\"\nproject = \"p\"\napi_token = { env = \"TOKEN\" }\n";
    let routing =
        "[[clients]]\nid = \"scraper\"\nproject = \"p\"\ngateway_password = { env = \"TOKEN\" }\n";
    let gateway = "[gateway]\n[gateway.listeners]\nhttp = \"127.0.0.1:0\"\n";
    let check = |name: &str, ownership: &str, clients: &str, gateway: &str| {
        let text =
            format!("[ownership]\ninterval = \"500ms\"\n{ownership}\n{upstream}{clients}{gateway}");
        let file = scratch.write(name, &text);
        let (code, stdout, stderr) = run(
            &["check-config", file.to_str().unwrap()],
            &[("TOKEN", "a-token-of-sixteen-chars")],
        );
        assert_eq!(code, 0, "{name}: {stderr}");
        (stdout, stderr)
    };

    let (stdout, stderr) = check("target.toml", "per_worker_target = 40", extracting, gateway);
    assert!(
        stderr.contains("target.toml: warning: [ownership] per_worker_target = 40 without extraction_share leaves extraction nothing"),
        "{stderr}"
    );
    assert!(stderr.contains("at most 40"), "{stderr}");
    assert!(stdout.contains("no share kept for extraction"), "{stdout}");
    let (_, stderr) = check("zero.toml", "extraction_share = 0", extracting, gateway);
    assert!(
        stderr.contains(
            "zero.toml: warning: [ownership] extraction_share = 0 leaves extraction nothing"
        ),
        "{stderr}"
    );

    for (name, ownership, clients, gateway) in [
        ("default.toml", "", extracting, gateway),
        (
            "left-over.toml",
            "per_worker_target = 39",
            extracting,
            gateway,
        ),
        (
            "both.toml",
            "per_worker_target = 40\nextraction_share = 0.1",
            extracting,
            gateway,
        ),
        (
            "routing-only.toml",
            "extraction_share = 0",
            routing,
            gateway,
        ),
        ("split.toml", "extraction_share = 0", extracting, ""),
    ] {
        let (stdout, stderr) = check(name, ownership, clients, gateway);
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
        if name == "default.toml" {
            assert!(
                stdout.contains("a share of 0.5 of the usable proxies kept unowned for extraction"),
                "{stdout}"
            );
        }
    }
}

/// `check-config` warns (exit 0) of each listener that serves metrics or operator routes
/// without a token while reachable from other hosts: the gateway's admin listener without
/// `admin_token`, the client API without `metrics_token`. One line each, naming the key,
/// the address and what could be read; nothing for loopback, nor with the token.
#[test]
fn check_config_warns_of_admin_and_metrics_listeners_open_beyond_loopback() {
    let scratch = Scratch::new("exposure-warning");
    let env = [("TOKEN", "a-token-of-sixteen-chars")];
    let check = |name: &str, text: &str| {
        let file = scratch.write(name, text);
        let (code, stdout, stderr) = run(&["check-config", file.to_str().unwrap()], &env);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(stdout.contains(": OK"), "{name}: {stdout}");
        stderr
    };
    let gateway = |admin: &str, token: &str| {
        format!(
            "[gateway]\nworker_id = \"gw\"\ncontroller_url = \"http://10.0.0.1:7070\"\nworker_token = {{ env = \"TOKEN\" }}\n{token}\n[gateway.listeners]\nhttp = \"0.0.0.0:8080\"\nadmin = \"{admin}\"\n"
        )
    };
    let token = "admin_token = { env = \"TOKEN\" }";

    for (name, admin) in [("any.toml", "0.0.0.0:9090"), ("any6.toml", "[::]:9090")] {
        let stderr = check(name, &gateway(admin, ""));
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(": warning: "))
            .collect();
        assert_eq!(warnings.len(), 1, "{name}: {stderr}");
        let expected = format!(
            "{name}: warning: [gateway.listeners] admin = {admin} is not on loopback and [gateway] admin_token is unset: anyone who reaches it can read /metrics"
        );
        assert!(warnings[0].contains(&expected), "{stderr}");
        assert!(warnings[0].contains("/status"), "{stderr}");
    }
    for (name, text) in [
        ("loopback.toml", gateway("127.0.0.1:9090", "")),
        ("loopback6.toml", gateway("[::1]:9090", "")),
        ("token.toml", gateway("0.0.0.0:9090", token)),
    ] {
        let stderr = check(name, &text);
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
    }

    // The client API's /metrics, on a controller's file.
    let controller = |api: &str, metrics_token: &str| {
        format!(
            "[listen]\napi = \"{api}\"\n[api]\n{metrics_token}\n[[upstreams]]\nid = \"acme\"\nttl = \"10m\"\nmax_size = 40\n[upstreams.provider]\nkind = \"http\"\nurl = \"https://vendor.example/list\"\nformat = \"json\"\n[[upstreams.health.targets]]\nurl = \"https://example.com/\"\n"
        )
    };
    let stderr = check("api.toml", &controller("0.0.0.0:7080", ""));
    assert_eq!(stderr.matches(": warning: ").count(), 1, "{stderr}");
    assert!(
        stderr.contains("api.toml: warning: [listen] api = 0.0.0.0:7080 is not on loopback and [api] metrics_token is unset: anyone who reaches it can read /metrics"),
        "{stderr}"
    );
    for (name, text) in [
        ("api-loopback.toml", controller("127.0.0.1:7080", "")),
        (
            "api-token.toml",
            controller("0.0.0.0:7080", "metrics_token = { env = \"TOKEN\" }"),
        ),
    ] {
        let stderr = check(name, &text);
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
    }
    // A worker token without workers acts for every gateway id.
    let tokens = |workers: &str| {
        format!(
            "{}\n[[worker_tokens]]\nname = \"fleet\"\ntoken = {{ env = \"TOKEN\" }}\n{workers}\n",
            controller("127.0.0.1:7080", "")
        )
    };
    let stderr = check("any-worker.toml", &tokens(""));
    assert_eq!(stderr.matches(": warning: ").count(), 1, "{stderr}");
    assert!(
        stderr.contains("any-worker.toml: warning: [[worker_tokens]] fleet lists no workers: it acts for any worker id"),
        "{stderr}"
    );
    let stderr = check("one-worker.toml", &tokens("workers = [\"gw-1\"]"));
    assert!(!stderr.contains("warning"), "{stderr}");
}
