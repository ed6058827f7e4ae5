//! Shared helpers of the end-to-end tests: start the built `proxypool` binary as a
//! process, read what it prints, send it signals, and run real `curl`.
//!
//! Readiness across processes has no shared signal, so waits are bounded polls with a
//! deadline (the testkit's `eventually` and `poll_until`, re-exported here); every child
//! is killed when its guard drops, so a failed test leaves nothing running. API calls
//! retry a 503 as a real client does (`api`).
// `pub` marks what the test modules use; the crate is a test binary, so nothing is
// reachable from outside anyway.
#![allow(unreachable_pub)]

pub mod api;
pub mod exposition;
pub mod promql;
pub mod sim;
pub mod split;

pub use proxypool_testkit::{eventually, eventually_some, poll_until};

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_proxypool");

/// A scratch directory removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "proxypool-cli-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Scratch { path }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    // A failing test keeps its directory (configurations, every process's stderr) for
    // whoever reads the failure.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for the failure: {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A running `proxypool` process: stdout lines arrive on a channel, stderr goes to a file
/// (shown when a wait fails). Killed on drop.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    pub stdout: Vec<String>,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `proxypool ARGS` with `env` added to the environment.
    pub fn start(name: &str, args: &[&str], env: &[(&str, &str)], logs: &Path) -> Proc {
        Self::start_in(name, args, env, logs, None)
    }

    /// [`Proc::start`] in the working directory `cwd` (`None`: this process's).
    pub fn start_in(
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
        logs: &Path,
        cwd: Option<&Path>,
    ) -> Proc {
        let stderr = logs.join(format!("{name}.stderr"));
        let mut command = Command::new(BIN);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        command
            .args(args)
            .env("PROXYPOOL_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("the proxypool binary starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            name: name.to_owned(),
            child: Some(child),
            lines,
            stdout: Vec::new(),
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Reads stdout until a line satisfies `done`, within `timeout`.
    pub fn read_until(&mut self, timeout: Duration, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let finished = done(&line);
                    self.stdout.push(line);
                    if finished {
                        return;
                    }
                }
                Err(_) => panic!(
                    "{} did not print what was expected within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    self.name,
                    self.stdout.join("\n"),
                    self.stderr_tail()
                ),
            }
        }
    }

    /// The last lines of stderr.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Sends a signal with `kill` (no unsafe in the tests either).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits for the process to exit, within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let exited = poll_until(timeout, || child.try_wait().unwrap());
        let Some(status) = exited else {
            panic!(
                "{} did not exit within {timeout:?}\nstderr:\n{}",
                self.name,
                self.stderr_tail()
            );
        };
        self.child = None;
        status
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What `proxypool dev` printed: `label -> value` for the banner's fields, and the
/// command lines.
#[derive(Debug, Clone)]
pub struct Banner {
    pub fields: BTreeMap<String, String>,
    pub commands: Vec<String>,
}

impl Banner {
    pub fn get(&self, label: &str) -> &str {
        self.fields
            .get(label)
            .unwrap_or_else(|| panic!("no {label:?} in the banner: {:?}", self.fields))
    }

    pub fn http(&self) -> &str {
        self.get("gateway HTTP")
    }

    /// The TLS listener's address and the certificate a client trusts for it.
    pub fn https(&self) -> (&str, &str) {
        (self.get("gateway HTTPS"), self.get("gateway TLS cert"))
    }

    pub fn socks5(&self) -> &str {
        self.get("gateway SOCKS5")
    }

    pub fn api(&self) -> &str {
        self.get("client API")
    }

    pub fn origin(&self) -> &str {
        self.get("origin")
    }

    pub fn password(&self) -> &str {
        self.get("proxy password")
    }

    pub fn token(&self) -> &str {
        self.get("API token")
    }
}

const LABELS: &[&str] = &[
    "gateway HTTP",
    "gateway HTTPS",
    "gateway TLS cert",
    "gateway SOCKS5",
    "client API",
    "dashboard",
    "control API",
    "origin",
    "proxy username",
    "proxy password",
    "API token",
];

/// Starts `proxypool dev` on free ports with its data under `scratch`, and reads its
/// banner. `extra` adds flags.
pub fn start_dev(name: &str, scratch: &Scratch, extra: &[&str]) -> (Proc, Banner) {
    // Relative, as the default `.proxypool-data` is, from a working directory of its own:
    // the data directory reaches the generated configuration (anchored at it) and the
    // printed commands, which the tests run from their own directory.
    let data = "data";
    let mut args = vec![
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
        data,
    ];
    args.extend_from_slice(extra);
    let mut proc = Proc::start_in(name, &args, &[], &scratch.path, Some(&scratch.path));
    proc.read_until(Duration::from_secs(60), |line| {
        line.starts_with("Stop with")
    });
    let banner = parse_banner(&proc.stdout);
    (proc, banner)
}

pub fn parse_banner(lines: &[String]) -> Banner {
    let mut fields = BTreeMap::new();
    let mut commands = Vec::new();
    for line in lines {
        let trimmed = line.trim();
        if trimmed.starts_with("curl ") {
            commands.push(trimmed.to_owned());
            continue;
        }
        if let Some(command) = trimmed.strip_prefix("Extract with the CLI: ") {
            fields.insert("extract command".to_owned(), command.to_owned());
            continue;
        }
        for label in LABELS {
            if let Some(rest) = trimmed.strip_prefix(label)
                && rest.starts_with("  ")
            {
                let value = rest.split_whitespace().next().unwrap_or("").to_owned();
                fields.insert((*label).to_owned(), value);
            }
        }
    }
    Banner { fields, commands }
}

/// Whether `curl` is installed; without it the test skips (fails under `CI=true`).
pub fn curl_or_skip() -> bool {
    tool_or_skip("curl")
}

/// Whether `program` (one `scripts/test.sh` installs) answers `--version`; without it the
/// test says it skips, and under `CI=true` fails instead.
pub fn tool_or_skip(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is required under CI (scripts/test.sh installs it)"
        );
        eprintln!("\n*** SKIPPED: {program} is not installed (scripts/test.sh installs it) ***\n");
    }
    found
}

/// Runs `curl -sS --max-time 10 ARGS`; returns (exit code, stdout).
pub fn curl(args: &[&str]) -> (i32, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Runs a printed command line verbatim with `sh -c` (under coreutils' `timeout`, so a
/// broken command fails the test instead of hanging it); returns (exit code, stdout).
pub fn shell(line: &str) -> (i32, String) {
    let output = Command::new("timeout")
        .args(["20", "sh", "-c", line])
        .output()
        .expect("sh runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The exit address the origin reported, from its JSON answer.
pub fn exit_of(body: &str) -> String {
    let echo: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("not the origin's JSON ({e}): {body:?}"));
    echo["exit"].as_str().unwrap().to_owned()
}

/// One GET through the gateway's HTTP listener as `user`; the exit it left from.
pub fn exit_via_http(banner: &Banner, user: &str) -> String {
    let proxy = format!("http://{user}:{}@{}", banner.password(), banner.http());
    let (code, body) = curl(&["-x", &proxy, banner.origin()]);
    assert_eq!(code, 0, "curl through the HTTP proxy failed: {body}");
    exit_of(&body)
}

/// One GET through the gateway's SOCKS5 listener as `user`; the exit it left from.
pub fn exit_via_socks5(banner: &Banner, user: &str) -> String {
    let auth = format!("{user}:{}", banner.password());
    let (code, body) = curl(&[
        "--socks5-hostname",
        banner.socks5(),
        "--proxy-user",
        &auth,
        banner.origin(),
    ]);
    assert_eq!(code, 0, "curl through SOCKS5 failed: {body}");
    exit_of(&body)
}

/// One extraction of a proxy through `dev`'s API as its client: the answer's JSON.
pub fn extract_one(banner: &Banner) -> Value {
    let answer = api::call(
        "POST",
        &format!("{}/v1/extractions", banner.api()),
        Some(banner.token()),
        Some(r#"{"count":1}"#),
    );
    assert_eq!(answer.status, 200, "the extraction: {answer:?}");
    answer.json()
}

/// Runs `proxypool ARGS` to completion with `env`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("PROXYPOOL_TOKEN");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("the proxypool binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A free loopback port, never one this process handed out before.
pub fn free_port() -> u16 {
    proxypool_testkit::free_port()
}

/// The `[[upstreams]]` entry `sim` for `sim`'s vendor list, fetched every 2 s and checked
/// against its origin.
pub fn sim_upstream(sim: &proxypool_sim::SimVendor) -> String {
    sim_upstream_named("sim", sim)
}

/// [`sim_upstream`] under another upstream id.
pub fn sim_upstream_named(id: &str, sim: &proxypool_sim::SimVendor) -> String {
    format!(
        "[[upstreams]]\nid = \"{id}\"\nttl = \"10m\"\nmax_size = 100\n[upstreams.provider]\nkind = \"http\"\nallow_plaintext = true\nallow_private_hosts = true\nurl = \"{}\"\nformat = \"json\"\ninterval = \"2s\"\n[[upstreams.health.targets]]\nurl = \"{}\"\n",
        sim.list_url(),
        sim.origin().url("/health"),
    )
}

/// `[gateway.destinations]` letting exactly `sim`'s origin through, as `proxypool dev`
/// does: the origin listens on loopback at an ephemeral port, which the default
/// destination policy refuses. Every other internal target stays refused.
pub fn allow_sim_origin(sim: &proxypool_sim::SimVendor) -> String {
    let mut destinations = proxypool_config::gateway::Destinations::default();
    destinations.allow_origin(sim.origin().addr());
    format!(
        "[gateway.destinations]\nallow_cidrs = {:?}\nports = {}\n",
        destinations.allow_cidrs, destinations.ports
    )
}

/// A simulated vendor running on a runtime of its own (the tests themselves block).
pub fn sim_vendor(proxies: usize) -> (tokio::runtime::Runtime, proxypool_sim::SimVendor) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sim = runtime
        .block_on(proxypool_sim::SimVendor::start(proxypool_sim::SimConfig {
            proxies,
            kinds: vec![
                proxypool_sim::ProxyKind::Http,
                proxypool_sim::ProxyKind::Socks5,
            ],
            format: proxypool_sim::ListFormat::Json,
            ..proxypool_sim::SimConfig::default()
        }))
        .unwrap();
    (runtime, sim)
}

/// A GET through an HTTP proxy URL (`http://user:pass@host:port`); the exit, if answered.
pub fn try_exit_via(proxy: &str, origin: &str) -> Option<String> {
    let (code, body) = curl(&["-x", proxy, origin]);
    if code != 0 {
        return None;
    }
    let echo: Value = serde_json::from_str(&body).ok()?;
    echo["exit"].as_str().map(str::to_owned)
}

/// The admin token of the split gateways the tests start (`split::gateway_config`), so
/// their `/status` lists the cooldowns by domain; sent by [`gateway_status`].
pub const GATEWAY_ADMIN_TOKEN: &str = "gateway-admin-token-of-the-tests";

/// `admin_token = { hash = ... }` of [`GATEWAY_ADMIN_TOKEN`], for a `[gateway]` table.
pub fn gateway_admin_token_toml() -> String {
    let hash = proxypool_core::SecretHash::derive(GATEWAY_ADMIN_TOKEN, "gatewayadmin").unwrap();
    format!("admin_token = {{ hash = \"{}\" }}", hash.as_str())
}

/// `-H "Authorization: Bearer <GATEWAY_ADMIN_TOKEN>"`, as curl takes it.
pub fn gateway_admin_header() -> [String; 2] {
    [
        "-H".to_owned(),
        format!("Authorization: Bearer {GATEWAY_ADMIN_TOKEN}"),
    ]
}

/// A gateway admin listener's `/status` JSON, asked with [`GATEWAY_ADMIN_TOKEN`] (a
/// gateway without a token answers its aggregate, without the tenants' detail).
pub fn gateway_status(admin: &str) -> Option<Value> {
    let [flag, header] = gateway_admin_header();
    let (code, body) = curl(&[&flag, &header, &format!("http://{admin}/status")]);
    if code != 0 {
        return None;
    }
    serde_json::from_str(&body).ok()
}

/// How many proxies a gateway's current snapshot lists (0 when it cannot be asked).
pub fn gateway_proxies(admin: &str) -> u64 {
    gateway_status(admin)
        .and_then(|s| s["snapshot"]["proxies"].as_u64())
        .unwrap_or(0)
}
