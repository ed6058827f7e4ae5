//! No relaying past a lease: CONNECT and SOCKS5 tunnels, and kept-alive plain HTTP
//! upstream connections, close once the gateway no longer holds their proxy's lease (it
//! ended unrenewed, or the store said the worker no longer owns the proxy), and stay open
//! while new snapshots extend it, also while the proxy drains. Real sockets throughout:
//! client → gateway → proxypool-sim upstream proxy → an echo server. Time moves on a manual
//! clock; a closure is awaited with a polling deadline.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, echo_server, sim_upstream};
use crate::common::*;
use proxypool_core::control::{HeldLease, SnapshotProxy};
use proxypool_core::{Clock, ManualClock, Protocol, now_millis};
use proxypool_sim::ProxyKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));
const LEASE_MS: u64 = 10_000;
const LAPSED: &str = "proxypool_gateway_tunnels_closed_total{reason=\"lease_lapsed\"}";
const STALE: &str = "proxypool_gateway_tunnels_closed_total{reason=\"stale\"}";
const SESSION_LAPSED: &str = "proxypool_gateway_tunnels_closed_total{reason=\"session_lapsed\"}";
const TUNNELS_OPEN: &str = "proxypool_gateway_tunnels_open";

/// Lets the keeper look at the clock twice (it looks every 200 ms) where the test shows
/// that nothing closes: the absence of a cut has no event to wait for, so this sleep is
/// the stimulus, the window in which a wrong cut would show.
async fn keeper_looks_twice() {
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// Waits until the tunnels closed for `series`' reason reach `value` (they are counted a
/// moment after the close).
async fn counted(gateway: &Running, series: &str, value: f64) {
    eventually_async(series, Duration::from_secs(5), async || {
        (metric(gateway, series).await == Some(value)).then_some(())
    })
    .await;
}

async fn connect_tunnel(gateway: &Running, target: SocketAddr) -> TcpStream {
    connect_as_alice(TcpStream::connect(gateway.http).await.unwrap(), target).await
}

async fn socks_tunnel(gateway: &Running, target: SocketAddr) -> TcpStream {
    socks_as_alice(TcpStream::connect(gateway.socks5).await.unwrap(), target).await
}

/// The tunnel still carries bytes both ways.
async fn assert_open(tunnel: &mut TcpStream, what: &str) {
    let exchange = async {
        tunnel.write_all(b"ping").await?;
        let mut echoed = [0u8; 4];
        tunnel.read_exact(&mut echoed).await?;
        Ok::<_, std::io::Error>(echoed)
    };
    match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(Ok(echoed)) => assert_eq!(&echoed, b"ping", "{what}"),
        other => panic!("{what}: the tunnel should be open: {other:?}"),
    }
}

/// The gateway closes the tunnel within a few seconds (the keeper looks every 200 ms).
async fn assert_closed(tunnel: &mut TcpStream, what: &str) {
    let mut buffer = [0u8; 64];
    let closed = async {
        loop {
            match tunnel.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .unwrap_or_else(|_| panic!("{what}: the gateway should have closed the tunnel"));
}

fn listed(up: SocketAddr, n: u8, lease_until_ms: u64) -> SnapshotProxy {
    leased_until(
        proxy(n, Protocol::Http, up, CREDS, "acme", "us"),
        lease_until_ms,
    )
}

/// A gateway on a manual clock whose one proxy (an HTTP sim upstream) is leased for
/// [`LEASE_MS`].
async fn setup(
    exit: u8,
) -> (
    Arc<TestController>,
    Running,
    Arc<ManualClock>,
    SocketAddr,
    proxypool_sim::UpstreamProxy,
) {
    let up = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, exit)).await;
    let clock = ManualClock::new(now_millis());
    let controller = TestController::start(WORKER, 3_600_000).await;
    controller.state.lock().unwrap().session_clock = Some(clock.clone());
    controller.publish(
        vec![listed(up.addr(), 1, clock.now() + LEASE_MS)],
        vec![client("alice")],
    );
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let target = echo_server().await;
    (controller, gateway, clock, target, up)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_close_when_the_lease_passes_unextended() {
    let _alone = alone().await;
    let (_controller, gateway, clock, target, _up) = setup(121).await;
    let before = metric(&gateway, LAPSED).await.unwrap();
    let open_before = metric(&gateway, TUNNELS_OPEN).await.unwrap();
    let mut connect = connect_tunnel(&gateway, target).await;
    let mut socks = socks_tunnel(&gateway, target).await;
    assert_open(&mut connect, "CONNECT").await;
    assert_open(&mut socks, "SOCKS5").await;
    // Short of the lease end (and of its skew margin): nothing changes.
    clock.advance(LEASE_MS - 1_000);
    keeper_looks_twice().await;
    assert_open(&mut connect, "CONNECT before the lease end").await;
    assert_open(&mut socks, "SOCKS5 before the lease end").await;
    // The lease end passes and no snapshot extended it: both close.
    clock.advance(1_000);
    assert_closed(&mut connect, "CONNECT").await;
    assert_closed(&mut socks, "SOCKS5").await;
    counted(&gateway, LAPSED, before + 2.0).await;
    assert_eq!(metric(&gateway, TUNNELS_OPEN).await, Some(open_before));
    // And nothing new goes through it.
    let refused = curl(&[
        "-p",
        "-x",
        &http_proxy_url("alice", gateway.http),
        &format!("http://{target}/"),
    ])
    .await;
    assert_ne!(refused.exit, 0, "{refused:?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_stay_open_for_three_lease_lengths_while_snapshots_extend_the_lease() {
    let _alone = alone().await;
    let (controller, gateway, clock, target, up) = setup(122).await;
    let before = metric(&gateway, LAPSED).await.unwrap();
    let mut connect = connect_tunnel(&gateway, target).await;
    let mut socks = socks_tunnel(&gateway, target).await;
    // Four renewals, each 8 s into a 10 s lease: 32 s in all, past three lease lengths.
    for round in 0..4u64 {
        clock.advance(LEASE_MS - 2_000);
        controller.publish(
            vec![listed(up.addr(), 1, clock.now() + LEASE_MS)],
            vec![client("alice")],
        );
        acked(&controller, round + 2).await;
        keeper_looks_twice().await;
        assert_open(&mut connect, &format!("CONNECT, renewal {round}")).await;
        assert_open(&mut socks, &format!("SOCKS5, renewal {round}")).await;
    }
    assert_eq!(metric(&gateway, LAPSED).await, Some(before), "none cut");
    // The same tunnels do close once the renewals stop.
    clock.advance(LEASE_MS);
    assert_closed(&mut connect, "CONNECT").await;
    assert_closed(&mut socks, "SOCKS5").await;
    gateway.shutdown().await;
}

/// The controller gives a lapsed session's proxies back, so a gateway whose reports are
/// no longer accepted stops at its session's end even while the lease would last longer;
/// accepted reports move the session end on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_close_when_the_session_lapses_before_the_lease() {
    let _alone = alone().await;
    let (controller, gateway, clock, target, _up) = setup(126).await;
    let reports = |controller: &TestController| controller.state.lock().unwrap().reports.len();
    let accepted_after = |n: usize| {
        let state = Arc::clone(&controller.state);
        async move {
            eventually(Duration::from_secs(5), "an accepted report", || {
                state.lock().unwrap().reports.len() > n
            })
            .await
        }
    };
    controller.state.lock().unwrap().session_ttl_ms = 3_000;
    accepted_after(reports(&controller)).await;
    let before = metric(&gateway, SESSION_LAPSED).await.unwrap();
    let mut connect = connect_tunnel(&gateway, target).await;
    assert_open(&mut connect, "CONNECT").await;

    // Reports renew the session: 2 s, then 2 s more, past the first session end.
    for _ in 0..2 {
        clock.advance(2_000);
        accepted_after(reports(&controller)).await;
        assert_open(&mut connect, "CONNECT while reports renew the session").await;
    }

    // The store goes away: no report is accepted, the session ends 3 s after the last.
    controller.state.lock().unwrap().refuse_reports = true;
    clock.advance(2_000);
    assert_open(&mut connect, "CONNECT before the session end").await;
    clock.advance(1_000);
    assert_closed(&mut connect, "CONNECT past the session end").await;
    assert!(clock.now() < controller.state.lock().unwrap().proxies[0].lease_until_ms);
    assert_eq!(
        metric(&gateway, SESSION_LAPSED).await.unwrap(),
        before + 1.0
    );
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["ready"], serde_json::json!(false), "{status}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_answer_naming_the_proxy_stale_closes_its_tunnels() {
    let _alone = alone().await;
    let (controller, gateway, clock, target, up) = setup(123).await;
    let before = metric(&gateway, STALE).await.unwrap();
    let mut connect = connect_tunnel(&gateway, target).await;
    let mut socks = socks_tunnel(&gateway, target).await;
    assert_open(&mut connect, "CONNECT").await;
    assert_open(&mut socks, "SOCKS5").await;
    // Well inside the lease, the store answers a report: this worker no longer owns it.
    let id = listed(up.addr(), 1, 0).id;
    controller.state.lock().unwrap().stale_proxies = vec![id];
    assert_closed(&mut connect, "CONNECT").await;
    assert_closed(&mut socks, "SOCKS5").await;
    counted(&gateway, STALE, before + 2.0).await;
    // The proxy is out of picks too, and the gateway says so.
    let (status, ready) = admin_json(&gateway, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["reason"], "no_leased_proxies", "{ready}");
    let echo = format!("http://{target}/");
    let refused = curl(&["-x", &http_proxy_url("alice", gateway.http), &echo]).await;
    assert_eq!(
        refused.header("x-proxypool-error"),
        Some("no_leased_proxies")
    );
    // A renewed lease brings it back.
    controller.state.lock().unwrap().stale_proxies.clear();
    controller.publish(
        vec![listed(up.addr(), 1, clock.now() + 2 * LEASE_MS)],
        vec![client("alice")],
    );
    acked(&controller, 2).await;
    let mut again = connect_tunnel(&gateway, target).await;
    assert_open(&mut again, "CONNECT after the renewal").await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_proxy_keeps_its_tunnels_while_its_lease_lives() {
    let _alone = alone().await;
    let (controller, gateway, clock, target, up) = setup(124).await;
    let other = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 125)).await;
    let draining = listed(up.addr(), 1, 0).id;
    let mut connect = connect_tunnel(&gateway, target).await;
    let mut socks = socks_tunnel(&gateway, target).await;
    // The controller drains the proxy: the next snapshot no longer lists it.
    controller.publish(
        vec![listed(other.addr(), 2, clock.now() + 3_600_000)],
        vec![client("alice")],
    );
    acked(&controller, 2).await;
    let state = Arc::clone(&controller.state);
    eventually(Duration::from_secs(5), "the drain reported", || {
        state.lock().unwrap().reports.last().is_some_and(|r| {
            r.entries
                .iter()
                .any(|e| e.proxy_id == draining && e.draining && e.active == 2)
        })
    })
    .await;
    assert_open(&mut connect, "draining CONNECT").await;
    assert_open(&mut socks, "draining SOCKS5").await;
    clock.advance(LEASE_MS - 1_000);
    keeper_looks_twice().await;
    assert_open(&mut connect, "draining CONNECT, lease still live").await;
    assert_open(&mut socks, "draining SOCKS5, lease still live").await;
    // New tunnels go to the other proxy meanwhile, and outlive the drained one's lease.
    let mut fresh = connect_tunnel(&gateway, target).await;
    clock.advance(1_000);
    assert_closed(&mut connect, "draining CONNECT past its lease").await;
    assert_closed(&mut socks, "draining SOCKS5 past its lease").await;
    assert_open(&mut fresh, "the other proxy's tunnel").await;
    eventually(Duration::from_secs(5), "the drain finished", || {
        state
            .lock()
            .unwrap()
            .reports
            .last()
            .is_some_and(|r| r.entries.iter().all(|e| e.proxy_id != draining))
    })
    .await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_proxy_s_renewed_lease_keeps_its_tunnels_past_the_first_lease_end() {
    let _alone = alone().await;
    let (controller, gateway, clock, target, up) = setup(126).await;
    let other = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 127)).await;
    let draining = listed(up.addr(), 1, 0).id;
    let mut connect = connect_tunnel(&gateway, target).await;
    let others = vec![listed(other.addr(), 2, clock.now() + 3_600_000)];
    // Drained (no longer listed), but the controller keeps renewing its lease while the
    // tunnel lasts and says so in each snapshot.
    let mut version = 1;
    for round in 1..=3u64 {
        controller.publish_with_held(
            others.clone(),
            vec![HeldLease {
                id: draining.clone(),
                lease_until_ms: clock.now() + LEASE_MS,
            }],
            vec![client("alice")],
        );
        version += 1;
        acked(&controller, version).await;
        clock.advance(LEASE_MS - 1_000);
        keeper_looks_twice().await;
        assert_open(&mut connect, &format!("draining CONNECT, renewal {round}")).await;
    }
    // Renewals stop (the store no longer extends it): cut at the last lease end.
    controller.publish_with_held(others, Vec::new(), vec![client("alice")]);
    acked(&controller, version + 1).await;
    clock.advance(1_000);
    assert_closed(&mut connect, "draining CONNECT past its last renewed lease").await;
    gateway.shutdown().await;
}

/// A plain HTTP proxy that answers every request `200 ok` on kept-alive connections and
/// counts the connections it accepted and those still open.
struct KeepAliveProxy {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
}

impl KeepAliveProxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (counted, live) = (Arc::clone(&accepted), Arc::clone(&open));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                live.fetch_add(1, Ordering::SeqCst);
                let live = Arc::clone(&live);
                tokio::spawn(async move {
                    serve_kept_alive(stream).await;
                    live.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            accepted,
            open,
        }
    }
}

/// Answers each request head (no bodies) until the peer closes.
async fn serve_kept_alive(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
        while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.drain(..end + 4);
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if stream.write_all(answer).await.is_err() {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_alive_upstream_connections_close_when_the_lease_passes() {
    let _alone = alone().await;
    let upstream = KeepAliveProxy::start().await;
    let clock = ManualClock::new(now_millis());
    let controller = TestController::start(WORKER, 3_600_000).await;
    let mut record = proxy(1, Protocol::Http, upstream.addr, None, "acme", "us");
    record.lease_until_ms = clock.now() + LEASE_MS;
    controller.publish(vec![record], vec![client("alice")]);
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let user = http_proxy_url("alice", gateway.http);
    let target = "http://127.0.0.1:9/";
    // Both requests on one client connection: it is served on one I/O thread, whose
    // share of the pool the second request reuses.
    let response = curl(&["-x", &user, target, target]).await;
    assert_eq!((response.status, response.body.as_str()), (200, "okok"));
    let (accepted, open) = (&upstream.accepted, &upstream.open);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second request reused it"
    );
    assert_eq!(open.load(Ordering::SeqCst), 1, "kept alive in the pool");
    clock.advance(LEASE_MS);
    eventually(
        Duration::from_secs(5),
        "the pooled connection closed",
        || open.load(Ordering::SeqCst) == 0,
    )
    .await;
    let refused = curl(&["-x", &user, target]).await;
    assert_eq!(
        refused.header("x-proxypool-error"),
        Some("no_leased_proxies")
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "no new upstream connection"
    );
    gateway.shutdown().await;
}
