//! Client addresses behind a load balancer: from a trusted balancer a connection starts
//! with a PROXY protocol header (v1 or v2) and the client it names is who the allowlist
//! sees; a trusted balancer's connection without one is closed; from an untrusted peer a
//! PROXY header is not believed (the request is malformed).

use crate::common::control::TestController;
use crate::common::*;
use base64::Engine;
use std::net::IpAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A client allowed only from 203.0.113.0/24, asking for a (loopback) target.
fn request() -> Vec<u8> {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("far:{PASSWORD}"));
    format!(
        "GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nProxy-Authorization: Basic {basic}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn v1_header() -> Vec<u8> {
    b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\n".to_vec()
}

fn v2_header() -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend_from_slice(&[0x21, 0x11, 0x00, 12]);
    header.extend_from_slice(&[203, 0, 113, 9, 127, 0, 0, 1]);
    header.extend_from_slice(&51000u16.to_be_bytes());
    header.extend_from_slice(&8080u16.to_be_bytes());
    header
}

/// Sends `bytes` and reads the answer until the gateway closes the connection.
async fn exchange(gateway: &Running, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(gateway.http).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer));
    assert!(
        read.await.is_ok(),
        "the gateway neither answered nor closed"
    );
    String::from_utf8_lossy(&answer).into_owned()
}

async fn gateway(trusted: Vec<(IpAddr, u8)>) -> (std::sync::Arc<TestController>, Running) {
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut far = client("far");
    far.ip_allowlist = vec!["203.0.113.0/24".into()];
    controller.publish(vec![], vec![far]);
    let mut settings = config(&controller);
    settings.trusted_proxies = trusted;
    let running = Running::start(settings).await;
    acked(&controller, 1).await;
    (controller, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_balancer_s_proxy_header_names_the_client() {
    let (_controller, gateway) = gateway(vec![("127.0.0.1".parse().unwrap(), 32)]).await;
    // The client is 203.0.113.x: past the allowlist, on to selection (no proxies: 503).
    for header in [v1_header(), v2_header()] {
        let answer = exchange(&gateway, &[header, request()].concat()).await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }
    // Without a header a trusted balancer's connection is closed unanswered.
    let answer = exchange(&gateway, &request()).await;
    assert!(answer.is_empty(), "{answer}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_peer_s_proxy_header_is_not_believed() {
    let (_controller, gateway) = gateway(Vec::new()).await;
    let answer = exchange(&gateway, &[v1_header(), request()].concat()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // The peer itself (loopback) is outside the client's allowlist.
    let answer = exchange(&gateway, &request()).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    gateway.shutdown().await;
}
