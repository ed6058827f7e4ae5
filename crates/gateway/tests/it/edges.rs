//! The gateway's listeners (HTTP proxy, SOCKS5, admin) under hostile connections, over
//! real sockets: an idle flood from one address does not stop a client on another (the
//! per-IP cap is taken at accept, before the global cap, so the flood cannot hold every
//! connection), idle and trickling connections are closed after the header timeout, and
//! the admin listener answers an oversize head with 431 in the JSON error shape and
//! refuses a `/readyz` flood from one address through the per-IP shield. Idle sockets from
//! eight addresses do not lock out a ninth on either proxy listener (the oldest unused one
//! makes room), one IPv6 /64 counts as one address, and a connection that sends nothing is
//! closed at the first-byte deadline, well before the head's.

use crate::common::control::TestController;
use crate::common::*;
use proxypool_testkit::edge::{
    OTHER_SOURCE, connect_from, http_from, idle_flood, served_within_a_second, still_open, trickle,
};
use proxypool_testkit::flood::{
    ipv4_source, ipv6_flood_network, ipv6_network_flood_held, spread_idle_flood,
};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
/// Long enough that no flooding connection times out before the flood is complete (a
/// freed slot would let the other address in even without the per-IP cap).
const FLOOD_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const FLOOD: usize = 2_000;

async fn start() -> (Arc<TestController>, Running) {
    start_with(HEADER_TIMEOUT).await
}

async fn start_with(header_timeout: Duration) -> (Arc<TestController>, Running) {
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut config = config(&controller);
    // Fewer global connections than the flood opens: only the per-IP cap keeps room for
    // everyone else.
    config.limits.max_connections = 1_500;
    config.limits.max_connections_per_ip = 64;
    config.limits.admin_max_connections = 64;
    config.limits.header_read_timeout = Millis(header_timeout.as_millis() as u64);
    config.limits.keepalive_idle = Millis::from_secs(5);
    let running = Running::start(config).await;
    (controller, running)
}

/// Any HTTP answer from the other address within 1 s.
async fn http_served(addr: SocketAddr, request: &str) {
    http_served_from(OTHER_SOURCE, addr, request).await;
}

/// The SOCKS5 method negotiation from the other address within 1 s.
async fn socks_served(addr: SocketAddr) {
    socks_served_from(OTHER_SOURCE, addr).await;
}

async fn flood_then(addr: SocketAddr, served: impl std::future::Future<Output = ()>) {
    let started = Instant::now();
    let flood = idle_flood(addr, FLOOD).await;
    assert!(
        flood.len() > 1_500,
        "the flood got {} connections",
        flood.len()
    );
    let flooded = started.elapsed();
    eprintln!("flood took {flooded:?}");
    assert!(flooded < FLOOD_HEADER_TIMEOUT, "the flood took {flooded:?}");
    served.await;
    let open = still_open(flood, FLOOD_HEADER_TIMEOUT + Duration::from_millis(1_500)).await;
    assert_eq!(open, 0, "idle connections outlived the header timeout");
}

const PROXY_GET: &str =
    "GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n";
const ADMIN_GET: &str = "GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_on_the_http_listener_does_not_stop_another_address() {
    let (_controller, gateway) = start_with(FLOOD_HEADER_TIMEOUT).await;
    flood_then(gateway.http, http_served(gateway.http, PROXY_GET)).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_on_the_socks5_listener_does_not_stop_another_address() {
    let (_controller, gateway) = start_with(FLOOD_HEADER_TIMEOUT).await;
    flood_then(gateway.socks5, socks_served(gateway.socks5)).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_on_the_admin_listener_does_not_stop_another_address() {
    let (_controller, gateway) = start_with(FLOOD_HEADER_TIMEOUT).await;
    flood_then(gateway.admin, http_served(gateway.admin, ADMIN_GET)).await;
    gateway.shutdown().await;
}

#[tokio::test]
async fn trickling_clients_are_cut_off_on_every_listener() {
    let (_controller, gateway) = start().await;
    let socks_hello = [
        5u8, 1, 2, 1, 5, b'u', b's', b'e', b'r', b'1', 4, b'p', b'a', b's', b's',
    ];
    let cases: [(&str, SocketAddr, &[u8]); 3] = [
        ("http", gateway.http, PROXY_GET.as_bytes()),
        ("socks5", gateway.socks5, &socks_hello),
        ("admin", gateway.admin, ADMIN_GET.as_bytes()),
    ];
    for (name, addr, request) in cases {
        let (took, cut) = trickle(addr, request, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(
            cut,
            "{name}: the trickling client was served after {took:?}"
        );
        assert!(
            took < HEADER_TIMEOUT + Duration::from_millis(1_500),
            "{name}: {took:?}"
        );
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_admin_listener_answers_an_oversize_head_with_json() {
    let (_controller, gateway) = start().await;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: admin\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1024 * 1024)
    );
    let (head, body) = http_from(
        OTHER_SOURCE,
        gateway.admin,
        &request,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
    assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
    gateway.shutdown().await;
}

/// `n` GETs of `path` on the admin listener over one kept-alive connection; their statuses.
async fn admin_statuses(gateway: &Running, path: &str, n: usize) -> Vec<u16> {
    let url = format!("http://{}{path}", gateway.admin);
    let output = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "20", "-w", "%{http_code}\\n"])
        .args(std::iter::repeat_n(["-o", "/dev/null", url.as_str()], n).flatten())
        .output()
        .await
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readyz_flood_on_the_admin_listener_is_refused_by_the_shield() {
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut config = config(&controller);
    config.shield = Some(proxypool_throttle::Policy::new(5.0, 10.0));
    let gateway = Running::start(config).await;
    let statuses = admin_statuses(&gateway, "/readyz", 50).await;
    assert_eq!(statuses.len(), 50, "{statuses:?}");
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert!(refused >= 30, "only {refused} of 50 refused: {statuses:?}");
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 503 | 429)),
        "{statuses:?}"
    );
    // Liveness is not charged.
    let health = admin_statuses(&gateway, "/healthz", 50).await;
    assert!(health.iter().all(|s| *s == 200), "{health:?}");
    gateway.shutdown().await;
}

const SPREAD_PER_IP: usize = 16;

/// A gateway on `listen` whose connection cap the spread floods fill (four addresses fill
/// it), with deadlines long enough that no flooding connection times out during the test.
async fn capped(listen: &str) -> (Arc<TestController>, Running) {
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut config = config(&controller);
    let listen: SocketAddr = listen.parse().unwrap();
    config.listeners.http = Some(listen);
    config.listeners.socks5 = Some(listen);
    config.limits.max_connections = 64;
    config.limits.max_connections_per_ip = SPREAD_PER_IP;
    config.limits.first_byte_timeout = Some(Millis::from_secs(10));
    config.limits.header_read_timeout = Millis::from_secs(10);
    let running = Running::start(config).await;
    (controller, running)
}

/// An HTTP answer to `request` from `source` within 1 s.
async fn http_served_from(source: IpAddr, addr: SocketAddr, request: &str) {
    let head = served_within_a_second(source, addr, request).await;
    assert!(head.starts_with("HTTP/1.1 "), "{head}");
}

/// The SOCKS5 method negotiation from `source` within 1 s.
async fn socks_served_from(source: IpAddr, addr: SocketAddr) {
    let served = async {
        let mut stream = connect_from(source, addr).await.unwrap();
        stream.write_all(&[5, 1, 2]).await.unwrap();
        let mut reply = [0u8; 2];
        stream.read_exact(&mut reply).await.unwrap();
        reply
    };
    let reply = tokio::time::timeout(Duration::from_secs(1), served)
        .await
        .expect("another address is served within 1 s");
    assert_eq!(reply, [5, 2], "username/password selected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_from_eight_addresses_do_not_lock_out_a_ninth_on_either_proxy_listener() {
    let (_controller, gateway) = capped("127.0.0.1:0").await;
    let sources: Vec<_> = (0..8).map(ipv4_source).collect();
    // Both listeners share one cap: flood one, be served on each.
    let flood = spread_idle_flood(gateway.http, &sources, SPREAD_PER_IP).await;
    assert_eq!(
        flood.len(),
        8 * SPREAD_PER_IP,
        "every flood connect completed"
    );
    http_served_from(OTHER_SOURCE, gateway.http, PROXY_GET).await;
    let flood_socks = spread_idle_flood(gateway.socks5, &sources, SPREAD_PER_IP).await;
    assert_eq!(flood_socks.len(), 8 * SPREAD_PER_IP);
    socks_served_from(OTHER_SOURCE, gateway.socks5).await;
    drop((flood, flood_socks));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ipv6_network_counts_as_one_address_on_both_proxy_listeners() {
    let Some(()) = ipv6_flood_network() else {
        return;
    };
    let (_controller, gateway) = capped("[::1]:0").await;
    let local: IpAddr = "::1".parse().unwrap();
    for addr in [gateway.http, gateway.socks5] {
        let open = ipv6_network_flood_held(addr, 200).await;
        assert!(
            open <= SPREAD_PER_IP,
            "{addr}: 200 addresses of one /64 held {open} connections (cap {SPREAD_PER_IP})"
        );
    }
    http_served_from(local, gateway.http, PROXY_GET).await;
    socks_served_from(local, gateway.socks5).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_first_byte_deadline() {
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut config = config(&controller);
    config.limits.first_byte_timeout = Some(Millis(300));
    config.limits.header_read_timeout = Millis::from_secs(10);
    let gateway = Running::start(config).await;
    for addr in [gateway.http, gateway.socks5] {
        let silent = connect_from(OTHER_SOURCE, addr).await.unwrap();
        let started = Instant::now();
        let open = still_open(vec![silent], Duration::from_secs(5)).await;
        assert_eq!(open, 0, "{addr}: a silent connection outlived 5 s");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{addr}: closed after {:?}, not at the first-byte deadline",
            started.elapsed()
        );
    }
    gateway.shutdown().await;
}
