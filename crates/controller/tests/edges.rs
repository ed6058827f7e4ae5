//! The worker control API's listener under hostile connections, over real sockets and the
//! real serving path (`Controller::start_on`): an idle flood from one address does not
//! stop a client on another, idle and trickling connections are closed after the header
//! timeout, an oversize head gets 431 in the error shape, and a large body is refused
//! before it is read: without a valid token at all, with one beyond the route's cap.

mod common;

use common::*;
use proxypool_testkit::edge::{OTHER_SOURCE, http_from, idle_flood, still_open, trickle, upload};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: control\r\nConnection: close\r\n\r\n";
const SIXTEEN_MIB: usize = 16 * 1024 * 1024;

async fn start() -> (proxypool_controller::RunningController, SocketAddr) {
    let extra = format!(
        "{}\n[control.limits]\nmax_connections = 1024\nmax_connections_per_ip = 64\n\
         first_byte_timeout = \"1s\"\nheader_read_timeout = \"1s\"\nkeepalive_idle = \"5s\"\n\
         max_body_bytes = 65536\n",
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

    let started = Instant::now();
    let (head, _) = http_from(OTHER_SOURCE, addr, HEALTHZ, Duration::from_secs(1))
        .await
        .expect("another address is served within 1 s");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    eprintln!("served in {:?} beside the flood", started.elapsed());

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
