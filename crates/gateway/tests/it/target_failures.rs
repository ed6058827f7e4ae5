//! A tenant's unreachable targets must not take shared proxies out of rotation: one
//! client hammers targets that refuse, reset or never answer, through simulated upstream
//! proxies (an HTTP and a SOCKS5 one) and every way in (plain HTTP, CONNECT, SOCKS5), with
//! short timeouts and a failure threshold of one; no proxy may be counted failed, and
//! another client's requests to a good origin keep going through every proxy (those two
//! and two more) after each kind of target.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, UPSTREAM_PASS, UPSTREAM_USER, dead_addr, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_sim::{ProxyKind, UpstreamProxy};
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 40 + n)
}

/// A listener that takes each connection and resets it at once.
async fn resetting_target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Linger zero: the close is a reset, not a clean end.
            let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
            drop(stream);
        }
    });
    addr
}

/// A listener that takes each connection, reads what comes and never answers.
async fn silent_target() -> SocketAddr {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_failing_targets_never_count_against_the_proxies() {
    let _alone = alone().await;
    let good = EchoOrigin::start().await;
    let closed = dead_addr();
    let resetting = resetting_target().await;
    let silent = silent_target().await;

    let mut running: Vec<UpstreamProxy> = Vec::new();
    let mut records = Vec::new();
    for n in 1..=4u8 {
        let (kind, protocol) = if n % 2 == 1 {
            (ProxyKind::Http, Protocol::Http)
        } else {
            (ProxyKind::Socks5, Protocol::Socks5)
        };
        let up = sim_upstream(kind, exit(n)).await;
        // The hammering client keeps to the "us" half: had it taken proxies out of
        // rotation, the others would carry everything and it shows (when every proxy is
        // out, picks fall back to trying them all, which would hide it).
        let region = if n <= 2 { "us" } else { "de" };
        records.push(proxy(n, protocol, up.addr(), CREDS, "acme", region));
        running.push(up);
    }
    let controller = TestController::start(WORKER, 600_000).await;
    controller.publish(records, vec![client("alice"), client("mallory")]);
    let mut config = config(&controller);
    // Short timeouts, and one failure takes a proxy out for a minute (a dial that works
    // resets the count, so a failure after it is only ever one in a row).
    config.dial.handshake_timeout = Millis(300);
    config.dial.failure_threshold = 1;
    config.dial.failure_cooldown = Millis(60_000);
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    let proxy_failures = [
        "upstream_request_failed",
        "proxy_handshake_timeout",
        "proxy_io_error",
    ]
    .map(|reason| format!("proxypool_gateway_upstream_failures_total{{reason=\"{reason}\"}}"));
    let target_failures = ["target_timeout", "target_refused", "target_unreachable"]
        .map(|reason| format!("proxypool_gateway_target_failures_total{{reason=\"{reason}\"}}"));
    let mut before = HashMap::new();
    for series in proxy_failures.iter().chain(&target_failures) {
        before.insert(series, metric(&gateway, series).await.unwrap_or(0.0));
    }

    let forward = |user: &str, target: SocketAddr| {
        let proxy_url = http_proxy_url(user, gateway.http);
        let url = format!("http://{target}/");
        async move { curl(&["-m", "3", "-x", &proxy_url, &url]).await }
    };
    let alice_everywhere = |stage: &'static str| async move {
        let mut carried = HashSet::new();
        for _ in 0..16 {
            let response = forward("alice", good.addr).await;
            assert_eq!(
                response.status, 200,
                "alice to the good origin: {response:?}"
            );
            assert_eq!(response.header("x-proxypool-attempts"), Some("1"));
            carried.insert(response.header("x-proxypool-proxy").unwrap().to_owned());
        }
        if carried.len() != 4 {
            // Which failure took a proxy out, for whoever reads the failed run.
            let text = curl(&[&format!("http://{}/metrics", gateway.admin)])
                .await
                .body;
            eprintln!(
                "{}",
                text.lines()
                    .filter(|l| l.contains("failures"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        assert_eq!(
            carried.len(),
            4,
            "{stage}: every proxy carries alice: {carried:?}"
        );
    };

    alice_everywhere("before").await;
    let mallory = "mallory-region-us";
    for round in 0..2 {
        for (name, target) in [
            ("closed", closed),
            ("resetting", resetting),
            ("silent", silent),
        ] {
            // Plain HTTP through each of its proxies in turn, four times each.
            for _ in 0..8 {
                let response = forward(mallory, target).await;
                assert!(
                    matches!(response.status, 502 | 504),
                    "round {round}, {name}: {response:?}"
                );
            }
            alice_everywhere(name).await;
            if target == silent {
                // A tunnel to it is open and idle: nothing to count either way.
                continue;
            }
            // CONNECT and SOCKS5 through each of its proxies in turn.
            let url = format!("http://{target}/");
            for _ in 0..4 {
                curl(&[
                    "-m",
                    "3",
                    "-p",
                    "-x",
                    &http_proxy_url(mallory, gateway.http),
                    &url,
                ])
                .await;
                curl(&[
                    "-m",
                    "3",
                    "-x",
                    &socks_proxy_url(mallory, gateway.socks5),
                    &url,
                ])
                .await;
            }
            alice_everywhere(name).await;
        }
    }

    // Nothing was counted against a proxy; the targets' failures were counted as theirs.
    for series in &proxy_failures {
        assert_eq!(
            metric(&gateway, series).await.unwrap_or(0.0),
            before[series],
            "{series}"
        );
    }
    for series in &target_failures {
        assert!(
            metric(&gateway, series).await.unwrap_or(0.0) > before[series],
            "{series}"
        );
    }
    gateway.shutdown().await;
}
