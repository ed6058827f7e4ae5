//! A full pool waits briefly: with every proxy at its `max_sessions`, a CONNECT waits up to
//! `limits.capacity_wait` for a slot, is served when one frees in time, and is refused
//! (`no_eligible_proxy`) at the deadline or at once past the waiters' bound. Real sockets
//! throughout: client → gateway → proxypool-sim upstream → an echo server of the test's.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, echo_server, sim_upstream};
use crate::common::*;
use proxypool_core::Protocol;
use proxypool_sim::ProxyKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));
const WAITS: &str = "proxypool_gateway_capacity_waits_total";
const SERVED: &str = "proxypool_gateway_capacity_wait_outcomes_total{outcome=\"served\"}";
const TIMED_OUT: &str = "proxypool_gateway_capacity_wait_outcomes_total{outcome=\"timed_out\"}";
const OVER_BOUND: &str = "proxypool_gateway_capacity_wait_outcomes_total{outcome=\"over_bound\"}";

struct Setup {
    _controller: Arc<TestController>,
    gateway: Running,
    target: SocketAddr,
    _upstream: proxypool_sim::UpstreamProxy,
}

/// One proxy with `max_sessions = 2`, the capacity wait set by `tune`.
async fn setup(tune: impl FnOnce(&mut proxypool_gateway::GatewayConfig)) -> Setup {
    let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 95)).await;
    let controller = TestController::start(WORKER, 60_000).await;
    let mut record = proxy(1, Protocol::Http, upstream.addr(), CREDS, "up", "eu");
    record.max_sessions = 2;
    controller.publish(vec![record], vec![client("alice")]);
    let mut config = config(&controller);
    tune(&mut config);
    let gateway = Running::start(config).await;
    acked(&controller, 1).await;
    Setup {
        _controller: controller,
        gateway,
        target: echo_server().await,
        _upstream: upstream,
    }
}

/// A CONNECT as alice: the open tunnel (checked with an echo), or the refusal's status
/// and `X-Proxypool-Error`.
async fn connect(gateway: SocketAddr, target: SocketAddr) -> Result<TcpStream, (u16, String)> {
    let mut stream = TcpStream::connect(gateway).await.unwrap();
    let head = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\
         Proxy-Authorization: Basic YWxpY2U6Y2xpZW50LXNlY3JldA==\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let mut byte = [0u8; 1];
    while !response.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "response head ends early"
        );
        response.push(byte[0]);
    }
    let text = String::from_utf8(response).unwrap().to_ascii_lowercase();
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    if status != 200 {
        let code = text
            .lines()
            .find_map(|line| line.strip_prefix("x-proxypool-error: "))
            .unwrap_or("")
            .trim()
            .to_owned();
        return Err((status, code));
    }
    stream.write_all(b"ping").await.unwrap();
    let mut echo = [0u8; 4];
    stream.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"ping");
    Ok(stream)
}

async fn count(gateway: &Running, series: &str) -> f64 {
    metric(gateway, series).await.unwrap_or(0.0)
}

/// Waits until `series` reaches `value`.
async fn metric_reaches(gateway: &Running, series: &str, value: f64) {
    let what = format!("{series} to reach {value}");
    eventually_async(&what, Duration::from_secs(10), async || {
        (count(gateway, series).await >= value).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_when_tunnels_close_within_the_wait() {
    let _alone = alone().await;
    let s = setup(|c| c.limits.capacity_wait = Millis(10_000)).await;
    let (waits, served) = (
        count(&s.gateway, WAITS).await,
        count(&s.gateway, SERVED).await,
    );
    let first = connect(s.gateway.http, s.target).await.unwrap();
    let second = connect(s.gateway.http, s.target).await.unwrap();
    let (http, target) = (s.gateway.http, s.target);
    let third = tokio::spawn(async move { connect(http, target).await });
    let fourth = tokio::spawn(async move { connect(http, target).await });
    metric_reaches(&s.gateway, WAITS, waits + 2.0).await;
    assert!(!third.is_finished() && !fourth.is_finished(), "both wait");
    drop(first);
    drop(second);
    let third = third
        .await
        .unwrap()
        .expect("served after the first tunnels closed");
    let fourth = fourth
        .await
        .unwrap()
        .expect("served after the first tunnels closed");
    assert_eq!(count(&s.gateway, SERVED).await, served + 2.0);
    // Still two sessions at most: a fifth waits rather than squeezes in.
    let (http, target) = (s.gateway.http, s.target);
    let fifth = tokio::spawn(async move { connect(http, target).await });
    metric_reaches(&s.gateway, WAITS, waits + 3.0).await;
    assert!(!fifth.is_finished());
    drop(third);
    fifth.await.unwrap().expect("served");
    drop(fourth);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_past_its_deadline_is_refused_as_before() {
    let _alone = alone().await;
    let s = setup(|c| c.limits.capacity_wait = Millis(300)).await;
    let timed_out = count(&s.gateway, TIMED_OUT).await;
    let _first = connect(s.gateway.http, s.target).await.unwrap();
    let _second = connect(s.gateway.http, s.target).await.unwrap();
    let started = Instant::now();
    let refused = connect(s.gateway.http, s.target).await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(refused, (503, "no_eligible_proxy".to_owned()));
    assert!(
        waited >= Duration::from_millis(250),
        "waited only {waited:?}"
    );
    assert_eq!(count(&s.gateway, TIMED_OUT).await, timed_out + 1.0);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_past_the_per_client_bound_are_refused_at_once() {
    let _alone = alone().await;
    let s = setup(|c| {
        c.limits.capacity_wait = Millis(10_000);
        c.limits.max_capacity_waiters_per_client = 1;
    })
    .await;
    let (waits, over) = (
        count(&s.gateway, WAITS).await,
        count(&s.gateway, OVER_BOUND).await,
    );
    let first = connect(s.gateway.http, s.target).await.unwrap();
    let _second = connect(s.gateway.http, s.target).await.unwrap();
    let (http, target) = (s.gateway.http, s.target);
    let third = tokio::spawn(async move { connect(http, target).await });
    metric_reaches(&s.gateway, WAITS, waits + 1.0).await;
    let started = Instant::now();
    let refused = connect(s.gateway.http, s.target).await.unwrap_err();
    assert_eq!(refused, (503, "no_eligible_proxy".to_owned()));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once, not at the deadline"
    );
    assert_eq!(count(&s.gateway, OVER_BOUND).await, over + 1.0);
    drop(first);
    third.await.unwrap().expect("the one waiter is served");
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_turns_off_and_on_by_reload() {
    let _alone = alone().await;
    let mut tuned = None;
    let s = setup(|c| {
        c.limits.capacity_wait = Millis(0);
        tuned = Some(c.clone());
    })
    .await;
    let waits = count(&s.gateway, WAITS).await;
    let first = connect(s.gateway.http, s.target).await.unwrap();
    let _second = connect(s.gateway.http, s.target).await.unwrap();
    let refused = connect(s.gateway.http, s.target).await.unwrap_err();
    assert_eq!(refused, (503, "no_eligible_proxy".to_owned()));
    assert_eq!(count(&s.gateway, WAITS).await, waits, "\"0s\": no wait");
    let mut reloaded = tuned.unwrap();
    reloaded.limits.capacity_wait = Millis(10_000);
    s.gateway.reload.apply(&reloaded).unwrap();
    let (http, target) = (s.gateway.http, s.target);
    let third = tokio::spawn(async move { connect(http, target).await });
    metric_reaches(&s.gateway, WAITS, waits + 1.0).await;
    drop(first);
    third
        .await
        .unwrap()
        .expect("served after the reload turned the wait on");
    s.gateway.shutdown().await;
}
