//! Shared test kit: a running gateway, snapshot records, and `curl` as the client.
#![allow(unreachable_pub)]

pub mod alone;
pub mod control;
pub mod fleet;
pub mod inspection;
pub mod upstreams;
pub mod wait;

use alone::GatewayPermit;
pub use alone::alone;
use control::{TOKEN, TestController};
pub use proxypool_config::Millis;
use proxypool_core::control::{GatewayClient, RateLimitSpec, SnapshotProxy};
use proxypool_core::{
    ClientId, Credentials, Label, PortSet, Protocol, ProxyId, Secret, SecretHash, SharedClock,
    SystemClock, UpstreamId, WorkerId, now_millis,
};
use proxypool_gateway::{
    DestinationPolicy, Destinations, Gateway, GatewayConfig, GatewayReload, ProxyResolution,
};
pub use proxypool_testkit::eventually_async;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
pub use wait::eventually;

pub const WORKER: &str = "gw-test";
pub const PASSWORD: &str = "client-secret";

/// A gateway config on free loopback ports for the test controller, whose destination
/// policy lets the tests' own origins through ([`allow_loopback_origins`]).
pub fn config(controller: &TestController) -> GatewayConfig {
    let mut config = strict_config(controller);
    allow_loopback_origins(&mut config);
    config
}

/// The origins of these tests (plain, TLS, echo) listen on 127.0.0.1 at ephemeral ports,
/// which the default destination policy refuses: allow exactly that one address, on any
/// port. Every other internal range (the rest of 127/8, `::1`, private, link-local, ...)
/// stays refused.
pub fn allow_loopback_origins(config: &mut GatewayConfig) {
    config.destinations = DestinationPolicy::new(&Destinations {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        deny_cidrs: Vec::new(),
        ports: PortSet::Any,
    });
}

/// The admin token [`with_operator_token`] sets and [`admin_json`] presents.
pub const OPERATOR_TOKEN: &str = "gateway-operator-token-0123456789";

/// Sets [`OPERATOR_TOKEN`] as the admin token, for a test that reads the tenants' detail
/// of `/status` (without a token it shows only the aggregate).
pub fn with_operator_token(config: &mut GatewayConfig) {
    config.admin_token = Some(SecretHash::derive(OPERATOR_TOKEN, "operator").unwrap());
}

/// [`config`] with the default destination policy: loopback origins are refused.
pub fn strict_config(controller: &TestController) -> GatewayConfig {
    let mut config = GatewayConfig::new(
        WorkerId::new(WORKER).unwrap(),
        controller.url(),
        Secret::new(TOKEN),
    );
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    config.listeners.http = Some(any);
    config.listeners.socks5 = Some(any);
    config.listeners.admin = Some(any);
    config.control.initial_backoff = Millis(50);
    config.control.max_backoff = Millis(200);
    config.control.request_timeout = Millis(2_000);
    config.dial.connect_timeout = Millis(1_000);
    config.dial.handshake_timeout = Millis(2_000);
    config.shutdown_grace = Duration::from_millis(2_000);
    // Connections on more than one I/O thread however many CPUs the machine has, so
    // admission, timeouts and pooling are tested across threads.
    config.io_threads = config.io_threads.max(2);
    config
}

/// A gateway running on its own task until stopped.
#[derive(Debug)]
pub struct Running {
    pub http: SocketAddr,
    pub socks5: SocketAddr,
    pub admin: SocketAddr,
    /// Applies reloaded settings to this gateway.
    pub reload: GatewayReload,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Its share of the process, beside the other tests' gateways (none for a lone test).
    _permit: Option<GatewayPermit>,
}

impl Running {
    pub async fn start(config: GatewayConfig) -> Self {
        Self::start_with_clock(config, SystemClock::shared()).await
    }

    /// A gateway on `clock` (a [`proxypool_core::ManualClock`] moves its time by hand).
    pub async fn start_with_clock(config: GatewayConfig, clock: SharedClock) -> Self {
        Self::start_with(config, clock, ProxyResolution::default()).await
    }

    /// A gateway on `clock` that resolves its proxies' names as `resolution` says.
    pub async fn start_with(
        config: GatewayConfig,
        clock: SharedClock,
        resolution: ProxyResolution,
    ) -> Self {
        let permit = alone::gateway_permit().await;
        let gateway = Gateway::bind_with(config, clock, resolution)
            .await
            .expect("gateway binds");
        let http = gateway.http_addr().unwrap();
        let socks5 = gateway.socks5_addr().unwrap();
        let admin = gateway.admin_addr().unwrap();
        let reload = gateway.reloader();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(gateway.run(async move {
            let _ = stopped.await;
        }));
        Self {
            http,
            socks5,
            admin,
            reload,
            stop: Some(stop),
            task: Some(task),
            _permit: permit,
        }
    }

    /// Graceful shutdown; waits for it to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("gateway shuts down in time")
                .unwrap();
        }
    }
}

/// A client with the test password.
pub fn client(id: &str) -> GatewayClient {
    GatewayClient {
        id: ClientId::new(id).unwrap(),
        project: "proj".into(),
        password_hash: SecretHash::derive(PASSWORD, "testsalt").unwrap(),
        allowed_upstreams: Vec::new(),
        allowed_regions: Vec::new(),
        ip_allowlist: Vec::new(),
        rate_limit: None,
        max_connections: 100,
        allowed_ports: None,
        ban_statuses: None,
        rotation: None,
        inspection: Default::default(),
        tls_names: Vec::new(),
    }
}

pub fn limited_client(id: &str, rps: f64, burst: f64, lockout_ms: u64) -> GatewayClient {
    GatewayClient {
        rate_limit: Some(RateLimitSpec {
            id: None,
            requests_per_second: rps,
            burst,
            hard_lockout_ms: Some(lockout_ms),
            max_soft_violations: Some(2),
        }),
        ..client(id)
    }
}

/// A snapshot record for an upstream proxy listening at `addr`.
pub fn proxy(
    n: u8,
    protocol: Protocol,
    addr: SocketAddr,
    credentials: Option<(&str, &str)>,
    upstream: &str,
    region: &str,
) -> SnapshotProxy {
    SnapshotProxy {
        id: ProxyId::new(format!("{n:032x}")).unwrap(),
        protocol,
        host: addr.ip().to_string(),
        port: addr.port(),
        credentials: credentials.map(|(u, p)| Credentials::new(u, p)),
        upstream: UpstreamId::new(upstream).unwrap(),
        region: Some(Label::new(region).unwrap()),
        carrier: None,
        geo: Default::default(),
        max_sessions: 1_000,
        usable_until_ms: now_millis() + 3_600_000,
        lease_until_ms: now_millis() + 3_600_000,
        epoch: 1,
    }
}

/// What curl saw.
#[derive(Debug)]
pub struct Curl {
    /// curl's exit code.
    pub exit: i32,
    /// The final response status (0 when none).
    pub status: u16,
    /// Response headers of the final response, lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Curl {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Runs `curl` with `args`, capturing status, headers (of the last response) and body.
pub async fn curl(args: &[&str]) -> Curl {
    upstreams::ensure_tools();
    let headers_file = tempfile_path("headers");
    let output = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "-D", &headers_file, "-o", "-"])
        .args(args)
        .output()
        .await
        .expect("curl runs");
    let raw_headers = std::fs::read_to_string(&headers_file).unwrap_or_default();
    let _ = std::fs::remove_file(&headers_file);
    // With a proxy CONNECT, curl writes the proxy's response first; keep the last block.
    let last_block = raw_headers
        .split("\r\n\r\n")
        .filter(|b| b.starts_with("HTTP/"))
        .last()
        .unwrap_or_default();
    let mut lines = last_block.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Curl {
        exit: output.status.code().unwrap_or(-1),
        status,
        headers,
        body: String::from_utf8_lossy(&output.stdout).into_owned(),
    }
}

/// Every proxy response block (for CONNECT: the proxy's own answer).
pub async fn curl_all_headers(args: &[&str]) -> (i32, String) {
    let headers_file = tempfile_path("allheaders");
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-D",
            &headers_file,
            "-o",
            "/dev/null",
        ])
        .args(args)
        .output()
        .await
        .expect("curl runs");
    let raw = std::fs::read_to_string(&headers_file).unwrap_or_default();
    let _ = std::fs::remove_file(&headers_file);
    (output.status.code().unwrap_or(-1), raw)
}

fn tempfile_path(tag: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir()
        .join(format!(
            "gw-test-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
        .display()
        .to_string()
}

/// `http://user:pass@addr` for curl's `-x`.
pub fn http_proxy_url(user: &str, addr: SocketAddr) -> String {
    format!("http://{user}:{PASSWORD}@{addr}")
}

pub fn socks_proxy_url(user: &str, addr: SocketAddr) -> String {
    format!("socks5h://{user}:{PASSWORD}@{addr}")
}

/// Waits until the gateway applied and acknowledged snapshot `version`.
pub async fn acked(controller: &Arc<TestController>, version: u64) {
    let state = Arc::clone(&controller.state);
    eventually(Duration::from_secs(10), "snapshot ack", || {
        state
            .lock()
            .unwrap()
            .acks
            .iter()
            .any(|a| a.snapshot.version >= version)
    })
    .await;
}

/// `proxy` with its lease ending at `lease_until_ms` (wall clock).
pub fn leased_until(mut proxy: SnapshotProxy, lease_until_ms: u64) -> SnapshotProxy {
    proxy.lease_until_ms = lease_until_ms;
    proxy
}

/// An admin route's status and JSON body.
pub async fn admin_json(gateway: &Running, path: &str) -> (u16, serde_json::Value) {
    let bearer = format!("Authorization: Bearer {OPERATOR_TOKEN}");
    let response = curl(&["-H", &bearer, &format!("http://{}{path}", gateway.admin)]).await;
    let body = serde_json::from_str(&response.body)
        .unwrap_or_else(|e| panic!("{path} answers JSON ({e}): {}", response.body));
    (response.status, body)
}

/// Waits until the gateway holds exactly `n` client connections (as its `/status` counts
/// them): it has accepted the ones a test opened, and closed the ones the test closed.
pub async fn holds_connections(gateway: &Running, n: u64) {
    let what = format!("{n} open client connections");
    eventually_async(&what, Duration::from_secs(5), async || {
        let (_, status) = admin_json(gateway, "/status").await;
        (status["open_connections"] == n).then_some(())
    })
    .await;
}

/// The value of one series on the admin `/metrics` (its full name with labels).
pub async fn metric(gateway: &Running, series: &str) -> Option<f64> {
    let bearer = format!("Authorization: Bearer {OPERATOR_TOKEN}");
    let text = curl(&["-H", &bearer, &format!("http://{}/metrics", gateway.admin)])
        .await
        .body;
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The reply a SOCKS5 CONNECT to `target` as `user` gets (`Succeeded` when it went through).
pub async fn socks_reply(
    gateway: &Running,
    user: &str,
    target: SocketAddr,
) -> proxypool_proto::socks5::Reply {
    use proxypool_proto::socks5::Reply;
    let mut stream = tokio::net::TcpStream::connect(gateway.socks5)
        .await
        .unwrap();
    let target = proxypool_proto::TargetAddr::from(target);
    match proxypool_proto::socks5::connect(&mut stream, &target, Some((user, PASSWORD))).await {
        Ok(_) => Reply::Succeeded,
        Err(proxypool_proto::ProtoError::SocksRejected { reply }) => reply,
        Err(other) => panic!("SOCKS5 exchange failed: {other}"),
    }
}

/// CONNECT to `target` as `alice` over `stream`, a fresh connection to the gateway's HTTP
/// listener (callers dial it their own way, e.g. with small socket buffers).
pub async fn connect_as_alice(
    mut stream: tokio::net::TcpStream,
    target: SocketAddr,
) -> tokio::net::TcpStream {
    proxypool_proto::http_connect::connect(
        &mut stream,
        &target.to_string(),
        Some(("alice", PASSWORD)),
    )
    .await
    .expect("CONNECT through the gateway");
    stream
}

/// A SOCKS5 CONNECT to `target` as `alice` over `stream`, a fresh connection to the
/// gateway's SOCKS5 listener.
pub async fn socks_as_alice(
    mut stream: tokio::net::TcpStream,
    target: SocketAddr,
) -> tokio::net::TcpStream {
    proxypool_proto::socks5::connect(
        &mut stream,
        &proxypool_proto::TargetAddr::from(target),
        Some(("alice", PASSWORD)),
    )
    .await
    .expect("SOCKS5 through the gateway");
    stream
}
