//! The client API's listener under hostile connections, over real sockets: an idle flood
//! from one address does not stop a client on another, idle and trickling connections
//! are closed after the header timeout, an oversize head gets 431 in the error shape.

mod common;

use common::*;
use proxypool_api::ApiLimits;
use proxypool_config::Millis;
use proxypool_testkit::edge::{OTHER_SOURCE, http_from, idle_flood, still_open, trickle};
use std::time::{Duration, Instant};

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);

async fn server() -> TestServer {
    TestServer::memory(Setup {
        limits: ApiLimits {
            max_connections: 1024,
            max_connections_per_ip: 64,
            first_byte_timeout: Millis(HEADER_TIMEOUT.as_millis() as u64),
            header_read_timeout: Millis(HEADER_TIMEOUT.as_millis() as u64),
            keepalive_idle: Millis::from_secs(5),
            max_header_bytes: 16 * 1024,
            ..ApiLimits::default()
        },
        ..Setup::default()
    })
    .await
}

const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_from_one_address_does_not_stop_another() {
    let server = server().await;
    let flood = idle_flood(server.addr, 2_000).await;
    assert!(
        flood.len() > 1_024,
        "the flood got {} connections",
        flood.len()
    );

    let started = Instant::now();
    let (head, _) = http_from(OTHER_SOURCE, server.addr, HEALTHZ, Duration::from_secs(1))
        .await
        .expect("another address is served within 1 s");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    eprintln!("served in {:?} beside the flood", started.elapsed());

    let open = still_open(flood, HEADER_TIMEOUT + Duration::from_millis(1_500)).await;
    assert_eq!(open, 0, "idle connections outlived the header timeout");
}

#[tokio::test]
async fn a_client_trickling_its_head_is_cut_off() {
    let server = server().await;
    let (took, cut) = trickle(server.addr, HEALTHZ.as_bytes(), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(cut, "the trickling client was served after {took:?}");
    assert!(
        took < HEADER_TIMEOUT + Duration::from_millis(1_500),
        "{took:?}"
    );
}

#[tokio::test]
async fn an_oversize_head_gets_431_in_the_error_shape() {
    let server = server().await;
    for size in [20 * 1024, 500 * 1024, 1024 * 1024] {
        let request = format!(
            "GET /healthz HTTP/1.1\r\nHost: api\r\nX-Big: {}\r\n\r\n",
            "a".repeat(size)
        );
        let (head, body) = http_from(OTHER_SOURCE, server.addr, &request, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("{size}-byte header: {e}"));
        assert!(head.starts_with("HTTP/1.1 431"), "{size}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("16384"),
            "{body}"
        );
        assert!(
            body["request_id"].as_str().unwrap().starts_with("req-"),
            "{body}"
        );
    }
    // A head under the cap is still served.
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: api\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(8 * 1024)
    );
    let (head, _) = http_from(OTHER_SOURCE, server.addr, &request, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}
