//! The client API's listener under hostile connections, over real sockets: an idle flood
//! from one address does not stop a client on another, nor do idle sockets from eight
//! addresses (the oldest unused one makes room) or from one IPv6 /64 (counted as one
//! address), idle and trickling connections are closed after the header timeout, an
//! oversize head gets 431 in the error shape.

use crate::common::*;
use proxypool_api::ApiLimits;
use proxypool_config::Millis;
use proxypool_testkit::edge::{
    OTHER_SOURCE, http_from, idle_flood, served_within_a_second, still_open, trickle,
};
use proxypool_testkit::flood::{
    ipv4_source, ipv6_flood_network, ipv6_network_flood_held, spread_idle_flood,
};
use std::time::Duration;

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);

async fn server() -> TestServer {
    TestServer::memory(Setup {
        limits: ApiLimits {
            max_connections: 1024,
            max_connections_per_ip: 64,
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

    let head = served_within_a_second(OTHER_SOURCE, server.addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

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

/// The cap the spread floods meet: four addresses fill it.
const SPREAD_CAP: usize = 64;
const SPREAD_PER_IP: usize = 16;

/// A server whose caps the spread floods fill, with deadlines long enough that no flooding
/// connection times out during the test (a freed slot would let the client in anyway).
async fn capped_server(listen: &'static str) -> TestServer {
    TestServer::memory(Setup {
        limits: ApiLimits {
            max_connections: SPREAD_CAP,
            max_connections_per_ip: SPREAD_PER_IP,
            first_byte_timeout: Some(Millis::from_secs(10)),
            header_read_timeout: Millis::from_secs(10),
            keepalive_idle: Millis::from_secs(10),
            ..ApiLimits::default()
        },
        listen: Some(listen),
        ..Setup::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_from_eight_addresses_do_not_lock_out_a_ninth() {
    let server = capped_server("127.0.0.1:0").await;
    let sources: Vec<_> = (0..8).map(ipv4_source).collect();
    let flood = spread_idle_flood(server.addr, &sources, SPREAD_PER_IP).await;
    assert_eq!(
        flood.len(),
        8 * SPREAD_PER_IP,
        "every flood connect completed"
    );

    let head = served_within_a_second(OTHER_SOURCE, server.addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let open = still_open(flood, Duration::from_millis(300)).await;
    assert!(open < SPREAD_CAP, "{open} flood connections held the cap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ipv6_network_counts_as_one_address() {
    let Some(()) = ipv6_flood_network() else {
        return;
    };
    let server = capped_server("[::1]:0").await;
    let open = ipv6_network_flood_held(server.addr, 200).await;
    assert!(
        open <= SPREAD_PER_IP,
        "200 addresses of one /64 held {open} connections (cap {SPREAD_PER_IP} per network)"
    );
    let head = served_within_a_second("::1".parse().unwrap(), server.addr, HEALTHZ).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}
