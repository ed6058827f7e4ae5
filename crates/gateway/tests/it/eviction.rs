//! The global connection cap's eviction under attack, over real sockets: while idle
//! connections from eight other addresses fill the cap (each address under its per-IP
//! cap), a legitimate client with its SOCKS5 greeting sent or half an HTTP request head
//! sent is never the one closed to make room, and completes its request. A kept-alive HTTP
//! connection that has begun its next head is not closed for a newcomer either while
//! every other connection holds a tunnel (the newcomer is refused), and once it sits idle
//! again with nothing of a head read, it is the one that makes room.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, echo_server, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_proto::http_connect::basic_auth_value;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use proxypool_testkit::edge::{OTHER_SOURCE, connect_from};
use proxypool_testkit::flood::{ipv4_source, spread_idle_flood};
use proxypool_testkit::server_side::{server_closed, server_has_read};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CAP: usize = 8;
const PER_IP: usize = 2;
/// Eight addresses at their per-IP cap open twice the global cap.
const ATTACKERS: u8 = 8;
const WAIT: Duration = Duration::from_secs(10);

struct Setup {
    _controller: Arc<TestController>,
    gateway: Running,
    origin: Origin,
    _upstream: UpstreamProxy,
}

/// A gateway with one upstream and `alice`, whose cap the attack fills, with deadlines far
/// beyond the test's length.
async fn start() -> Setup {
    let origin = Origin::start().await.unwrap();
    let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
    let controller = TestController::start(WORKER, 60_000).await;
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    controller.publish(
        vec![proxy(
            1,
            Protocol::Http,
            upstream.addr(),
            credentials,
            "acme",
            "us",
        )],
        vec![client("alice")],
    );
    let mut config = config(&controller);
    config.limits.max_connections = CAP;
    config.limits.max_connections_per_ip = PER_IP;
    config.limits.first_byte_timeout = Some(Millis::from_secs(30));
    config.limits.header_read_timeout = Millis::from_secs(30);
    config.limits.keepalive_idle = Millis::from_secs(30);
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    Setup {
        _controller: controller,
        gateway,
        origin,
        _upstream: upstream,
    }
}

/// Idle connections from eight other addresses, twice the cap; returns once the server
/// has closed as many of them as it must have to admit them all (`CAP`: the legitimate
/// client's fate is decided by then).
async fn flood(addr: SocketAddr) -> Vec<TcpStream> {
    let sources: Vec<_> = (0..ATTACKERS).map(ipv4_source).collect();
    let flood = spread_idle_flood(addr, &sources, PER_IP).await;
    assert_eq!(
        flood.len(),
        usize::from(ATTACKERS) * PER_IP,
        "every connect completed"
    );
    server_closed("the flood to be admitted", &flood, CAP, WAIT).await;
    flood
}

/// The head of a GET of `url` through the gateway as `alice`, without its final blank line.
fn get_head(url: &str, host: SocketAddr) -> String {
    format!(
        "GET {url} HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: {}\r\n",
        basic_auth_value("alice", PASSWORD)
    )
}

/// Reads one answer (its head, then its body by length or chunks); empty when the
/// connection closed first.
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok());
            let complete = match length {
                Some(length) => answer.len() >= end + 4 + length,
                None => text.ends_with("0\r\n\r\n"),
            };
            if complete {
                break;
            }
        }
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socks5_client_mid_handshake_is_not_closed_for_a_flood() {
    let setup = start().await;
    let echo = echo_server().await;
    let mut client = connect_from(OTHER_SOURCE, setup.gateway.socks5)
        .await
        .unwrap();
    client.write_all(&[5, 1, 2]).await.unwrap();
    let mut chosen = [0u8; 2];
    client.read_exact(&mut chosen).await.unwrap();
    assert_eq!(chosen, [5, 2], "username/password selected");
    let _flood = flood(setup.gateway.socks5).await;
    // The rest of the handshake: credentials, then a CONNECT to the echo server.
    let finish = async {
        let mut auth = vec![1, 5];
        auth.extend_from_slice(b"alice");
        auth.push(PASSWORD.len() as u8);
        auth.extend_from_slice(PASSWORD.as_bytes());
        client.write_all(&auth).await?;
        let mut verdict = [0u8; 2];
        client.read_exact(&mut verdict).await?;
        assert_eq!(verdict, [1, 0], "alice accepted");
        let SocketAddr::V4(target) = echo else {
            unreachable!("the echo server is on IPv4")
        };
        let mut request = vec![5, 1, 0, 1];
        request.extend_from_slice(&target.ip().octets());
        request.extend_from_slice(&target.port().to_be_bytes());
        client.write_all(&request).await?;
        let mut reply = [0u8; 10];
        client.read_exact(&mut reply).await?;
        assert_eq!(reply[1], 0, "the CONNECT succeeded: {reply:?}");
        client.write_all(b"ping").await?;
        let mut echoed = [0u8; 4];
        client.read_exact(&mut echoed).await?;
        Ok::<_, std::io::Error>(echoed)
    };
    let echoed = tokio::time::timeout(WAIT, finish)
        .await
        .expect("the handshake went on in time")
        .unwrap_or_else(|error| {
            panic!("the client mid-handshake was closed to make room: {error}")
        });
    assert_eq!(&echoed, b"ping");
    setup.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_with_half_a_head_sent_is_not_closed_for_a_flood() {
    let setup = start().await;
    let mut client = connect_from(OTHER_SOURCE, setup.gateway.http)
        .await
        .unwrap();
    let head = get_head(&setup.origin.url("/"), setup.origin.addr());
    client.write_all(head.as_bytes()).await.unwrap();
    server_has_read(&client, WAIT).await;
    let _flood = flood(setup.gateway.http).await;
    // The end of the head: a client that was closed to make room gets nothing.
    let _ = client.write_all(b"Connection: close\r\n\r\n").await;
    let answer = read_answer(&mut client).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the client with half a head sent was closed to make room: {answer:?}"
    );
    setup.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_reading_its_next_head_is_not_closed_for_a_newcomer() {
    let setup = start().await;
    let echo = echo_server().await;
    let addr = setup.gateway.http;
    let head = get_head(&setup.origin.url("/"), setup.origin.addr());
    let mut kept = connect_from(OTHER_SOURCE, addr).await.unwrap();
    kept.write_all(format!("{head}\r\n").as_bytes())
        .await
        .unwrap();
    let first = read_answer(&mut kept).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first:?}");
    // Every other slot holds a tunnel, from four other addresses.
    let mut tunnels = Vec::new();
    for n in 0..CAP - 1 {
        let stream = connect_from(ipv4_source((n / PER_IP) as u8), addr)
            .await
            .unwrap();
        tunnels.push(connect_as_alice(stream, echo).await);
    }
    // Half of the kept-alive connection's next head, then a newcomer.
    kept.write_all(head.as_bytes()).await.unwrap();
    server_has_read(&kept, WAIT).await;
    let newcomer = connect_from(ipv4_source(4), addr).await.unwrap();
    let kept_and_newcomer = [kept, newcomer];
    server_closed("one of the two closed", &kept_and_newcomer, 1, WAIT).await;
    let [mut kept, _newcomer] = kept_and_newcomer;
    let _ = kept.write_all(b"\r\n").await;
    let answer = read_answer(&mut kept).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the connection reading its next head was closed to make room: {answer:?}"
    );
    // Idle again with nothing of a head read: now it is the one that makes room.
    let mut another = connect_from(ipv4_source(5), addr).await.unwrap();
    server_closed(
        "the idle connection closed",
        std::slice::from_ref(&kept),
        1,
        WAIT,
    )
    .await;
    another
        .write_all(format!("{head}Connection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answer = read_answer(&mut another).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    for mut tunnel in tunnels {
        tunnel.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        tunnel.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping", "the tunnels were never touched");
    }
    setup.gateway.shutdown().await;
}
