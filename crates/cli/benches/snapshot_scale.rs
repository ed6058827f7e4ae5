//! A gateway's snapshot at 1,000, 10,000 and 100,000 proxies: what the controller pays to
//! issue it, what it weighs on the wire, and what the gateway pays to apply and hold it.
//!
//! For each size, one controller (MemoryPool, no background loops: one ownership round is
//! run by hand) leases every proxy to one worker, then
//! - a probe session of that worker long-polls the snapshot over the real control API:
//!   the time to the whole answer is the controller's issue cost (the store read, the
//!   build, the JSON) plus the loopback transfer, and its body is the bytes on the wire;
//! - a real `proxypool gateway` process registers as the same worker (fencing the probe)
//!   and is timed from its start to its admin `/status` listing every proxy (start +
//!   register + issue + transfer + apply); its CPU time and resident memory are read from
//!   `/proc/<pid>` once it serves, and the memory per proxy is the difference between the
//!   largest and the smallest pool over the difference in proxies (what it retains of the
//!   answer's buffers counts: that is what a gateway costs);
//! - a long-poll that waits while nothing changes is timed for its CPU per second (the
//!   bench process's threads, `/proc/self/task/*/schedstat`) and counted for its store
//!   calls per second (every call the controller makes goes through its metered store and
//!   is counted in `proxypool_controller_store_duration_seconds_count`): each
//!   `[snapshot] poll_interval` (1 s) it looks for changes made elsewhere;
//! - plain-HTTP GETs through the gateway, each on the next proxy of the rotation (every
//!   proxy is a distinct loopback address of one open simulated upstream), timed for the
//!   gateway's CPU per request: the pick must cost the same at every pool size;
//! - one change at a time (a cooldown set on one proxy, one lease renewed), each served
//!   whole (`after_version=0`: a whole read and the whole snapshot, what every change cost
//!   before deltas) and as a delta (the version the caller holds: only what the store's
//!   change journal names is read and sent), for the CPU per change and the bytes on the
//!   wire (a second table);
//! - the CPU time of the process (user + system, `/proc/self/stat`) over each step is
//!   printed beside the wall time: on a shared machine it is the steadier number.
//!
//! Run: `cargo bench -p proxypool --bench snapshot_scale`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use proxypool_config::{Config, Env, Role};
use proxypool_controller::{AlwaysLeader, Controller, OpenedStore, SystemClock};
use proxypool_core::{
    Candidate, CheckOutcome, Credentials, FetchedBatch, HealthBatch, HealthObservation,
    HealthStore, Protocol, SecretHash, Upserter, UpstreamId, WorkerId, now_millis,
};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const WORKER: &str = "bench-gw";
const TOKEN: &str = "bench-worker-token-0123456789abcdef";
/// How long the idle long-poll waits.
const WAIT_MS: u64 = 4_000;

/// The gateway client the per-request measurement authenticates as.
const CLIENT_BASIC: &str = "Basic YmVuY2g6YmVuY2gtcGFzc3dvcmQ="; // bench:bench-password
/// Requests timed per size: fewer than the smallest pool, so with round-robin rotation no
/// proxy is used twice (a reused upstream connection would make small pools look cheaper).
const REQUESTS: usize = 900;
const WARM_UP: usize = 20;

fn config(proxies: usize) -> Config {
    let hash = SecretHash::derive(TOKEN, "benchsalt").unwrap();
    let password = SecretHash::derive("bench-password", "benchsalt").unwrap();
    let text = format!(
        r#"
[snapshot]
max_proxies = 100000
long_poll_wait = "5s"
# The probe session sends no reports: it must outlive the per-change measurements.
session_ttl = "10m"
report_interval = "5s"

[ownership]
# No renewals run (no background loops): the leases must outlive the measurements.
lease = "10m"
renew_before = "1m"
per_worker_target = {proxies}
assign_batch = {proxies}

[[worker_tokens]]
name = "bench"
token = {{ hash = "{hash}" }}

[[clients]]
id = "bench"
project = "bench"
gateway_password = {{ hash = "{password}" }}

[[upstreams]]
id = "bench"
ttl = "10m"
max_size = 200000
[upstreams.provider]
kind = "static"
proxies = ["127.0.0.1:1"]
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"
"#,
        hash = hash.as_str(),
        password = password.as_str(),
    );
    Config::from_toml_str(
        &text,
        "bench.toml",
        Path::new("."),
        Role::Controller,
        &Env::default(),
    )
    .unwrap()
}

/// `n` AVAILABLE proxies with credentials and a region, as a vendor list would give. Each
/// has its own loopback address (127.a.b.c) on `port`, where one open simulated upstream
/// listens on every address, so every proxy can be dialed.
async fn seed(pool: &MemoryPool, n: usize, port: u16) {
    let now = now_millis();
    let candidates: Vec<Candidate> = (0..n)
        .map(|i| {
            let mut c = Candidate::new(
                Protocol::Http,
                format!("127.{}.{}.{}", 1 + i / 65_536, (i / 256) % 256, i % 256),
                port,
            );
            c.credentials = Some(Credentials::new(
                format!("user-{i}"),
                format!("pass-{i:08}"),
            ));
            c.region = Some(["us", "de", "jp", "br"][i % 4].parse().unwrap());
            c
        })
        .collect();
    pool.upsert(
        now,
        FetchedBatch {
            upstream: UpstreamId::new("bench").unwrap(),
            operation_id: None,
            ttl_ms: 600_000,
            safety_margin_ms: 10_000,
            max_size: 200_000,
            default_max_sessions: 16,
            candidates,
        },
    )
    .await
    .unwrap();
    let due = pool
        .due_for_check(
            now,
            proxypool_core::DueQuery {
                limit: n,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap();
    for chunk in due.chunks(10_000) {
        pool.apply_health(
            now,
            HealthBatch {
                observations: chunk
                    .iter()
                    .map(|r| HealthObservation {
                        proxy_id: r.id.clone(),
                        checked_at_ms: now,
                        outcome: CheckOutcome::Success { latency_ms: 5 },
                    })
                    .collect(),
                unhealthy_after_failures: 3,
            },
        )
        .await
        .unwrap();
    }
}

/// One HTTP/1.1 exchange with the control API: (status, body).
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<String>) -> (u16, Bytes) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {TOKEN}"));
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

/// User + system CPU time of this process (the controller's side).
fn cpu() -> Duration {
    process_cpu(std::process::id())
}

/// Store calls the controller made so far (all calls, every port method).
fn store_calls() -> u64 {
    let handle = proxypool_metrics::install().expect("the controller installed the recorder");
    handle
        .render()
        .lines()
        .filter(|line| line.starts_with("proxypool_controller_store_duration_seconds_count{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn gateway_proxies(admin: SocketAddr) -> u64 {
    // Not listening yet while the process starts.
    if tokio::net::TcpStream::connect(admin).await.is_err() {
        return 0;
    }
    let (status, body) = call(admin, "GET", "/status", None).await;
    if status != 200 {
        return 0;
    }
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    status["snapshot"]["proxies"].as_u64().unwrap_or(0)
}

/// What every size shares: the origin and the one simulated upstream behind every proxy.
struct Bench {
    origin: proxypool_sim::Origin,
    upstream: proxypool_sim::UpstreamProxy,
}

async fn measure(bench: &Bench, proxies: usize) {
    let config = config(proxies);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let controller = Controller::with_store(
        config,
        OpenedStore {
            pool: pool.clone(),
            leadership: Arc::new(AlwaysLeader::new()),
        },
        Arc::new(SystemClock),
    );
    seed(&pool, proxies, bench.upstream.addr().port()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control = listener.local_addr().unwrap();
    let router = controller.control_router();
    let limits = proxypool_controller::serve_limits(&controller.config().control.limits);
    tokio::spawn(async move {
        let service = proxypool_edge::TowerToHyperService::new(router);
        let _ = proxypool_edge::serve(listener, service, limits, std::future::pending()).await;
    });

    // The probe session, and one ownership round leasing everything to the worker.
    let worker = WorkerId::new(WORKER).unwrap();
    let session = "0123456789abcdef0123456789abcdef";
    let register = serde_json::json!({
        "worker": WORKER,
        "session_id": session,
        "protocol": proxypool_snapshot::CONTROL_PROTOCOL,
    })
    .to_string();
    let (status, _) = call(control, "POST", "/control/v1/sessions", Some(register)).await;
    assert_eq!(status, 200);
    let round = controller.ownership_manager().round().await.unwrap();
    assert_eq!(round.assigned as usize, proxies);
    let path = format!(
        "{}?session_id={session}&after_version=0&wait_ms=0&protocol={}",
        proxypool_core::control::snapshot_path(&worker),
        proxypool_snapshot::CONTROL_PROTOCOL
    );
    let (started, cpu0) = (Instant::now(), cpu());
    let (status, body) = call(control, "GET", &path, None).await;
    let (issue, issue_cpu) = (started.elapsed(), cpu() - cpu0);
    assert_eq!(status, 200);
    let version = update_version(&body);

    // One change at a time (a cooldown set, a lease renewed), each served whole (as every
    // change was before deltas: a whole read and the whole snapshot) and as a delta.
    let changes = per_change(&pool, control, session, version, proxies).await;
    let version = changes.version;

    // A long-poll that waits while nothing changes: it re-reads the store every
    // `poll_interval` (1 s) for changes made elsewhere. CPU per second of waiting.
    let waiting = format!(
        "{}?session_id={session}&after_version={version}&wait_ms={WAIT_MS}&protocol={}",
        proxypool_core::control::snapshot_path(&worker),
        proxypool_snapshot::CONTROL_PROTOCOL
    );
    let (started, cpu0, calls0) = (
        Instant::now(),
        process_cpu_ns(std::process::id()),
        store_calls(),
    );
    let (status, _) = call(control, "GET", &waiting, None).await;
    assert_eq!(status, 204);
    let waited = started.elapsed().as_secs_f64();
    let idle_cpu_per_s = (process_cpu_ns(std::process::id()) - cpu0) as f64 / 1e9 / waited;
    let idle_calls_per_s = (store_calls() - calls0) as f64 / waited;

    // A real gateway process registers as the same worker (fencing the probe).
    let started = Instant::now();
    let gateway = start_gateway(control, proxies, bench.origin.addr());
    let admin = gateway.admin;
    while gateway_proxies(admin).await != proxies as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "gateway applied"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let to_serving = started.elapsed();
    let (gateway_cpu, gateway_rss) = (
        process_cpu(gateway.child.id()),
        process_rss(gateway.child.id()),
    );
    let per_request = gateway_cpu_per_request(&gateway, &bench.origin).await;
    let applied = gateway_apply_costs(&pool, &gateway, proxies, bench.upstream.addr().port()).await;
    CHANGES.lock().unwrap().push(applied);
    println!(
        "| {proxies} | {:.1} | {:.0} | {:.2} | {idle_calls_per_s:.2} | {:.1} | {:.0} | {:.1} | {} | {:.1} | {per_request:.1} |",
        issue.as_secs_f64() * 1e3,
        issue_cpu.as_secs_f64() * 1e3,
        idle_cpu_per_s * 1e3,
        to_serving.as_secs_f64() * 1e3,
        gateway_cpu.as_secs_f64() * 1e3,
        body.len() as f64 / 1e6,
        body.len() / proxies,
        gateway_rss as f64 / 1e6,
    );
    drop(gateway);
    RESULTS.lock().unwrap().push((proxies, gateway_rss));
    CHANGES.lock().unwrap().extend(changes.rows);
}

static RESULTS: std::sync::Mutex<Vec<(usize, u64)>> = std::sync::Mutex::new(Vec::new());
static CHANGES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The gateway's applied snapshot version, from its `/metrics` (which, unlike `/status`,
/// does no work per proxy, so polling it costs the gateway little).
async fn gateway_version(admin: SocketAddr) -> u64 {
    let (_, body) = call(admin, "GET", "/metrics", None).await;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| {
            line.strip_prefix("proxypool_gateway_snapshot_version ")?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The gateway's CPU per delta it applies: a cooldown set (patched into one proxy's slot)
/// and a proxy added (a new view), medians over `CHANGES_PER_KIND` each. Each change is
/// made in the store; the gateway's waiting long-poll finds it within `poll_interval`
/// (1 s), so each window also holds up to a second of the idle gateway (its timers).
async fn gateway_apply_costs(
    pool: &MemoryPool,
    gateway: &GatewayProcess,
    proxies: usize,
    port: u16,
) -> String {
    use proxypool_core::{
        CooldownChange, CooldownStore, Domain, DomainCooldown, OwnershipRepository,
    };
    let worker = WorkerId::new(WORKER).unwrap();
    let owned = pool.owned_by(now_millis(), &worker, proxies).await.unwrap();
    let mut medians = Vec::new();
    for kind in ["cooldown set", "proxy added"] {
        let mut spent = Vec::new();
        for round in 0..CHANGES_PER_KIND {
            let before = gateway_version(gateway.admin).await;
            let cpu0 = process_cpu_ns(gateway.child.id());
            let now = now_millis();
            if kind == "cooldown set" {
                let entry = DomainCooldown {
                    proxy_id: owned[(round * 7_919) % owned.len()].record.id.clone(),
                    domain: Domain::of_host("example.org").unwrap(),
                    project: None,
                    until_ms: now + 60_000,
                    strikes: 1,
                    forget_at_ms: now + 120_000,
                };
                pool.apply_cooldowns(now, &[CooldownChange::Set(entry)])
                    .await
                    .unwrap();
            } else {
                let host = format!("127.254.{}.{}", round / 250, 1 + round % 250);
                let id = proxypool_core::proxy_id_for(Protocol::Http, &host, port, None);
                let mut candidate = Candidate::new(Protocol::Http, host, port);
                candidate.region = Some("us".parse().unwrap());
                pool.upsert(
                    now,
                    FetchedBatch {
                        upstream: UpstreamId::new("bench").unwrap(),
                        operation_id: None,
                        ttl_ms: 600_000,
                        safety_margin_ms: 10_000,
                        max_size: 200_000,
                        default_max_sessions: 16,
                        candidates: vec![candidate],
                    },
                )
                .await
                .unwrap();
                pool.apply_health(
                    now,
                    HealthBatch {
                        observations: vec![HealthObservation {
                            proxy_id: id.clone(),
                            checked_at_ms: now,
                            outcome: CheckOutcome::Success { latency_ms: 5 },
                        }],
                        unhealthy_after_failures: 3,
                    },
                )
                .await
                .unwrap();
                pool.assign(now, &id, &worker, 300_000).await.unwrap();
            }
            let started = Instant::now();
            while gateway_version(gateway.admin).await <= before {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "gateway applied"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            spent.push(process_cpu_ns(gateway.child.id()) - cpu0);
        }
        spent.sort();
        medians.push(spent[spent.len() / 2] as f64 / 1e6);
    }
    // The same polling for a second without any change: what each window holds besides
    // the apply (the gateway finds a change within `poll_interval`, 1 s).
    let cpu0 = process_cpu_ns(gateway.child.id());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(1) {
        gateway_version(gateway.admin).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let idle = (process_cpu_ns(gateway.child.id()) - cpu0) as f64 / 1e6;
    format!(
        "| {proxies} | gateway CPU ms per applied delta, median (each window holds up to 1 s of polling the gateway's /metrics every 20 ms, {idle:.2} ms per second alone): cooldown set {:.2}, proxy added {:.2} | | | | | | |",
        medians[0], medians[1]
    )
}

/// The version a long-poll's answer (whole or delta) brings.
fn update_version(body: &[u8]) -> u64 {
    let update: serde_json::Value = serde_json::from_slice(body).unwrap();
    let inner = update.get("full").or_else(|| update.get("delta")).unwrap();
    inner["reference"]["version"].as_u64().unwrap()
}

/// Changes measured per kind and way of serving them.
const CHANGES_PER_KIND: usize = 10;

struct PerChange {
    /// The session's version after the last change.
    version: u64,
    /// Table rows: proxies, change, whole CPU ms and bytes, delta CPU ms and bytes, ratios.
    rows: Vec<String>,
}

/// For each kind of change, `CHANGES_PER_KIND` changes served whole (`after_version=0`:
/// the controller reads the worker's every proxy and sends all of it) and as many served as
/// deltas (the version the caller holds: the controller reads what the change journal
/// names and sends that): the bench process's CPU per change (the controller, plus the
/// loopback client receiving the bytes; the answer is not parsed inside the window) and
/// the bytes on the wire, medians.
async fn per_change(
    pool: &MemoryPool,
    control: SocketAddr,
    session: &str,
    mut version: u64,
    proxies: usize,
) -> PerChange {
    use proxypool_core::{
        CooldownChange, CooldownStore, Domain, DomainCooldown, OwnershipRepository,
    };
    let worker = WorkerId::new(WORKER).unwrap();
    let owned = pool.owned_by(now_millis(), &worker, proxies).await.unwrap();
    let snapshot_path = proxypool_core::control::snapshot_path(&worker);
    let mut rows = Vec::new();
    let mut next = 0usize;
    for kind in ["cooldown set", "lease renewed"] {
        let mut measured = [Vec::new(), Vec::new()];
        for round in 0..2 * CHANGES_PER_KIND {
            let whole = round % 2 == 0;
            let owned = &owned[next % owned.len()];
            next += 7_919;
            let now = now_millis();
            match kind {
                "cooldown set" => {
                    let entry = DomainCooldown {
                        proxy_id: owned.record.id.clone(),
                        domain: Domain::of_host("example.com").unwrap(),
                        project: None,
                        until_ms: now + 60_000,
                        strikes: 1,
                        forget_at_ms: now + 120_000,
                    };
                    pool.apply_cooldowns(now, &[CooldownChange::Set(entry)])
                        .await
                        .unwrap();
                }
                _ => {
                    pool.renew(
                        now,
                        &owned.record.id,
                        &worker,
                        owned.assignment.epoch,
                        30_000 + round as u64,
                    )
                    .await
                    .unwrap();
                }
            }
            let after = if whole { 0 } else { version };
            let path = format!(
                "{snapshot_path}?session_id={session}&after_version={after}&wait_ms=0&protocol={}",
                proxypool_snapshot::CONTROL_PROTOCOL
            );
            let cpu0 = process_cpu_ns(std::process::id());
            let (status, body) = call(control, "GET", &path, None).await;
            let spent = process_cpu_ns(std::process::id()) - cpu0;
            assert_eq!(status, 200);
            assert_eq!(body.starts_with(b"{\"delta\""), !whole, "served as asked");
            version = update_version(&body);
            measured[usize::from(!whole)].push((spent, body.len()));
        }
        let median = |m: &mut Vec<(u64, usize)>| {
            m.sort();
            let cpu = m[m.len() / 2].0 as f64 / 1e6;
            let mut bytes: Vec<usize> = m.iter().map(|(_, b)| *b).collect();
            bytes.sort();
            (cpu, bytes[bytes.len() / 2])
        };
        let (whole_cpu, whole_bytes) = median(&mut measured[0]);
        let (delta_cpu, delta_bytes) = median(&mut measured[1]);
        rows.push(format!(
            "| {proxies} | {kind} | {whole_cpu:.2} | {whole_bytes} | {delta_cpu:.3} | {delta_bytes} | {:.0}× | {:.0}× |",
            whole_cpu / delta_cpu,
            whole_bytes as f64 / delta_bytes as f64,
        ));
    }
    PerChange { version, rows }
}

/// A `proxypool gateway` process of the worker, and its listeners.
struct GatewayProcess {
    child: std::process::Child,
    http: SocketAddr,
    admin: SocketAddr,
}

/// The gateway's CPU time (ns resolution, `/proc/<pid>/task/*/schedstat`) per plain-HTTP
/// GET through it, over one kept-alive client connection, each request on the next proxy
/// of the round-robin rotation.
async fn gateway_cpu_per_request(gateway: &GatewayProcess, origin: &proxypool_sim::Origin) -> f64 {
    let stream = tokio::net::TcpStream::connect(gateway.http).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let url = origin.url("/");
    let mut start = 0;
    for i in 0..WARM_UP + REQUESTS {
        if i == WARM_UP {
            // Start counting once the connection and the code paths are warm.
            start = process_cpu_ns(gateway.child.id());
        }
        let request = Request::builder()
            .uri(url.as_str())
            .header("host", origin.addr().to_string())
            .header("proxy-authorization", CLIENT_BASIC)
            .body(Full::new(Bytes::new()))
            .unwrap();
        sender
            .ready()
            .await
            .expect("the gateway keeps the connection");
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(
            response.status(),
            200,
            "through the gateway: {:?}",
            response.headers().get("x-proxypool-error")
        );
        response.into_body().collect().await.unwrap();
    }
    (process_cpu_ns(gateway.child.id()) - start) as f64 / REQUESTS as f64 / 1e3
}

/// CPU time of every thread of process `pid`, in nanoseconds.
fn process_cpu_ns(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|task| {
            let path = task.ok()?.path().join("schedstat");
            let text = std::fs::read_to_string(path).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_gateway(control: SocketAddr, proxies: usize, origin: SocketAddr) -> GatewayProcess {
    let mut destinations = proxypool_config::gateway::Destinations::default();
    destinations.allow_origin(origin);
    let (http, admin) = (free_port(), free_port());
    let file = std::env::temp_dir().join(format!(
        "snapshot-scale-{}-{proxies}.toml",
        std::process::id()
    ));
    std::fs::write(
        &file,
        format!(
            "[gateway]\nworker_id = \"{WORKER}\"\ncontroller_url = \"http://{control}\"\n\
             worker_token = {{ env = \"BENCH_WORKER_TOKEN\" }}\n[gateway.listeners]\n\
             http = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
             [gateway.destinations]\nallow_cidrs = {:?}\nports = {}\n",
            destinations.allow_cidrs, destinations.ports
        ),
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_proxypool"))
        .args(["gateway", "--config", file.to_str().unwrap()])
        .env("BENCH_WORKER_TOKEN", TOKEN)
        .env("PROXYPOOL_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    GatewayProcess {
        child,
        http: SocketAddr::from(([127, 0, 0, 1], http)),
        admin: SocketAddr::from(([127, 0, 0, 1], admin)),
    }
}

/// User + system CPU time of process `pid`.
fn process_cpu(pid: u32) -> Duration {
    proxypool_testkit::cpu::cpu_time(&pid.to_string()).expect("the process's /proc/<pid>/stat")
}

/// Resident memory of process `pid`, in bytes.
fn process_rss(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
    statm
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 4096
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| proxies | issue ms | issue CPU ms | idle long-poll CPU ms per s | idle long-poll store calls per s | gateway start → serving ms | gateway CPU ms | snapshot MB | bytes/proxy on the wire | gateway RSS MB | gateway CPU µs per request |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let bench = runtime.block_on(async {
        Bench {
            origin: proxypool_sim::Origin::start().await.unwrap(),
            upstream: proxypool_sim::UpstreamProxy::start(proxypool_sim::UpstreamProxyConfig {
                listen_ip: std::net::Ipv4Addr::UNSPECIFIED,
                exit_ip: std::net::Ipv4Addr::LOCALHOST,
                credentials: None,
                ..proxypool_sim::UpstreamProxyConfig::default()
            })
            .await
            .unwrap(),
        }
    });
    for proxies in SIZES {
        runtime.block_on(measure(&bench, proxies));
    }
    println!();
    println!(
        "| proxies | change | whole: CPU ms | whole: bytes | delta: CPU ms | delta: bytes | CPU ratio | bytes ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in CHANGES.lock().unwrap().iter() {
        println!("{row}");
    }
    let results = RESULTS.lock().unwrap();
    let (small, large) = (results[0], results[results.len() - 1]);
    println!(
        "gateway memory per proxy (RSS at {} minus at {}, per proxy): {} bytes",
        large.0,
        small.0,
        (large.1 - small.1) / (large.0 - small.0) as u64
    );
}
