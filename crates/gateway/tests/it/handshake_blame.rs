//! Whom a handshake timeout blames, on real sockets: a SOCKS5 upstream that says nothing
//! at all is at fault; one that answered the greeting and is still connecting to the
//! target is waiting for the target, and is not counted. It runs alone: the metrics it
//! reads are process-wide.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, UPSTREAM_PASS, UPSTREAM_USER};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_sim::{ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use std::net::{Ipv4Addr, SocketAddr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// A "proxy" that takes each connection, reads what comes and never answers.
async fn mute_proxy() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// The handshake timeout blames a SOCKS5 proxy only when it said nothing at all: one that
/// answered the greeting and is still connecting to the target is waiting for the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_timeout_blames_a_silent_proxy_but_not_one_still_reaching_the_target() {
    let _alone = alone().await;
    let good = EchoOrigin::start().await;
    // Answers the greeting and the authentication at once, then takes a second to connect.
    let slow = UpstreamProxy::start(UpstreamProxyConfig {
        kind: ProxyKind::Socks5,
        exit_ip: Ipv4Addr::new(127, 0, 0, 51),
        credentials: Some((UPSTREAM_USER.into(), UPSTREAM_PASS.into())),
        latency: std::time::Duration::from_secs(1),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap();
    // Takes the connection and never says a word.
    let mute = mute_proxy().await;
    let controller = TestController::start(WORKER, 600_000).await;
    controller.publish(
        vec![
            proxy(1, Protocol::Socks5, slow.addr(), CREDS, "acme", "us"),
            proxy(2, Protocol::Socks5, mute, CREDS, "acme", "de"),
        ],
        vec![client("mallory")],
    );
    let mut config = config(&controller);
    config.dial.handshake_timeout = Millis(300);
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;

    const TARGET_TIMEOUTS: &str =
        "proxypool_gateway_target_failures_total{reason=\"target_timeout\"}";
    const PROXY_TIMEOUTS: &str =
        "proxypool_gateway_upstream_failures_total{reason=\"proxy_handshake_timeout\"}";
    let count = |series: &'static str| async { metric(&gateway, series).await.unwrap_or(0.0) };
    let (target_timeouts, proxy_timeouts) =
        (count(TARGET_TIMEOUTS).await, count(PROXY_TIMEOUTS).await);
    let url = good.url();
    for user in ["mallory-region-us", "mallory-region-de"] {
        let response = curl(&[
            "-m",
            "3",
            "-p",
            "-x",
            &http_proxy_url(user, gateway.http),
            &url,
        ])
        .await;
        assert_ne!(response.status, 200, "{user}: {response:?}");
    }
    assert_eq!(
        count(TARGET_TIMEOUTS).await,
        target_timeouts + 1.0,
        "the slow proxy's timeout is the target's"
    );
    assert!(
        count(PROXY_TIMEOUTS).await >= proxy_timeouts + 1.0,
        "the mute proxy's timeout is its own"
    );
    gateway.shutdown().await;
}
