//! The container deployment: the root `Dockerfile` and `deploy/compose/compose.yaml`.
//!
//! Without an engine: the Compose stack's configuration files pass `check-config` with its
//! secret files in place of `/run/secrets/`, every secret they name is one Compose mounts,
//! the gateways form one fleet whose port no service publishes, the balancer alone
//! publishes the proxy ports (`haproxy -c` accepts its file where HAProxy is installed),
//! and `docker-compose config` (or `docker compose config`) accepts the file and refuses a
//! broken copy.
//!
//! With a Docker Engine (`docker info` answers; skipped with a banner otherwise, even under
//! `CI=true`, since a machine without an engine cannot run containers at all): the whole
//! stack on the engine. No registry is reachable here, so the test makes its own base
//! images first: a Debian bookworm root from `debootstrap`, imported with `docker import`,
//! and from it the stand-ins of `tests/containers/` (Redis, PostgreSQL, Prometheus and
//! HAProxy from Debian's packages, and the build stage's image, see below), each tagged by
//! a hash of what it is built from so a second run skips it. Then:
//!
//! 1. the project image from the shipped Dockerfile, with `RUST_IMAGE` and `RUNTIME_IMAGE`
//!    pointing at the stand-ins (its binary under 32 MB, its user 10001, its health check
//!    `proxypool probe`). Its binary comes one of two ways, and the test logs which:
//!    - `PROXYPOOL_TEST_RELEASE_BINARY` set (`scripts/test.sh` sets it to the
//!      `target/dist/proxypool` it built once for the whole run): the Dockerfile's
//!      `PREBUILT_BINARY` installs that binary, compiling nothing, on the `prebuilt`
//!      stand-in (the base with CA certificates); the image must hold that very binary.
//!      The host is Debian bookworm like the image, so the binary runs there (the build
//!      stage runs `proxypool --version`).
//!    - unset (`cargo test` alone): the build stage compiles it, as `docker build .` does,
//!      on the `rust` stand-in (the host's toolchain and the vendored crates), a cold
//!      release build of many minutes;
//! 2. the shipped compose file plus a test override (stand-in images, a private project
//!    name, ephemeral host ports on loopback, each gateway's proxy port published too so
//!    the test can reach one gateway alone, speaking the PROXY protocol as the balancer
//!    does, Grafana left out as it has no Debian package, every proxy leasable so they can
//!    all move); two proxies extracted through the client API before the gateways start;
//! 3. traffic through each gateway (each routes its own proxies, never an extracted one),
//!    SOCKS5 through the balancer, the fleet port published nowhere, and Prometheus
//!    scraping all four servers; then sticky sessions through the balancer, every request
//!    on a fresh connection so round robin lands them on both gateways: each session keeps
//!    one exit (the gateway that does not own it relays to the one that does);
//! 4. the leader controller's container killed and one gateway's container cut off its
//!    network (`docker network disconnect`) while a client loop runs on the other gateway:
//!    no request of that loop fails; the cut-off gateway's proxies move to the other only
//!    after its cutoff passed (the last instant its leases and session let it use them), so
//!    no proxy is routed by two gateways at once. Through the balancer afterwards, the
//!    sessions the remaining gateway owned keep their exits; the cut-off one's answer
//!    `reassigned` once and keep their new exit;
//! 5. everything of the private project (containers, network, volumes) removed, even when
//!    an assertion failed (a drop guard).

use crate::common::api::Answer;
use crate::common::{Scratch, curl, eventually, poll_until, run};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The simulated vendor's proxies (compose.yaml) and how many the test extracts.
const PROXIES: usize = 24;
const EXTRACTED: usize = 2;
/// The gateway's admin listener inside its container.
const ADMIN: &str = "http://127.0.0.1:9090";
/// The origin of the simulated vendor, reached through the proxies by a `.test` name.
const ORIGIN: &str = "http://origin.test:8080/";
/// The shipped binary's size bound.
const MAX_BINARY_BYTES: u64 = 32_000_000;
/// The gateways' fleet listener inside their containers.
const FLEET_PORT: u16 = 7400;
/// The sticky sessions the stack test follows through the balancer (at least, more when
/// these few all belong to one gateway), and requests per session.
const SESSIONS: usize = 5;
const MAX_SESSIONS: usize = 16;
const SESSION_REQUESTS: usize = 6;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn compose_dir() -> PathBuf {
    repo().join("deploy/compose")
}

fn shipped(path: &str) -> String {
    let path = compose_dir().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn secret(name: &str) -> String {
    shipped(&format!("secrets/{name}")).trim_end().to_owned()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The control API's certificate files `secrets/make-control-tls.sh` makes (not shipped).
const CONTROL_TLS: [&str; 3] = ["control-ca.pem", "control.pem", "control.key"];

/// Runs the shipped `secrets/make-control-tls.sh` in `dir`, as the secrets README tells a
/// user to: the control API's CA, certificate and key. `None` (skipped) without openssl
/// outside CI.
fn make_control_tls(dir: &Path) -> Option<()> {
    let openssl = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !openssl {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "openssl is required under CI (scripts/test.sh installs it)"
        );
        eprintln!("\n*** SKIPPED: openssl is not installed (scripts/test.sh installs it) ***\n");
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let script = compose_dir().join("secrets/make-control-tls.sh");
    let output = Command::new("sh")
        .arg(&script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "make-control-tls.sh: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in CONTROL_TLS {
        assert!(
            dir.join(file).is_file(),
            "make-control-tls.sh made no {file}"
        );
    }
    assert!(!dir.join("control-ca.key").exists(), "the CA's key is kept");
    Some(())
}

/// The shipped compose file as Compose reads it: YAML with its anchors and merge keys
/// applied.
fn compose_file() -> serde_norway::Value {
    let mut compose: serde_norway::Value =
        serde_norway::from_str(&shipped("compose.yaml")).unwrap();
    // A merge may bring in another merge key (controller-2 merges controller-1, which
    // merges the common part): apply them until none is left.
    for _ in 0..4 {
        compose.apply_merge().unwrap();
    }
    assert!(
        !serde_norway::to_string(&compose).unwrap().contains("<<:"),
        "merge keys left"
    );
    compose
}

/// What one service of the compose file holds.
struct Service {
    /// (source, target) of each secret it mounts under /run/secrets/.
    secrets: Vec<(String, String)>,
    /// Its environment.
    environment: BTreeMap<String, String>,
    /// Its configuration file in `deploy/compose` (the volume mounted where
    /// `PROXYPOOL_CONFIG` names it), for proxypool's services that read one.
    config: Option<String>,
}

fn service(compose: &serde_norway::Value, name: &str) -> Service {
    let service = &compose["services"][name];
    assert!(service.is_mapping(), "no service {name}");
    let secrets = service["secrets"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|secret| match secret.as_str() {
            Some(name) => (name.to_owned(), name.to_owned()),
            None => {
                let source = secret["source"].as_str().unwrap().to_owned();
                let target = secret["target"]
                    .as_str()
                    .map_or(source.clone(), str::to_owned);
                (source, target)
            }
        })
        .collect();
    let environment: BTreeMap<String, String> = service["environment"]
        .as_mapping()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let value = match v {
                serde_norway::Value::String(s) => s.clone(),
                other => serde_norway::to_string(other).unwrap().trim().to_owned(),
            };
            (k.as_str().unwrap().to_owned(), value)
        })
        .collect();
    let config = environment.get("PROXYPOOL_CONFIG").and_then(|inside| {
        service["volumes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .find_map(|v| {
                let mut parts = v.split(':');
                let (host, container) = (parts.next()?, parts.next()?);
                (container == inside).then(|| host.trim_start_matches("./").to_owned())
            })
    });
    Service {
        secrets,
        environment,
        config,
    }
}

/// The secrets' names (targets) a service mounts.
fn held(compose: &serde_norway::Value, name: &str) -> BTreeSet<String> {
    service(compose, name)
        .secrets
        .into_iter()
        .map(|(_, target)| target)
        .collect()
}

#[test]
fn each_service_mounts_what_its_file_needs_and_the_files_check_out() {
    let compose = compose_file();
    let scratch = Scratch::new("compose-config");
    let tls = scratch.file("tls");
    let Some(()) = make_control_tls(&tls) else {
        return;
    };
    for name in [
        "migrate",
        "controller-1",
        "controller-2",
        "gateway-1",
        "gateway-2",
    ] {
        let service = service(&compose, name);
        // The service's /run/secrets/: what it mounts, nothing else.
        let run_secrets = scratch.file(&format!("{name}/run/secrets"));
        std::fs::create_dir_all(&run_secrets).unwrap();
        for (source, target) in &service.secrets {
            let declared = format!("./secrets/{source}");
            assert_eq!(
                compose["secrets"][source.as_str()]["file"].as_str(),
                Some(declared.as_str()),
                "{name} mounts {source}, which compose.yaml declares as no file of secrets/"
            );
            let content = if CONTROL_TLS.contains(&source.as_str()) {
                std::fs::read_to_string(tls.join(source)).unwrap()
            } else {
                shipped(&format!("secrets/{source}"))
            };
            std::fs::write(run_secrets.join(target), content).unwrap();
        }
        // Its file, reading its secrets where this test put them, with the environment's
        // overrides.
        let file = service
            .config
            .as_deref()
            .unwrap_or_else(|| panic!("{name} mounts no configuration file"));
        let text = shipped(file).replace("/run/secrets/", &format!("{}/", run_secrets.display()));
        let path = scratch.write(&format!("{name}.toml"), &text);
        let env: Vec<(&str, &str)> = service
            .environment
            .iter()
            .filter(|(k, _)| k.starts_with("PROXYPOOL__"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let (code, stdout, stderr) = run(&["check-config", path.to_str().unwrap()], &env);
        assert_eq!(code, 0, "{name} ({file}): {stderr}");
        assert!(stdout.contains(": OK"), "{name}: {stdout}");
    }
    // The check can fail: a gateway without the control API's CA.
    let nowhere = format!("{}/", scratch.file("nowhere").display());
    let text = shipped("config/gateway.toml").replace("/run/secrets/", &nowhere);
    let path = scratch.write("broken-gateway.toml", &text);
    let (code, _, stderr) = run(
        &["check-config", path.to_str().unwrap()],
        &[
            ("PROXYPOOL__GATEWAY__WORKER_ID", "gateway-1"),
            ("PROXYPOOL__GATEWAY__FLEET__ADVERTISE", "gateway-1:7400"),
        ],
    );
    assert_ne!(code, 0);
    assert!(stderr.contains("control-ca.pem"), "{stderr}");
    // And a gateway that would not tell its peers where to reach it: the fleet listens on
    // every address, so its advertised address cannot be guessed.
    let path = scratch.file("gateway-1.toml");
    let (code, _, stderr) = run(
        &["check-config", path.to_str().unwrap()],
        &[("PROXYPOOL__GATEWAY__WORKER_ID", "gateway-1")],
    );
    assert_ne!(code, 0, "a fleet member without advertise passed");
    assert!(stderr.contains("gateway.fleet.advertise"), "{stderr}");

    // Secrets never reach a container as an environment literal: every variable that
    // carries one names a file.
    assert!(!shipped("compose.yaml").contains("REPLACE-ME"));
    for (name, service) in compose["services"].as_mapping().unwrap() {
        for (key, _) in service["environment"].as_mapping().into_iter().flatten() {
            let key = key.as_str().unwrap();
            if key.contains("PASSWORD") || key.contains("TOKEN") {
                assert!(
                    key.ends_with("_FILE"),
                    "a secret in {name:?}'s environment: {key}"
                );
            }
        }
    }
}

#[test]
fn each_service_holds_only_the_secrets_of_its_role() {
    let compose = compose_file();
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    // A gateway: its own worker token, the admin token, the control API's CA.
    for (gateway, token) in [
        ("gateway-1", "worker-token-gateway-1"),
        ("gateway-2", "worker-token-gateway-2"),
    ] {
        assert_eq!(
            held(&compose, gateway),
            set(&["worker-token", "gateway-admin-token", "control-ca.pem"]),
            "{gateway}"
        );
        assert!(
            service(&compose, gateway)
                .secrets
                .contains(&(token.to_owned(), "worker-token".to_owned())),
            "{gateway} mounts {token}"
        );
    }
    // PostgreSQL's superuser: PostgreSQL and the migration only; the migration nothing else
    // but the runtime role's password.
    assert_eq!(
        held(&compose, "postgres"),
        set(&["postgres-superuser-password"])
    );
    assert_eq!(
        held(&compose, "migrate"),
        set(&["postgres-superuser-password", "postgres-password"])
    );
    for controller in ["controller-1", "controller-2"] {
        let secrets = held(&compose, controller);
        assert!(
            !secrets.contains("postgres-superuser-password"),
            "{controller}"
        );
        assert!(secrets.contains("control.key"), "{controller} serves TLS");
    }
    for (name, _) in compose["services"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        if !name.starts_with("controller-") {
            assert!(
                !held(&compose, name).contains("control.key"),
                "{name} holds the control API's key"
            );
        }
    }
    assert_eq!(held(&compose, "prometheus"), set(&["gateway-admin-token"]));
    // The balancer passes bytes: it holds nothing.
    assert_eq!(held(&compose, "balancer"), set(&[]));

    // The migration runs as the superuser and creates the runtime role the controllers'
    // quota URL names; the superuser is PostgreSQL's own, not that role.
    let command = compose["services"]["migrate"]["command"][0]
        .as_str()
        .unwrap();
    for part in [
        // `$$` is Compose's escape of a literal `$`: the shell runs the `cat`.
        "PROXYPOOL_PG_ADMIN=\"postgres://postgres:$$(cat /run/secrets/postgres-superuser-password)@",
        "--admin-url-env PROXYPOOL_PG_ADMIN",
        "--create-role proxypool",
        "--role-password-env PROXYPOOL_PG_PASSWORD",
    ] {
        assert!(command.contains(part), "{command} lacks {part}");
    }
    assert_eq!(
        compose["services"]["postgres"]["environment"]["POSTGRES_USER"],
        "postgres"
    );
    assert!(shipped("config/controller.toml").contains("url = \"postgres://proxypool@postgres"));
}

#[test]
fn the_gateways_reach_the_controllers_over_tls_with_a_token_each_and_guard_their_admin() {
    let compose = compose_file();
    let scratch = Scratch::new("compose-trust");
    let dir = scratch.file("run/secrets");
    let Some(()) = make_control_tls(&dir) else {
        return;
    };
    // Every secret file where both files read them.
    for entry in std::fs::read_dir(compose_dir().join("secrets")).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let load = |file: &str, role, env: &[(&str, &str)]| {
        let text = shipped(file).replace("/run/secrets/", &format!("{}/", dir.display()));
        let env = proxypool_config::Env::from_pairs(env.iter().copied());
        proxypool_config::Config::from_toml_str(&text, file, &dir, role, &env)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let controller = load(
        "config/controller.toml",
        proxypool_config::Role::Controller,
        &[],
    );
    assert!(
        controller.control.tls.is_some(),
        "the controllers serve [control.tls]"
    );
    for gateway in ["gateway-1", "gateway-2"] {
        // One token per gateway, good for that gateway's id alone.
        let service = service(&compose, gateway);
        assert_eq!(
            service
                .environment
                .get("PROXYPOOL__GATEWAY__WORKER_ID")
                .map(String::as_str),
            Some(gateway)
        );
        let (source, _) = service
            .secrets
            .iter()
            .find(|(_, target)| target == "worker-token")
            .unwrap();
        let presented = secret(source);
        // Where the gateway's file reads it.
        std::fs::write(dir.join("worker-token"), &presented).unwrap();
        let mut good: Vec<&str> = Vec::new();
        for token in &controller.worker_tokens {
            assert_eq!(
                token.workers.len(),
                1,
                "token {} is good for {:?}: one gateway id each (none = any)",
                token.name,
                token.workers
            );
            if token.token.verifier().unwrap().verify(&presented) {
                good.extend(token.workers.iter().map(|w| w.as_str()));
            }
        }
        assert_eq!(good, [gateway], "{gateway}'s token");

        let overrides: Vec<(&str, &str)> = service
            .environment
            .iter()
            .filter(|(k, _)| k.starts_with("PROXYPOOL__"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let config = load(
            "config/gateway.toml",
            proxypool_config::Role::Gateway,
            &overrides,
        );
        let section = config.gateway.unwrap();
        // A fleet member, reached by its peers at its service name on the fleet port.
        let fleet = section
            .fleet
            .as_ref()
            .expect("[gateway.fleet]: the gateways behind the balancer are one fleet");
        assert_eq!(fleet.listen.port(), FLEET_PORT, "{gateway}");
        assert_eq!(fleet.advertise, format!("{gateway}:{FLEET_PORT}"));
        let urls = section.controller_url.unwrap().0;
        assert_eq!(
            urls,
            ["https://controller-1:7070", "https://controller-2:7070"]
        );
        let ca = section
            .controller_tls
            .and_then(|t| t.ca)
            .expect("the control API's CA");
        assert!(ca.ends_with("control-ca.pem"), "{}", ca.display());
        // Prometheus reaches the admin listener over the stack's network: it needs the token.
        let admin = section.listeners.admin.unwrap();
        assert!(
            admin.ip().is_loopback() || section.admin_token.is_some(),
            "the admin listener is open on {admin}"
        );
    }
    // The certificate names both controllers and chains to the CA the gateways trust.
    for name in ["controller-1", "controller-2"] {
        let verified = Command::new("openssl")
            .args([
                "verify",
                "-CAfile",
                "control-ca.pem",
                "-verify_hostname",
                name,
                "control.pem",
            ])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            verified.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&verified.stdout)
        );
    }
    // Prometheus sends the admin token it mounts.
    let prometheus = shipped("prometheus.yml");
    assert!(
        prometheus.contains("credentials_file: /run/secrets/gateway-admin-token"),
        "{prometheus}"
    );
}

/// The `ports` a service publishes, as written.
fn published_ports(service: &serde_norway::Value) -> Vec<String> {
    service["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|port| match port.as_str() {
            Some(text) => text.to_owned(),
            None => serde_norway::to_string(port).unwrap().trim().to_owned(),
        })
        .collect()
}

/// haproxy.cfg without its comments and blank lines, each line trimmed.
fn haproxy_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split('#').next().unwrap().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn only_the_balancer_publishes_the_gateways_and_the_fleet_port_stays_inside() {
    let compose = compose_file();
    // Clients reach the gateways through the balancer alone; each gateway tells its peers
    // its own service name on the fleet port.
    for gateway in ["gateway-1", "gateway-2"] {
        let ports = published_ports(&compose["services"][gateway]);
        assert!(
            ports.is_empty(),
            "{gateway} publishes {ports:?}: clients come through the balancer"
        );
        let advertise = format!("{gateway}:{FLEET_PORT}");
        assert_eq!(
            service(&compose, gateway)
                .environment
                .get("PROXYPOOL__GATEWAY__FLEET__ADVERTISE"),
            Some(&advertise),
            "{gateway}"
        );
    }
    // No service publishes the fleet port: only the gateways dial it, on the stack's
    // network.
    for (name, service) in compose["services"].as_mapping().unwrap() {
        for port in published_ports(service) {
            let inside = port.rsplit(':').next().unwrap().split('/').next().unwrap();
            assert_ne!(
                inside,
                FLEET_PORT.to_string(),
                "{name:?} publishes the fleet port: {port}"
            );
        }
    }
    let balancer = &compose["services"]["balancer"];
    assert!(
        balancer["image"]
            .as_str()
            .is_some_and(|image| image.starts_with("haproxy:")),
        "{balancer:?}"
    );
    assert_eq!(
        published_ports(balancer),
        [
            "127.0.0.1:${PROXYPOOL_HTTP_PORT:-8080}:8080",
            "127.0.0.1:${PROXYPOOL_SOCKS5_PORT:-1080}:1080"
        ]
    );
    let volumes: Vec<&str> = balancer["volumes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(
        volumes,
        ["./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"]
    );

    // Its file: TCP, round robin, health-checked on /readyz, the client's address in a
    // PROXY header, each gateway on each proxy port, and never the fleet port.
    let cfg = shipped("haproxy.cfg");
    let lines = haproxy_lines(&cfg);
    let has = |line: &str| lines.iter().any(|l| l == line);
    for line in ["mode tcp", "option httpchk", "http-check expect status 200"] {
        assert!(has(line), "haproxy.cfg lacks {line:?}");
    }
    assert_eq!(
        lines.iter().filter(|l| *l == "balance roundrobin").count(),
        2,
        "both backends round robin"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("http-check send") && l.contains("uri /readyz")),
        "the health check asks /readyz"
    );
    let defaults = lines
        .iter()
        .find(|l| l.starts_with("default-server"))
        .expect("default-server");
    for word in [" check", "port 9090", "send-proxy-v2"] {
        assert!(defaults.contains(word), "{defaults} lacks {word}");
    }
    let servers: BTreeSet<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("server "))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = ["gateway-1", "gateway-2"]
        .iter()
        .flat_map(|g| [format!("{g}:8080"), format!("{g}:1080")])
        .collect();
    assert_eq!(servers, expected);
    assert!(
        !lines.iter().any(|l| l.contains(&format!(":{FLEET_PORT}"))),
        "the balancer reaches a fleet port"
    );
    // The gateways believe the balancer's PROXY header (from the stack's addresses).
    assert!(
        shipped("config/gateway.toml").contains("\ntrusted_proxies = ["),
        "the gateways take the PROXY header the balancer sends"
    );

    // HAProxy itself accepts the file and refuses a broken copy, where it is installed
    // (the container test runs it either way).
    let installed = Command::new("haproxy")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("\n*** SKIPPED (haproxy -c only): HAProxy is not installed ***\n");
        return;
    }
    let scratch = Scratch::new("compose-haproxy");
    let good = scratch.write("haproxy.cfg", &cfg);
    must("haproxy", &["-c", "-f", good.to_str().unwrap()], &[]);
    let broken = scratch.write(
        "broken.cfg",
        &cfg.replace("balance roundrobin", "balance round-robin"),
    );
    let (ok, stdout, stderr) = exec("haproxy", &["-c", "-f", broken.to_str().unwrap()], &[]);
    assert!(!ok, "a broken haproxy.cfg passed: {stdout}");
    assert!(stderr.contains("balance only supports"), "{stderr}");
}

/// `docker-compose` (v1) or `docker compose` (the plugin), whichever answers.
fn compose_command() -> Option<Vec<String>> {
    for candidate in [vec!["docker-compose"], vec!["docker", "compose"]] {
        let answered = Command::new(candidate[0])
            .args(&candidate[1..])
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if answered {
            return Some(candidate.into_iter().map(str::to_owned).collect());
        }
    }
    None
}

/// Runs `program args` to completion: (success, stdout, stderr).
pub(crate) fn exec(program: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Like [`exec`], failing the test with everything it printed unless it succeeds.
pub(crate) fn must(program: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let (ok, stdout, stderr) = exec(program, args, env);
    assert!(
        ok,
        "{program} {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        tail(&stdout, 60),
        tail(&stderr, 60)
    );
    stdout
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn docker_compose_accepts_the_file_and_refuses_a_broken_copy() {
    let Some(compose) = compose_command() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "docker-compose or docker compose is required under CI"
        );
        eprintln!("\n*** SKIPPED: neither docker-compose nor docker compose is installed ***\n");
        return;
    };
    let file = compose_dir().join("compose.yaml");
    let file = file.to_str().unwrap();
    let mut args: Vec<&str> = compose[1..].iter().map(String::as_str).collect();
    args.extend(["-f", file, "config"]);
    let rendered = must(&compose[0], &args, &[]);
    for service in [
        "redis:",
        "postgres:",
        "migrate:",
        "sim:",
        "controller-1:",
        "controller-2:",
        "gateway-1:",
        "gateway-2:",
        "balancer:",
        "prometheus:",
        "grafana:",
    ] {
        assert!(
            rendered.contains(&format!("\n  {service}\n")),
            "{service} {rendered}"
        );
    }
    assert!(rendered.contains("--appendonly yes --maxmemory-policy noeviction"));

    // A copy whose controllers wait for a service nobody declared is refused: the check
    // can fail.
    let scratch = Scratch::new("compose-broken");
    let broken = shipped("compose.yaml").replace(
        "      migrate: { condition: service_completed_successfully }",
        "      migrations: { condition: service_completed_successfully }",
    );
    assert_ne!(broken, shipped("compose.yaml"));
    let path = scratch.write("compose.yaml", &broken);
    let mut args: Vec<&str> = compose[1..].iter().map(String::as_str).collect();
    args.extend(["-f", path.to_str().unwrap(), "config"]);
    let (ok, stdout, stderr) = exec(&compose[0], &args, &[]);
    assert!(!ok, "a broken file passed: {stdout}");
    assert!(stderr.contains("migrations"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// The stack on the engine.

/// FNV-1a over every part: a stable content hash for image tags (not for security).
fn content_hash(parts: &[&[u8]]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

fn image_exists(tag: &str) -> bool {
    exec("docker", &["image", "inspect", tag], &[]).0
}

/// Where the test builds its contexts (kept between runs under the target directory).
fn work_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docker-test");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn log(started: Instant, what: &str) {
    eprintln!("[{:>6.1}s] {what}", started.elapsed().as_secs_f64());
}

/// The Debian bookworm base every stand-in starts from: `debootstrap` into a scratch root,
/// `docker import`ed. `None` (skipped) without debootstrap outside CI. The Debian package's
/// test (`deploy_debian`) uses it too: one test at a time makes it, so two never
/// debootstrap into the same root.
pub(crate) fn base_image(started: Instant) -> Option<String> {
    static MAKING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mirror = std::env::var("PROXYPOOL_TEST_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".to_owned());
    let args = ["--variant=minbase", "bookworm", "ROOT", mirror.as_str()];
    let tag = format!(
        "proxypool-test/debian:bookworm-{}",
        content_hash(&[args.join(" ").as_bytes()])
    );
    if image_exists(&tag) {
        log(started, &format!("base image {tag} (cached)"));
        return Some(tag);
    }
    if !crate::common::tool_or_skip("debootstrap") {
        return None;
    }
    let root = work_dir().join("rootfs");
    let _ = std::fs::remove_dir_all(&root);
    let root_str = root.to_str().unwrap();
    let args: Vec<&str> = args
        .iter()
        .map(|a| if *a == "ROOT" { root_str } else { a })
        .collect();
    log(started, &format!("debootstrap {}", args.join(" ")));
    must("debootstrap", &args, &[]);
    must(
        "sh",
        &[
            "-c",
            &format!("tar -C '{root_str}' -c . | docker import - '{tag}'"),
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(&root);
    log(started, &format!("base image {tag} imported"));
    Some(tag)
}

fn read_dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A stand-in of `tests/containers/NAME`, built from `base` (once per content hash).
pub(crate) fn stand_in(name: &str, base: &str, started: Instant) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/containers")
        .join(name);
    let files = read_dir_files(&dir);
    let mut parts: Vec<&[u8]> = vec![base.as_bytes()];
    for (file, bytes) in &files {
        parts.push(file.as_bytes());
        parts.push(bytes);
    }
    let tag = format!("proxypool-test/{name}:{}", content_hash(&parts));
    if image_exists(&tag) {
        log(started, &format!("stand-in {tag} (cached)"));
        return tag;
    }
    log(started, &format!("building stand-in {tag}"));
    build_on(base, &tag, &dir);
    tag
}

/// The Rust stand-in: the host's toolchain (without its documentation) and the
/// workspace's crates vendored, keyed by the toolchain and Cargo.lock.
fn rust_stand_in(base: &str, started: Instant) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/containers/rust");
    let dockerfile = std::fs::read(dir.join("Dockerfile")).unwrap();
    let lock = std::fs::read(repo().join("Cargo.lock")).unwrap();
    let repo_dir = repo();
    let repo_str = repo_dir.to_str().unwrap();
    let (_, version, _) = exec("rustc", &["-vV"], &[]);
    let tag = format!(
        "proxypool-test/rust:{}",
        content_hash(&[base.as_bytes(), &dockerfile, &lock, version.as_bytes()])
    );
    if image_exists(&tag) {
        log(started, &format!("stand-in {tag} (cached)"));
        return tag;
    }
    log(
        started,
        &format!("building stand-in {tag} (toolchain and vendored crates)"),
    );
    let context = work_dir().join("rust-context");
    let _ = std::fs::remove_dir_all(&context);
    std::fs::create_dir_all(context.join("toolchain")).unwrap();
    std::fs::write(context.join("Dockerfile"), &dockerfile).unwrap();
    // The toolchain rustup picks in this tree (rust-toolchain.toml).
    let mut rustc = Command::new("rustc");
    rustc.args(["--print", "sysroot"]).current_dir(&repo_dir);
    let sysroot = String::from_utf8(rustc.output().unwrap().stdout).unwrap();
    let sysroot = sysroot.trim();
    for part in ["bin", "lib", "libexec", "etc"] {
        let from = Path::new(sysroot).join(part);
        if from.exists() {
            let to = context.join("toolchain").join(part);
            let (to, from) = (to.to_str().unwrap(), from.to_str().unwrap());
            // Hard links when the target directory shares the file system, else a copy.
            if !exec("cp", &["-al", from, to], &[]).0 {
                let _ = std::fs::remove_dir_all(to);
                must("cp", &["-a", from, to], &[]);
            }
        }
    }
    let vendor = context.join("vendor");
    must(
        "cargo",
        &[
            "vendor",
            "--locked",
            "--manifest-path",
            &format!("{repo_str}/Cargo.toml"),
            vendor.to_str().unwrap(),
        ],
        &[],
    );
    std::fs::write(
        context.join("config.toml"),
        "[source.crates-io]\nreplace-with = \"vendored-sources\"\n\n[source.vendored-sources]\ndirectory = \"/usr/local/cargo/vendor\"\n",
    )
    .unwrap();
    build_on(base, &tag, &context);
    let _ = std::fs::remove_dir_all(&context);
    tag
}

/// Where the project image's binary comes from.
enum ProjectBinary {
    /// `PROXYPOOL_TEST_RELEASE_BINARY`: a release binary `scripts/build-release.sh` built
    /// on this (bookworm) host, at `in_context` in the repository, the build context.
    Prebuilt { path: PathBuf, in_context: String },
    /// Unset: the Dockerfile's build stage compiles it.
    Compiled,
}

impl ProjectBinary {
    fn from_env() -> ProjectBinary {
        let Some(path) = std::env::var_os("PROXYPOOL_TEST_RELEASE_BINARY") else {
            return ProjectBinary::Compiled;
        };
        let path = std::fs::canonicalize(&path).unwrap_or_else(|e| {
            panic!(
                "PROXYPOOL_TEST_RELEASE_BINARY={}: {e}",
                path.to_string_lossy()
            )
        });
        let repo = std::fs::canonicalize(repo()).unwrap();
        let in_context = path
            .strip_prefix(&repo)
            .unwrap_or_else(|_| {
                panic!(
                    "PROXYPOOL_TEST_RELEASE_BINARY={} is not inside the build context {} \
                     (scripts/build-release.sh target/dist puts it where .dockerignore \
                     lets it through)",
                    path.display(),
                    repo.display()
                )
            })
            .to_str()
            .unwrap()
            .to_owned();
        ProjectBinary::Prebuilt { path, in_context }
    }

    fn describe(&self) -> String {
        match self {
            ProjectBinary::Prebuilt { in_context, .. } => format!(
                "the prebuilt {in_context} (PROXYPOOL_TEST_RELEASE_BINARY), nothing compiled"
            ),
            ProjectBinary::Compiled => {
                "compiled in its build stage (PROXYPOOL_TEST_RELEASE_BINARY unset)".to_owned()
            }
        }
    }
}

/// `docker build` of the stand-in in `context` on the base image `base`, tagged `tag`.
fn build_on(base: &str, tag: &str, context: &Path) {
    must(
        "docker",
        &[
            "build",
            "-q",
            "--build-arg",
            &format!("BASE={base}"),
            "-t",
            tag,
            context.to_str().unwrap(),
        ],
        &[],
    );
}

/// The compose project of one run: every command names the shipped file and the test
/// override; dropping it takes the project down with its volumes and network.
struct Stack {
    compose: Vec<String>,
    project: String,
    files: [PathBuf; 2],
    env: Vec<(String, String)>,
}

impl Stack {
    fn command(&self, args: &[&str]) -> (bool, String, String) {
        let mut full: Vec<&str> = self.compose[1..].iter().map(String::as_str).collect();
        full.extend(["-p", &self.project]);
        for file in &self.files {
            full.extend(["-f", file.to_str().unwrap()]);
        }
        full.extend(args);
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        exec(&self.compose[0], &full, &env)
    }

    fn must(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.command(args);
        if !ok {
            let (_, logs, _) = self.command(&["logs", "--no-color", "--tail", "30"]);
            panic!(
                "compose {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}\nlogs:\n{logs}",
                tail(&stderr, 60)
            );
        }
        stdout
    }

    /// The container id of a service.
    fn container(&self, service: &str) -> String {
        let id = self.must(&["ps", "-q", service]).trim().to_owned();
        assert!(!id.is_empty(), "{service} has no container");
        id
    }

    /// `127.0.0.1:PORT` the service's `port` is published on.
    fn published(&self, service: &str, port: u16) -> String {
        let out = self.must(&["port", service, &port.to_string()]);
        let address = out.trim().to_owned();
        assert!(
            address.starts_with("127.0.0.1:"),
            "{service}:{port} -> {out}"
        );
        address
    }

    fn logs(&self, service: &str) -> String {
        self.command(&["logs", "--no-color", "--tail", "120", service])
            .1
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let (ok, _, stderr) =
            self.command(&["down", "--volumes", "--remove-orphans", "--timeout", "5"]);
        if !ok {
            eprintln!("compose down failed: {stderr}");
        }
    }
}

/// `proxypool probe URL` inside a container: the body when it answered 2xx.
fn probe_in(container: &str, url: &str) -> Option<String> {
    let (ok, stdout, _) = exec(
        "docker",
        &["exec", container, "proxypool", "probe", url],
        &[],
    );
    ok.then_some(stdout)
}

/// GET `path` of a gateway's admin listener from inside its container with the admin token
/// the gateway mounts: the body of a 200. (The image's one HTTP client, `proxypool probe`,
/// sends no token; bash's /dev/tcp carries the request.)
fn admin_get(container: &str, path: &str) -> Option<String> {
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET {path} HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\
         Authorization: Bearer %s\\r\\n\\r\\n' \"$(cat /run/secrets/gateway-admin-token)\" >&3 \
         && cat <&3"
    );
    let (ok, stdout, _) = exec("docker", &["exec", container, "bash", "-c", &script], &[]);
    let (head, body) = stdout.split_once("\r\n\r\n")?;
    (ok && head.split(' ').nth(1) == Some("200")).then(|| body.to_owned())
}

fn gateway_status(container: &str) -> Option<Value> {
    serde_json::from_str(&admin_get(container, "/status")?).ok()
}

fn snapshot_proxies(container: &str) -> u64 {
    gateway_status(container)
        .and_then(|s| s["snapshot"]["proxies"].as_u64())
        .unwrap_or(0)
}

/// Where the test's requests enter the stack: the balancer, or one gateway alone on the
/// port the test override publishes. A gateway takes the balancer's PROXY header from the
/// stack's addresses (where a published port's connections come from) and requires it
/// there, so the test sends one first when it goes around the balancer.
#[derive(Debug, Clone)]
struct Entry {
    address: String,
    password: String,
    proxy_protocol: bool,
}

/// What one GET through the stack answered.
#[derive(Debug, Clone)]
struct Through {
    /// The proxy that carried it (`X-Proxypool-Proxy`).
    proxy: String,
    /// The exit the origin saw.
    exit: String,
    /// `X-Proxypool-Session`, for a sticky session.
    session: Option<String>,
}

impl Entry {
    /// One GET of the origin as `user` (a new curl: a fresh connection), or why it failed.
    fn through(&self, user: &str) -> Result<Through, String> {
        // A 503 with Retry-After (a key whose owner just left: `fleet_unavailable`) is
        // sent again after the wait, as a real client does.
        crate::common::api::retrying(&format!("through {}", self.address), || {
            match self.through_once(user) {
                Ok(Ok(through)) => (Ok(through), None),
                Ok(Err(answer)) => {
                    let wait = answer.retry_after();
                    (
                        Err(format!(
                            "{} {}: {}",
                            answer.status, answer.head, answer.body
                        )),
                        wait,
                    )
                }
                Err(error) => (Err(error), None),
            }
        })
    }

    /// One request as `user`: what it went through, or the answer that named no proxy.
    fn through_once(&self, user: &str) -> Result<Result<Through, Answer>, String> {
        let proxy = format!("http://{user}:{}@{}", self.password, self.address);
        let mut args = vec!["-D", "-", "-x", proxy.as_str()];
        if self.proxy_protocol {
            args.push("--haproxy-protocol");
        }
        args.push(ORIGIN);
        let (code, out) = curl(&args);
        if code != 0 {
            return Err(format!("curl {code}: {out}"));
        }
        let answer = Answer::parse(&out);
        let Some(id) = answer.header("x-proxypool-proxy").map(str::to_owned) else {
            return Ok(Err(answer));
        };
        let body = answer.body.as_str();
        let echo: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))?;
        let exit = echo["exit"]
            .as_str()
            .ok_or_else(|| format!("no exit: {body}"))?;
        Ok(Ok(Through {
            proxy: id,
            exit: exit.to_owned(),
            session: answer.header("x-proxypool-session").map(str::to_owned),
        }))
    }

    /// The proxies seen over `n` requests without a session (each must succeed).
    fn routed(&self, n: usize) -> BTreeSet<String> {
        (0..n)
            .map(|_| {
                self.through("demo")
                    .unwrap_or_else(|e| panic!("through {}: {e}", self.address))
                    .proxy
            })
            .collect()
    }
}

/// The username of the test's sticky session `name`, long enough to outlive the test.
fn session_user(name: &str) -> String {
    format!("demo-session-{name}-sesstime-30")
}

/// The sum of a metric's series whose labels contain `matching`, in a Prometheus text page.
fn metric_sum(page: &str, name: &str, matching: &str) -> f64 {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let labels = series.strip_prefix(name)?;
            let whole_name = labels.is_empty() || labels.starts_with('{');
            (whole_name && labels.contains(matching)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// One request of a client loop: when it started and ended, and its outcome.
#[derive(Debug, Clone)]
struct Sample {
    start_ms: u64,
    end_ms: u64,
    outcome: Result<String, String>,
}

/// Requests through one gateway in a loop until stopped, every one recorded.
struct Traffic {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<JoinHandle<()>>,
}

impl Traffic {
    fn start(entry: Entry) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (flag, sink) = (Arc::clone(&stop), Arc::clone(&samples));
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let start_ms = now_ms();
                let outcome = entry.through("demo").map(|answer| answer.proxy);
                let end_ms = now_ms();
                sink.lock().unwrap().push(Sample {
                    start_ms,
                    end_ms,
                    outcome,
                });
                // The client's pace, not a wait for anything: a steady, bounded rate (about
                // 10 requests a second).
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Traffic {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    fn samples(&self) -> Vec<Sample> {
        self.samples.lock().unwrap().clone()
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.samples()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a controller leads, by its `/metrics` series `proxypool_controller_leader`
/// (absent or 0: it stands by); `None` when it does not answer.
fn leads(api: &str) -> Option<bool> {
    let (code, body) = curl(&[&format!("http://{api}/metrics")]);
    if code != 0 || !body.contains("# TYPE") {
        return None;
    }
    Some(
        body.lines()
            .find_map(|line| line.strip_prefix("proxypool_controller_leader "))
            .is_some_and(|value| value.trim() == "1"),
    )
}

#[test]
fn the_stack_runs_on_docker_and_keeps_serving_through_a_killed_leader_and_a_cut_off_gateway() {
    let started = Instant::now();
    if !exec("docker", &["info"], &[]).0 {
        eprintln!("\n*** SKIPPED: no Docker Engine answers `docker info` ***\n");
        return;
    }
    let compose = compose_command().expect("docker-compose or docker compose with the engine");
    let Some(base) = base_image(started) else {
        return;
    };
    let binary = ProjectBinary::from_env();
    let build_image = match &binary {
        ProjectBinary::Prebuilt { .. } => stand_in("prebuilt", &base, started),
        ProjectBinary::Compiled => rust_stand_in(&base, started),
    };
    let redis = stand_in("redis", &base, started);
    let postgres = stand_in("postgres", &base, started);
    let prometheus = stand_in("prometheus", &base, started);
    let haproxy = stand_in("haproxy", &base, started);

    // 1. The project image from the shipped Dockerfile, on the stand-ins.
    let image = "proxypool-test/proxypool:latest";
    let previous = exec("docker", &["image", "inspect", "-f", "{{.Id}}", image], &[]).1;
    log(
        started,
        &format!(
            "building the project image from the shipped Dockerfile: {}",
            binary.describe()
        ),
    );
    let mut build_args = vec![
        format!("RUST_IMAGE={build_image}"),
        format!("RUNTIME_IMAGE={base}"),
    ];
    if let ProjectBinary::Prebuilt { in_context, .. } = &binary {
        build_args.push(format!("PREBUILT_BINARY={in_context}"));
    }
    let mut args = vec!["build", "-q"];
    for arg in &build_args {
        args.extend(["--build-arg", arg.as_str()]);
    }
    let repo_dir = repo();
    args.extend(["-t", image, repo_dir.to_str().unwrap()]);
    must("docker", &args, &[]);
    let current = must("docker", &["image", "inspect", "-f", "{{.Id}}", image], &[]);
    if !previous.trim().is_empty() && previous.trim() != current.trim() {
        // The last run's image, now untagged: not kept around.
        let _ = exec("docker", &["rmi", previous.trim()], &[]);
    }
    log(started, "project image built");
    let inspect: Value = serde_json::from_str(&must("docker", &["image", "inspect", image], &[]))
        .expect("docker image inspect prints JSON");
    let config = &inspect[0]["Config"];
    assert_eq!(config["User"], "10001:10001", "{config}");
    assert_eq!(config["Entrypoint"], serde_json::json!(["proxypool"]));
    assert!(
        config["Healthcheck"]["Test"]
            .to_string()
            .contains("proxypool probe"),
        "{config}"
    );
    let size = must(
        "docker",
        &[
            "run",
            "--rm",
            "--entrypoint",
            "/bin/sh",
            image,
            "-c",
            "wc -c < /usr/local/bin/proxypool && id -u && proxypool --version",
        ],
        &[],
    );
    let mut lines = size.lines();
    let bytes: u64 = lines.next().unwrap().trim().parse().unwrap();
    assert!(bytes < MAX_BINARY_BYTES, "the binary is {bytes} bytes");
    if let ProjectBinary::Prebuilt { path, .. } = &binary {
        let prebuilt = std::fs::metadata(path).unwrap().len();
        assert_eq!(bytes, prebuilt, "the image holds {}", path.display());
    }
    assert_eq!(lines.next(), Some("10001"), "{size}");
    eprintln!("the image's binary: {bytes} bytes");

    // 2. The shipped stack, with a test override. The control API's certificate is made as
    //    the secrets README tells a user to, here in the scratch directory.
    let scratch = Scratch::new("compose-stack");
    let tls = scratch.file("tls");
    let Some(()) = make_control_tls(&tls) else {
        return;
    };
    let tls_file = |name: &str| tls.join(name).display().to_string();
    let (ca, cert, key) = (
        tls_file("control-ca.pem"),
        tls_file("control.pem"),
        tls_file("control.key"),
    );
    let fleet_log = "info,proxypool_gateway::fleet=debug,proxypool_gateway::inbound::relay=debug";
    let override_file = scratch.write(
        "test-override.yaml",
        &format!(
            r#"# The container test's changes to the shipped compose.yaml: local stand-in images,
# every proxy leasable (so a cut-off gateway's proxies can all move to the other), a
# vendor that does not rotate, and each gateway's proxy port published on loopback too, so
# the test can reach one gateway alone (it sends the PROXY header the balancer would).
services:
  redis: {{ image: "{redis}" }}
  postgres: {{ image: "{postgres}" }}
  prometheus: {{ image: "{prometheus}" }}
  balancer: {{ image: "{haproxy}" }}
  # No Debian package and no registry: Grafana is not started by the test.
  grafana: {{ profiles: ["not-in-the-container-test"] }}
  migrate: {{ image: "{image}" }}
  # No rotation: every proxy lives through the test, so each one's move can be followed.
  sim:
    image: "{image}"
    command: ["sim", "--listen", "sim", "--list-port", "8000", "--origin-port", "8080", "--proxies", "{PROXIES}", "--proxy-ttl", "0"]
  controller-1:
    image: "{image}"
    environment: {{ PROXYPOOL__OWNERSHIP__PER_WORKER_TARGET: "{PROXIES}" }}
  controller-2:
    image: "{image}"
    environment: {{ PROXYPOOL__OWNERSHIP__PER_WORKER_TARGET: "{PROXIES}" }}
  # The fleet's decisions in the log, for a failure's message.
  gateway-1:
    image: "{image}"
    ports: ["127.0.0.1:0:8080"]
    environment: {{ PROXYPOOL_LOG: "{fleet_log}" }}
  gateway-2:
    image: "{image}"
    ports: ["127.0.0.1:0:8080"]
    environment: {{ PROXYPOOL_LOG: "{fleet_log}" }}
# The control API's certificate, made for this run.
secrets:
  control-ca.pem: {{ file: "{ca}" }}
  control.pem: {{ file: "{cert}" }}
  control.key: {{ file: "{key}" }}
"#
        ),
    );
    eprintln!(
        "\n*** NOTE: Grafana is left out of the container test (no Debian package, no registry); \
its provisioning is checked by `docker-compose config` only ***\n"
    );
    // Every published port ephemeral on loopback: no clash with a stack already running.
    let env: Vec<(String, String)> = [
        "PROXYPOOL_API_PORT_1",
        "PROXYPOOL_API_PORT_2",
        "PROXYPOOL_HTTP_PORT",
        "PROXYPOOL_SOCKS5_PORT",
        "PROXYPOOL_PROMETHEUS_PORT",
        "PROXYPOOL_GRAFANA_PORT",
    ]
    .iter()
    .map(|var| ((*var).to_owned(), "0".to_owned()))
    .collect();
    let stack = Stack {
        compose,
        project: format!("proxypooltest{}", std::process::id()),
        files: [compose_dir().join("compose.yaml"), override_file],
        env,
    };

    // The controllers first (Compose starts what they depend on: Redis, PostgreSQL, the
    // migration, the vendor): with no gateway yet every proxy is unowned, so two can be
    // extracted; they must never be routed by a gateway afterwards.
    log(
        started,
        "compose up: the controllers and what they depend on",
    );
    stack.must(&["up", "-d", "controller-1", "controller-2"]);
    let apis = [
        stack.published("controller-1", 7080),
        stack.published("controller-2", 7080),
    ];
    eventually(
        "one controller leads, the other stands by",
        Duration::from_secs(60),
        || {
            let roles: Vec<Option<bool>> = apis.iter().map(|api| leads(api)).collect();
            roles.contains(&Some(true)) && roles.contains(&Some(false))
        },
    );
    let token = secret("demo-api-token");
    let mut extracted = Value::Null;
    eventually(
        "checked proxies to extract",
        Duration::from_secs(60),
        || {
            let (code, stdout, _) = run(
                &[
                    "extract",
                    "--api",
                    &format!("http://{}", apis[1]),
                    "--count",
                    &EXTRACTED.to_string(),
                    "--mode",
                    "all-or-nothing",
                    "--json",
                ],
                &[("PROXYPOOL_TOKEN", token.as_str())],
            );
            if code == 0 {
                extracted = serde_json::from_str(&stdout).unwrap();
            }
            code == 0
        },
    );
    let extracted: BTreeSet<String> = extracted["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(extracted.len(), EXTRACTED, "{extracted:?}");
    log(started, &format!("extracted {extracted:?}"));

    log(started, "compose up: everything else");
    stack.must(&["up", "-d"]);
    let gateways = [stack.container("gateway-1"), stack.container("gateway-2")];
    let half = ((PROXIES - EXTRACTED) / 2) as u64;
    eventually(
        "both gateways hold half of the proxies",
        Duration::from_secs(90),
        || gateways.iter().all(|g| snapshot_proxies(g) == half),
    );
    log(
        started,
        "both gateways serve, their snapshots pulled over TLS with a token each",
    );
    // The admin listener: /metrics and /status only to the admin token, /healthz to anyone.
    assert!(probe_in(&gateways[0], &format!("{ADMIN}/healthz")).is_some());
    assert!(probe_in(&gateways[0], &format!("{ADMIN}/status")).is_none());
    assert!(probe_in(&gateways[0], &format!("{ADMIN}/metrics")).is_none());
    assert!(admin_get(&gateways[0], "/metrics").is_some());
    // The controllers connect to PostgreSQL as the runtime role the migration made, which
    // is no superuser; only the migration used the superuser.
    let postgres = stack.container("postgres");
    let psql = |sql: &str| {
        must(
            "docker",
            &[
                "exec",
                &postgres,
                "psql",
                "-U",
                "postgres",
                "-d",
                "proxypool",
                "-tAc",
                sql,
            ],
            &[],
        )
        .trim()
        .to_owned()
    };
    assert_eq!(
        psql(
            "SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = 'proxypool'"
        ),
        "f"
    );
    assert_eq!(
        psql(
            "SELECT string_agg(DISTINCT usename, ',') FROM pg_stat_activity \
             WHERE datname = 'proxypool' AND pid <> pg_backend_pid()"
        ),
        "proxypool"
    );

    // 3. Traffic through each gateway alone: each routes its own proxies, never an
    //    extracted one (a request without a session stays on the gateway it reached).
    let password = secret("demo-gateway-password");
    let direct = |service: &str| Entry {
        address: stack.published(service, 8080),
        password: password.clone(),
        proxy_protocol: true,
    };
    let entries = [direct("gateway-1"), direct("gateway-2")];
    let balancer = Entry {
        address: stack.published("balancer", 8080),
        password: password.clone(),
        proxy_protocol: false,
    };
    let n = 3 * half as usize;
    let routed_a = entries[0].routed(n);
    let routed_b = entries[1].routed(n);
    assert_eq!(routed_a.len() as u64, half, "{routed_a:?}");
    assert_eq!(routed_b.len() as u64, half, "{routed_b:?}");
    assert!(
        routed_a.is_disjoint(&routed_b),
        "{routed_a:?} / {routed_b:?}"
    );
    assert!(routed_a.is_disjoint(&extracted) && routed_b.is_disjoint(&extracted));
    // SOCKS5 through the balancer (which sends the client's address in a PROXY header).
    let socks = stack.published("balancer", 1080);
    let (code, body) = curl(&[
        "--socks5-hostname",
        &socks,
        "--proxy-user",
        &format!("demo:{password}"),
        ORIGIN,
    ]);
    assert_eq!(code, 0, "SOCKS5: {body}");
    assert!(body.contains("\"exit\""), "{body}");

    // Prometheus scrapes all four servers with the shipped scrape configuration.
    let prometheus_api = stack.published("prometheus", 9090);
    eventually(
        "Prometheus scrapes both controllers and both gateways",
        Duration::from_secs(60),
        || {
            let (code, body) = curl(&[&format!("http://{prometheus_api}/api/v1/targets")]);
            let Ok(targets) = serde_json::from_str::<Value>(&body) else {
                return false;
            };
            let up: BTreeMap<String, String> = targets["data"]["activeTargets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    (
                        t["labels"]["instance"].as_str().unwrap_or("").to_owned(),
                        t["health"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            code == 0 && up.len() == 4 && up.values().all(|h| h == "up")
        },
    );
    let (_, rules) = curl(&[&format!("http://{prometheus_api}/api/v1/rules")]);
    let rules: Value = serde_json::from_str(&rules).unwrap();
    assert_eq!(rules["status"], "success", "{rules}");
    let shipped_rules = std::fs::read_dir(repo().join("deploy/prometheus/rules"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yml"))
        })
        .count();
    let groups = rules["data"]["groups"].as_array().map_or(0, Vec::len);
    assert!(
        shipped_rules == 0 || groups > 0,
        "{shipped_rules} rule files, {groups} groups loaded"
    );
    log(
        started,
        "traffic through both gateways, Prometheus scraping",
    );
    // The fleet port is published nowhere, not even by the test's override.
    for gateway in &gateways {
        let ports = must("docker", &["port", gateway], &[]);
        assert!(
            !ports.contains(&format!("{FLEET_PORT}/")),
            "the fleet port is published: {ports}"
        );
    }

    // Sticky sessions through the balancer. Each request is a new connection, so round
    // robin sends a session's requests to both gateways in turn: the one that does not own
    // the session relays them to the one that does, and the session keeps one exit. Its
    // proxy says which gateway owns it (each routes only its own).
    let metrics = |gateway: &str| admin_get(gateway, "/metrics").unwrap_or_default();
    eventually(
        "both gateways see a fleet of two",
        Duration::from_secs(60),
        || {
            gateways
                .iter()
                .all(|g| metric_sum(&metrics(g), "proxypool_gateway_fleet_members", "") == 2.0)
        },
    );
    let relayed_before: f64 = gateways
        .iter()
        .map(|g| metric_sum(&metrics(g), "proxypool_gateway_fleet_relayed_total", ""))
        .sum();
    let owned_by = |sessions: &BTreeMap<String, Through>, routed: &BTreeSet<String>| {
        sessions
            .values()
            .filter(|s| routed.contains(&s.proxy))
            .count()
    };
    let mut sessions: BTreeMap<String, Through> = BTreeMap::new();
    for i in 0..MAX_SESSIONS {
        if i >= SESSIONS && owned_by(&sessions, &routed_a) > 0 && owned_by(&sessions, &routed_b) > 0
        {
            break;
        }
        let name = format!("fleet{i}");
        let user = session_user(&name);
        let answers: Vec<Through> = (0..SESSION_REQUESTS)
            .map(|_| {
                balancer
                    .through(&user)
                    .unwrap_or_else(|e| panic!("session {name} through the balancer: {e}"))
            })
            .collect();
        let first = &answers[0];
        // `new`, or `reassigned` when the key's owner in a list the gateways still remember
        // (one from before both had joined) was another gateway: the owner cannot tell a
        // key that moved without a session from one that moved with it.
        assert!(
            matches!(first.session.as_deref(), Some("new" | "reassigned")),
            "{name}: {answers:?}"
        );
        for answer in &answers[1..] {
            assert_eq!(
                (&answer.proxy, &answer.exit, answer.session.as_deref()),
                (&first.proxy, &first.exit, Some("pinned")),
                "session {name} changed its exit behind the balancer: {answers:?}\n\
                 gateway-1's log:\n{}\ngateway-2's log:\n{}",
                stack.logs("gateway-1"),
                stack.logs("gateway-2")
            );
        }
        assert!(
            routed_a.contains(&first.proxy) || routed_b.contains(&first.proxy),
            "session {name} on {}, neither gateway's",
            first.proxy
        );
        sessions.insert(name, first.clone());
    }
    let (owned_a, owned_b) = (
        owned_by(&sessions, &routed_a),
        owned_by(&sessions, &routed_b),
    );
    assert!(
        owned_a > 0 && owned_b > 0,
        "{} sessions, {owned_a} owned by gateway-1 and {owned_b} by gateway-2",
        sessions.len()
    );
    // Each session's requests reached both gateways: the one that did not own it relayed.
    let relayed: f64 = gateways
        .iter()
        .map(|g| {
            metric_sum(
                &metrics(g),
                "proxypool_gateway_fleet_relayed_total",
                "outcome=\"ok\"",
            )
        })
        .sum();
    assert!(
        relayed - relayed_before >= sessions.len() as f64,
        "{} relayed requests for {} sessions",
        relayed - relayed_before,
        sessions.len()
    );
    log(
        started,
        &format!(
            "{} sessions x {SESSION_REQUESTS} requests through the balancer kept their exits \
             ({owned_a} owned by gateway-1, {owned_b} by gateway-2, {} requests relayed)",
            sessions.len(),
            relayed - relayed_before
        ),
    );

    // 4. The leader's container killed, gateway-1's cut off its network, while a client
    //    loop runs through gateway-2.
    let leader = (0..2)
        .find(|&i| leads(&apis[i]) == Some(true))
        .expect("a leader");
    let leader_service = format!("controller-{}", leader + 1);
    let leader_container = stack.container(&leader_service);
    let network = format!("{}_default", stack.project);
    let traffic = Traffic::start(entries[1].clone());
    // A few answered requests before anything happens.
    eventually("the client loop runs", Duration::from_secs(10), || {
        traffic
            .samples()
            .iter()
            .filter(|s| s.outcome.is_ok())
            .count()
            >= 5
    });
    let before_cut_at = now_ms();
    let before_cut = gateway_status(&gateways[0]).expect("gateway-1's status");
    assert!(before_cut["ready"].as_bool().unwrap(), "{before_cut}");
    let killed_at = now_ms();
    must("docker", &["kill", &leader_container], &[]);
    must(
        "docker",
        &["network", "disconnect", &network, &gateways[0]],
        &[],
    );
    let cut_at = now_ms();
    log(
        started,
        &format!("killed the leader {leader_service}, cut gateway-1 off the network"),
    );

    // Gateway-1's own view while cut off: its cutoff (the lease ends it knows of, bounded
    // by its session's end) no longer moves, and it stops being ready once it passed.
    // Gateway-2 gets every proxy.
    let mut cutoff_a = 0;
    let mut a_not_ready_at = None;
    eventually(
        "gateway-1 stops and gateway-2 holds every proxy",
        Duration::from_secs(150),
        || {
            if let Some(status) = gateway_status(&gateways[0]) {
                if let Some(end) = status["leases"]["cutoff_ms"].as_u64() {
                    cutoff_a = cutoff_a.max(end);
                }
                if status["ready"] == false && a_not_ready_at.is_none() {
                    a_not_ready_at = Some(now_ms());
                }
            }
            a_not_ready_at.is_some() && snapshot_proxies(&gateways[1]) == 2 * half
        },
    );
    log(started, "gateway-1 stopped, gateway-2 holds every proxy");
    // Requests after the move use gateway-1's former proxies too.
    let moved_seen = |samples: &[Sample]| {
        samples
            .iter()
            .filter_map(|s| s.outcome.as_ref().ok())
            .filter(|id| routed_a.contains(*id))
            .collect::<BTreeSet<_>>()
            .len()
    };
    // (Polled without failing here: a failed request below says more than a timeout.)
    poll_until(Duration::from_secs(30), || {
        let samples = traffic.samples();
        (moved_seen(&samples) as u64 == half || samples.iter().any(|s| s.outcome.is_err()))
            .then_some(())
    });
    let samples = traffic.finish();

    let failed: Vec<&Sample> = samples.iter().filter(|s| s.outcome.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests through gateway-2 failed across the kill and the cut: {failed:#?}\n{}",
        failed.len(),
        samples.len(),
        stack.logs("gateway-2")
    );
    let b_routed: BTreeSet<&String> = samples
        .iter()
        .filter_map(|s| s.outcome.as_ref().ok())
        .collect();
    assert_eq!(
        moved_seen(&samples) as u64,
        half,
        "gateway-2 routed {} proxies, of them {} of gateway-1's {routed_a:?}: {b_routed:?}\n\
         gateway-2's status: {}\ngateway-2's metrics:\n{}\ngateway-2's log:\n{}",
        b_routed.len(),
        moved_seen(&samples),
        gateway_status(&gateways[1]).map_or_else(|| "none".to_owned(), |s| s.to_string()),
        admin_get(&gateways[1], "/metrics")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("proxypool_gateway_")
                && (l.contains("failure")
                    || l.contains("closed")
                    || l.contains("refusals")
                    || l.contains("misses")
                    || l.contains("proxies")))
            .collect::<Vec<_>>()
            .join("\n"),
        stack.logs("gateway-2")
    );
    let a_status = gateway_status(&gateways[0]).expect("gateway-1 answers inside its container");
    assert_eq!(a_status["ready"], false, "{a_status}");
    assert!(
        cutoff_a > before_cut_at,
        "gateway-1 was ready just before the cut, so its cutoff was still ahead: {before_cut}"
    );
    // No proxy of gateway-1 was routed by gateway-2 before gateway-1's cutoff passed:
    // never by two gateways at once.
    let first_move = samples
        .iter()
        .filter(|s| s.outcome.as_ref().is_ok_and(|id| routed_a.contains(id)))
        .map(|s| s.start_ms)
        .min()
        .expect("gateway-2 routed gateway-1's former proxies");
    assert!(
        first_move > cutoff_a,
        "gateway-2 used a proxy of gateway-1 at {first_move}, before gateway-1's cutoff {cutoff_a}"
    );
    assert!(
        samples
            .iter()
            .filter_map(|s| s.outcome.as_ref().ok())
            .all(|id| !extracted.contains(id)),
        "an extracted proxy was routed"
    );
    let answered = samples.len();
    let spanning = samples.last().unwrap().end_ms - samples[0].start_ms;
    eprintln!(
        "{answered} requests through gateway-2 over {spanning} ms, none failed; leader killed at \
{killed_at}, gateway-1's cutoff passed {} ms after the cut, its proxies first routed by \
gateway-2 {} ms after that; gateway-1 seen not ready {} ms after the cut",
        cutoff_a.saturating_sub(cut_at),
        first_move - cutoff_a,
        a_not_ready_at.unwrap().saturating_sub(cut_at)
    );

    // Sessions across the cut, through the balancer (which dropped gateway-1 with its
    // health). Those gateway-2 owned first: they keep their exits. Then gateway-1's: they
    // moved to gateway-2 and say so once (`reassigned`), then keep their new exit. The
    // first of them may still be relayed to gateway-1 (gateway-2 learns the new member
    // list within a report interval): a new hop fails and the request is served by the
    // next owner, gateway-2; a request written on a kept-alive hop that gateway-1 never
    // answers is given up after one failed handshake and answered 503 with Retry-After,
    // which the client sends again (`Balancer::through`), to gateway-2.
    let fleet_state = |gateway: &str| {
        metrics(gateway)
            .lines()
            .filter(|l| l.starts_with("proxypool_gateway_fleet_") && !l.contains("_bucket"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (survivors, moved): (Vec<_>, Vec<_>) = sessions
        .iter()
        .partition(|(_, before)| routed_b.contains(&before.proxy));
    for (name, before) in survivors.into_iter().chain(moved) {
        let user = session_user(name);
        let owned_by_survivor = routed_b.contains(&before.proxy);
        let first = balancer.through(&user).unwrap_or_else(|e| {
            panic!(
                "session {name} (owned by gateway-{}) after the cut: {e}\n\
                 gateway-2's fleet metrics:\n{}\ngateway-2's log:\n{}",
                if owned_by_survivor { 2 } else { 1 },
                fleet_state(&gateways[1]),
                stack.logs("gateway-2")
            )
        });
        if owned_by_survivor {
            assert_eq!(
                (&first.proxy, &first.exit, first.session.as_deref()),
                (&before.proxy, &before.exit, Some("pinned")),
                "session {name}, owned by the gateway that stayed, lost its exit"
            );
        } else {
            assert_eq!(
                first.session.as_deref(),
                Some("reassigned"),
                "session {name}, owned by the cut-off gateway: {first:?}\n{}",
                stack.logs("gateway-2")
            );
        }
        for _ in 1..3 {
            let next = balancer
                .through(&user)
                .unwrap_or_else(|e| panic!("session {name} after the cut: {e}"));
            assert_eq!(
                (&next.proxy, &next.exit, next.session.as_deref()),
                (&first.proxy, &first.exit, Some("pinned")),
                "session {name} after the cut"
            );
        }
    }
    log(
        started,
        &format!(
            "after the cut: gateway-2's {owned_b} sessions kept their exits, gateway-1's \
             {owned_a} were reassigned once and kept their new ones"
        ),
    );
    log(started, "done; tearing the stack down");
    drop(stack);
    log(started, "stack removed");
}
