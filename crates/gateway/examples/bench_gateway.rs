//! A gateway for `scripts/bench-gateway.sh`: a small in-process test controller serving a
//! snapshot with one upstream proxy and one client, and the gateway pulling from it over
//! the real control API. Runs until SIGTERM / Ctrl-C.
//!
//! ```text
//! bench_gateway LISTEN_HTTP UPSTREAM_ADDR UPSTREAM_USER:PASS PROTOCOL CLIENT PASSWORD ORIGINS
//! ```
//!
//! `ORIGINS` lists the benchmark's origins (on loopback), `host:port` separated by commas:
//! the destination policy lets exactly those addresses and ports through and keeps
//! refusing every other internal target.
//!
//! `BENCH_MAX_SESSIONS` sets the proxy's `max_sessions` (default: unbounded, so the
//! throughput runs never meet the cap) and `BENCH_CAPACITY_WAIT_MS` the gateway's
//! `limits.capacity_wait` (default: the shipped default), for the full-pool measurement.
//!
//! `BENCH_ACCESS_LOG=FILE` turns the access log on, writing every line to `FILE` (the
//! cost of the log: `scripts/bench-gateway-ab.sh` with it set for one side only), and
//! `BENCH_ACCESS_LOG_FORMAT` (`json`, `squid` or `combined`; default `json`) picks its
//! format, to compare the formats' costs.
//!
//! `BENCH_HTTPS=ADDR` adds the TLS client listener on `ADDR` with the certificate
//! `BENCH_TLS_CERT` and its key `BENCH_TLS_KEY` (the TLS listener's cost per request:
//! `scripts/bench-gateway-tls.sh`). `BENCH_INSPECT_CA` and `BENCH_INSPECT_CA_KEY` (PEM
//! files) turn TLS inspection on with that CA, origins verified against the CA bundle
//! `BENCH_ORIGIN_CA` (unset: the public roots), and let the client ask for it
//! (`inspection = "allowed"`: a username with `-inspect`).
//!
//! `GATEWAY_IO_THREADS` sets `io_threads` (default: one per CPU; `0` = the client
//! connections on the multi-thread runtime, whose size `GATEWAY_WORKERS` sets).

#[path = "../tests/it/common/control.rs"]
#[allow(dead_code, unreachable_pub)]
mod control;
#[path = "../tests/it/common/wait.rs"]
#[allow(dead_code, unreachable_pub)]
mod wait;

use proxypool_config::ServerTlsConfig;
use proxypool_config::gateway::InspectionConfig;
use proxypool_core::control::{GatewayClient, Inspection, SnapshotProxy};
use proxypool_core::{
    ClientId, Credentials, Label, Protocol, ProxyId, Secret, SecretHash, UpstreamId, WorkerId,
    now_millis,
};
use proxypool_gateway::{AccessLogFormat, Gateway, GatewayConfig, shutdown_signal};
use std::net::SocketAddr;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen: SocketAddr = args[0].parse().expect("listen address");
    let upstream: SocketAddr = args[1].parse().expect("upstream address");
    let (user, pass) = args[2].split_once(':').expect("user:pass");
    let protocol = Protocol::parse(&args[3]).expect("http or socks5");
    let (client, password) = (args[4].clone(), args[5].clone());
    let origins: Vec<SocketAddr> = args[6]
        .split(',')
        .map(|origin| origin.parse().expect("origin address"))
        .collect();
    // GATEWAY_WORKERS=N: a multi-thread runtime with N workers (default: one per core).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = std::env::var("GATEWAY_WORKERS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        builder.worker_threads(workers);
    }
    let inspection = env_path("BENCH_INSPECT_CA").map(|ca_cert| InspectionConfig {
        ca_cert,
        ca_key: env_path("BENCH_INSPECT_CA_KEY")
            .expect("BENCH_INSPECT_CA_KEY with BENCH_INSPECT_CA"),
        origin_ca: env_path("BENCH_ORIGIN_CA"),
        bypass: Vec::new(),
        leaf_cache: 1024,
        leaf_validity: proxypool_config::Millis::from_secs(24 * 3600),
    });
    let runtime = builder.enable_all().build().unwrap();
    runtime.block_on(async move {
        let controller = control::TestController::start("bench-gw", 600_000).await;
        controller.publish(
            vec![SnapshotProxy {
                id: ProxyId::new(format!("{:032x}", 1)).unwrap(),
                protocol,
                host: upstream.ip().to_string(),
                port: upstream.port(),
                credentials: Some(Credentials::new(user, pass)),
                upstream: UpstreamId::new("bench").unwrap(),
                region: Some(Label::new("us").unwrap()),
                carrier: None,
                geo: Default::default(),
                max_sessions: env_number("BENCH_MAX_SESSIONS").unwrap_or(1_000_000) as u32,
                usable_until_ms: now_millis() + 86_400_000,
                lease_until_ms: now_millis() + 86_400_000,
                epoch: 1,
            }],
            vec![GatewayClient {
                id: ClientId::new(&client).unwrap(),
                project: "bench".into(),
                password_hash: SecretHash::derive(&password, "benchsalt").unwrap(),
                allowed_upstreams: vec![],
                allowed_regions: vec![],
                ip_allowlist: vec![],
                rate_limit: None,
                max_connections: 1_000_000,
                allowed_ports: None,
                ban_statuses: None,
                rotation: None,
                inspection: if inspection.is_some() {
                    Inspection::Allowed
                } else {
                    Inspection::Off
                },
                tls_names: Vec::new(),
            }],
        );
        let mut config = GatewayConfig::new(
            WorkerId::new("bench-gw").unwrap(),
            controller.url(),
            Secret::new(control::TOKEN),
        );
        config.listeners.http = Some(listen);
        if let Ok(https) = std::env::var("BENCH_HTTPS") {
            config.listeners.https = Some(https.parse().expect("BENCH_HTTPS: an address"));
            config.tls = Some(ServerTlsConfig {
                cert: env_path("BENCH_TLS_CERT").expect("BENCH_TLS_CERT with BENCH_HTTPS"),
                key: env_path("BENCH_TLS_KEY").expect("BENCH_TLS_KEY with BENCH_HTTPS"),
                client_ca: None,
                poll_interval: proxypool_config::Millis::from_secs(5),
            });
        }
        config.inspection = inspection;
        config.limits.max_connections = 100_000;
        // One load generator on one address: the per-IP cap would be the benchmark too.
        config.limits.max_connections_per_ip = 100_000;
        config.limits.tunnel_idle = proxypool_config::Millis(600_000);
        config.dial.pool_idle_per_proxy = 512;
        if let Some(threads) = env_number("GATEWAY_IO_THREADS") {
            config.io_threads = threads as usize;
        }
        if let Ok(file) = std::env::var("BENCH_ACCESS_LOG") {
            config.access_log.enabled = true;
            config.access_log.file = Some(file.into());
            config.access_log.format = match std::env::var("BENCH_ACCESS_LOG_FORMAT").as_deref() {
                Ok("squid") => AccessLogFormat::Squid,
                Ok("combined") => AccessLogFormat::Combined,
                Ok("json") | Err(_) => AccessLogFormat::Json,
                Ok(other) => {
                    panic!("BENCH_ACCESS_LOG_FORMAT: {other} is not json, squid or combined")
                }
            };
        }
        if let Some(ms) = env_number("BENCH_CAPACITY_WAIT_MS") {
            config.limits.capacity_wait = proxypool_config::Millis(ms);
        }
        for origin in origins {
            config.destinations.allow_origin(origin);
        }
        // One load generator on one address: the per-IP shield would be the benchmark.
        config.shield = None;
        let gateway = Gateway::bind(config).await.expect("gateway binds");
        eprintln!("bench gateway on {listen}");
        gateway.run(shutdown_signal()).await;
    });
}

fn env_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(name).map(Into::into)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().expect("a number"))
}
