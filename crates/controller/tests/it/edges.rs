//! The worker control API's listener under hostile connections, over real sockets and the
//! real serving path (`Controller::start_on`): an idle flood from one address does not
//! stop a client on another, idle and trickling connections are closed after the header
//! timeout, an oversize head gets 431 in the error shape, a large body is refused before
//! it is read (without a valid token at all, with one beyond the route's cap), and a body
//! still arriving after `body_read_timeout` is answered 408. Idle sockets from eight
//! addresses do not lock out a ninth (the oldest unused one makes room), and one IPv6 /64
//! counts as one address.

use crate::common::*;
use proxypool_testkit::edge::{
    OTHER_SOURCE, connect_from, http_from, idle_flood, served_within_a_second, still_open, trickle,
    upload,
};
use proxypool_testkit::flood::{
    ipv4_source, ipv6_flood_network, ipv6_network_flood_held, spread_idle_flood,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: control\r\nConnection: close\r\n\r\n";
const SIXTEEN_MIB: usize = 16 * 1024 * 1024;

async fn start() -> (proxypool_controller::RunningController, SocketAddr) {
    start_with("").await
}

/// A controller whose `[control.limits]` also hold `more_limits` (TOML lines).
async fn start_with(more_limits: &str) -> (proxypool_controller::RunningController, SocketAddr) {
    let extra = format!(
        "{}\n[control.limits]\nmax_connections = 1024\nmax_connections_per_ip = 64\n\
         header_read_timeout = \"1s\"\nkeepalive_idle = \"5s\"\n\
         max_body_bytes = 65536\n\
         {more_limits}",
        static_upstream("acme")
    );
    let (controller, _pool, _clock) = controller(parse_config(&config_text(&extra)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = controller.start_on(listener).unwrap();
    (running, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_from_one_address_does_not_stop_another() {
    let (running, addr) = start().await;
    let flood = idle_flood(addr, 2_000).await;
    assert!(
        flood.len() > 1_024,
        "the flood got {} connections",
        flood.len()
    );

    let head = served_within_a_second(OTHER_SOURCE, addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    let open = still_open(flood, HEADER_TIMEOUT + Duration::from_millis(1_500)).await;
    assert_eq!(open, 0, "idle connections outlived the header timeout");
    running.abort();
}

#[tokio::test]
async fn a_client_trickling_its_head_is_cut_off() {
    let (running, addr) = start().await;
    let (took, cut) = trickle(addr, HEALTHZ.as_bytes(), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(cut, "the trickling client was served after {took:?}");
    assert!(
        took < HEADER_TIMEOUT + Duration::from_millis(1_500),
        "{took:?}"
    );
    running.abort();
}

#[tokio::test]
async fn an_oversize_head_gets_431_in_the_error_shape() {
    let (running, addr) = start().await;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: control\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1024 * 1024)
    );
    let (head, body) = http_from(OTHER_SOURCE, addr, &request, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
    assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    running.abort();
}

fn post(path: &str, token: Option<&str>, length: usize) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST {path} HTTP/1.1\r\nHost: control\r\nContent-Type: application/json\r\n\
         {auth}Content-Length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_is_refused_before_it_is_read() {
    let (running, addr) = start().await;
    let cases = [
        // No token: 401 from the headers alone, on every route that takes a body.
        (post("/control/v1/sessions", None, SIXTEEN_MIB), "401"),
        (
            post("/control/v1/sessions", Some("wrong-token"), SIXTEEN_MIB),
            "401",
        ),
        (
            post("/control/v1/workers/gw-a/reports", None, SIXTEEN_MIB),
            "401",
        ),
        (
            post("/control/v1/workers/gw-a/snapshot-ack", None, SIXTEEN_MIB),
            "401",
        ),
        // A valid token, a body over the route's cap: 413 before reading it.
        (
            post("/control/v1/sessions", Some(WORKER_TOKEN), SIXTEEN_MIB),
            "413",
        ),
    ];
    for (head, status) in cases {
        let (sent, answer) = upload(addr, &head, SIXTEEN_MIB, Duration::from_secs(10))
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{head}: {answer}"
        );
        assert!(
            answer.contains("\"request_id\""),
            "{head}: the error shape: {answer}"
        );
        // What the client could write is what the server read plus the kernel's buffers
        // (a few MiB on loopback): far from the whole body.
        assert!(
            sent < SIXTEEN_MIB,
            "{head}: the server took all {sent} bytes"
        );
        eprintln!("{status} after the client wrote {sent} bytes");
    }
    running.abort();
}

const SPREAD_PER_IP: usize = 16;

/// A control API whose caps the spread floods fill (four addresses fill it), with
/// deadlines long enough that no flooding connection times out during the test.
async fn capped(listen: &str) -> (proxypool_controller::RunningController, SocketAddr) {
    let extra = format!(
        "{}\n[control.limits]\nmax_connections = 64\nmax_connections_per_ip = {SPREAD_PER_IP}\n\
         header_read_timeout = \"10s\"\nkeepalive_idle = \"10s\"\n",
        static_upstream("acme")
    );
    let (controller, _pool, _clock) = controller(parse_config(&config_text(&extra)));
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = controller.start_on(listener).unwrap();
    (running, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_from_eight_addresses_do_not_lock_out_a_ninth() {
    let (running, addr) = capped("127.0.0.1:0").await;
    let sources: Vec<_> = (0..8).map(ipv4_source).collect();
    let flood = spread_idle_flood(addr, &sources, SPREAD_PER_IP).await;
    assert_eq!(
        flood.len(),
        8 * SPREAD_PER_IP,
        "every flood connect completed"
    );
    let head = served_within_a_second(OTHER_SOURCE, addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(flood);
    running.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ipv6_network_counts_as_one_address() {
    let Some(()) = ipv6_flood_network() else {
        return;
    };
    let (running, addr) = capped("[::1]:0").await;
    let open = ipv6_network_flood_held(addr, 200).await;
    assert!(
        open <= SPREAD_PER_IP,
        "200 addresses of one /64 held {open} connections (cap {SPREAD_PER_IP} per network)"
    );
    let head = served_within_a_second("::1".parse().unwrap(), addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    running.abort();
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_body_trickled_past_the_deadline_gets_408() {
    const DEADLINE: Duration = Duration::from_millis(300);
    const ANSWER_WITHIN: Duration = Duration::from_secs(10);
    let (running, addr) = start_with("body_read_timeout = \"300ms\"\n").await;
    // A worker's own token: the body is read, one byte every 100 ms, for 20 s in all.
    let length = 200;
    let head = post(
        "/control/v1/workers/gw-a/reports",
        Some(WORKER_TOKEN),
        length,
    );
    let stream = connect_from(OTHER_SOURCE, addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let writing = tokio::spawn(async move {
        for _ in 0..length {
            if writer.write_all(b" ").await.is_err() {
                return;
            }
            // The stimulus: the pace of the trickle.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut took = None;
    // Until the server closes, or the whole answer is in (its Content-Length). Well before
    // the body could be whole (20 s), with room for a loaded machine.
    let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
    while !complete(&answer) {
        match tokio::time::timeout_at(deadline, reader.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {
                took.get_or_insert_with(|| started.elapsed());
                answer.extend_from_slice(&buf[..n]);
            }
            _ => break,
        }
    }
    writing.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let took = took.unwrap();
    assert!(
        took >= DEADLINE && took < ANSWER_WITHIN,
        "answered after {took:?}"
    );
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(body["error"]["code"], "body_timeout", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    running.abort();
}

/// Whether `answer` holds a whole HTTP answer with a `Content-Length`.
fn complete(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .is_some_and(|length| body.len() >= length)
}
