//! End to end with real sockets and a real client: curl → gateway → proxypool-sim
//! upstream proxies (HTTP and SOCKS5, each leaving from its own 127.0.0.x exit) → the sim
//! origin, which echoes the exit it saw; HTTPS via CONNECT to `openssl s_server`; and an
//! origin or upstream that sends `X-Proxypool-*` headers of its own.

use crate::common::control::TestController;
use crate::common::upstreams::{
    TlsOrigin, UPSTREAM_PASS, UPSTREAM_USER, dead_addr, exit_of, sim_upstream,
};
use crate::common::*;
use proxypool_core::{ManualClock, Protocol, now_millis};
use proxypool_sim::{Origin, ProxyKind};
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

async fn setup(
    proxies: Vec<proxypool_core::control::SnapshotProxy>,
    clients: Vec<proxypool_core::control::GatewayClient>,
    max_staleness_ms: u64,
) -> (Arc<TestController>, Running) {
    let controller = TestController::start(WORKER, max_staleness_ms).await;
    controller.publish(proxies, clients);
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    (controller, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_https_and_socks5_through_http_and_socks5_upstreams() {
    let origin = Origin::start().await.unwrap();
    let tls = TlsOrigin::start().await;
    let http_up = sim_upstream(ProxyKind::Http, exit(2)).await;
    let socks_up = sim_upstream(ProxyKind::Socks5, exit(3)).await;
    let (_controller, gateway) = setup(
        vec![
            proxy(1, Protocol::Http, http_up.addr(), CREDS, "acme", "us"),
            proxy(2, Protocol::Socks5, socks_up.addr(), CREDS, "sox", "de"),
        ],
        vec![client("alice")],
        60_000,
    )
    .await;

    let via_http = curl(&[
        "-x",
        &http_proxy_url("alice-upstream-acme", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(
        (via_http.status, exit_of(&via_http.body).as_str()),
        (200, "127.0.0.2"),
        "{via_http:?}"
    );
    let via_socks_up = curl(&[
        "-x",
        &http_proxy_url("alice-region-de", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(
        exit_of(&via_socks_up.body),
        "127.0.0.3",
        "plain HTTP over a SOCKS5 upstream"
    );

    // HTTPS through CONNECT to a local TLS origin, over each kind of upstream.
    for user in ["alice-upstream-acme", "alice-upstream-sox"] {
        let https = curl(&[
            "-k",
            "-x",
            &http_proxy_url(user, gateway.http),
            &format!("https://localhost:{}/", tls.addr.port()),
        ])
        .await;
        assert_eq!(https.status, 200, "{user}: {https:?}");
        assert!(https.body.contains("s_server"), "{user}: {}", https.body);
    }

    // SOCKS5 in (domain target, resolved upstream), out through both kinds.
    let origin_by_name = format!("http://localhost:{}/", origin.addr().port());
    for (user, expected) in [
        ("alice-upstream-acme", "127.0.0.2"),
        ("alice-protocol-socks5", "127.0.0.3"),
    ] {
        let socks = curl(&[
            "-x",
            &socks_proxy_url(user, gateway.socks5),
            &origin_by_name,
        ])
        .await;
        assert_eq!(
            (socks.status, exit_of(&socks.body).as_str()),
            (200, expected),
            "{user}: {socks:?}"
        );
    }
    // SOCKS5 with an IPv4 target (socks5:// resolves locally) and HTTPS over SOCKS5.
    let socks_ip = curl(&[
        "-x",
        &format!("socks5://alice:{PASSWORD}@{}", gateway.socks5),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(socks_ip.status, 200);
    let socks_tls = curl(&[
        "-k",
        "-x",
        &socks_proxy_url("alice", gateway.socks5),
        &format!("https://localhost:{}/", tls.addr.port()),
    ])
    .await;
    assert_eq!(socks_tls.status, 200, "{socks_tls:?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_spreads_requests_even_on_one_kept_alive_connection() {
    let origin = Origin::start().await.unwrap();
    let ups = [
        sim_upstream(ProxyKind::Http, exit(11)).await,
        sim_upstream(ProxyKind::Http, exit(12)).await,
        sim_upstream(ProxyKind::Http, exit(13)).await,
    ];
    let proxies = ups
        .iter()
        .enumerate()
        .map(|(i, up)| proxy(i as u8 + 1, Protocol::Http, up.addr(), CREDS, "acme", "us"))
        .collect();
    let (_controller, gateway) = setup(proxies, vec![client("alice")], 60_000).await;
    // One curl process, nine URLs: one kept-alive client connection.
    let url = origin.url("/");
    let mut args = vec![
        "-w".to_owned(),
        "\n".to_owned(),
        "-x".to_owned(),
        http_proxy_url("alice", gateway.http),
    ];
    args.extend(std::iter::repeat_n(url, 9));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let seen = curl(&args).await;
    let exits: Vec<String> = seen.body.lines().map(exit_of).collect();
    assert_eq!(exits.len(), 9, "{seen:?}");
    let distinct: HashSet<&String> = exits.iter().collect();
    assert_eq!(
        distinct.len(),
        3,
        "round-robin over every upstream: {exits:?}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_session_stays_on_one_exit_and_says_when_it_moves() {
    let origin = Origin::start().await.unwrap();
    let ups = [
        sim_upstream(ProxyKind::Http, exit(21)).await,
        sim_upstream(ProxyKind::Http, exit(22)).await,
    ];
    let all: Vec<_> = ups
        .iter()
        .enumerate()
        .map(|(i, up)| proxy(i as u8 + 1, Protocol::Http, up.addr(), CREDS, "acme", "us"))
        .collect();
    let (controller, gateway) = setup(all.clone(), vec![client("alice")], 60_000).await;
    let user = http_proxy_url("alice-session-s1-sesstime-5", gateway.http);
    let first = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(first.header("x-proxypool-session"), Some("new"));
    for _ in 0..5 {
        let again = curl(&["-x", &user, &origin.url("/")]).await;
        assert_eq!(again.body, first.body, "pinned to one exit");
        assert_eq!(again.header("x-proxypool-session"), Some("pinned"));
    }
    // Another session may land elsewhere; the pinned proxy leaves the snapshot.
    let pinned_index = all.iter().position(|p| {
        ups.iter()
            .find(|u| u.addr().port() == p.port)
            .is_some_and(|u| u.exit_ip().to_string() == exit_of(&first.body))
    });
    let remaining: Vec<_> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != pinned_index)
        .map(|(_, p)| p.clone())
        .collect();
    controller.publish(remaining, vec![client("alice")]);
    acked(&controller, 2).await;
    let moved = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(moved.status, 200);
    assert_ne!(moved.body, first.body, "fell back to another proxy");
    assert_eq!(moved.header("x-proxypool-session"), Some("reassigned"));
    let settled = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(settled.body, moved.body);
    assert_eq!(settled.header("x-proxypool-session"), Some("pinned"));
    // CONNECT answers carry the header too.
    let (_, raw) = curl_all_headers(&["-p", "-x", &user, &origin.url("/")]).await;
    assert!(
        raw.to_ascii_lowercase()
            .contains("x-proxypool-session: pinned"),
        "{raw}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clock_ends_sticky_sessions_and_leases_without_sleeping() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(23)).await;
    let listed = proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us");
    let lease_until_ms = listed.lease_until_ms;
    let controller = TestController::start(WORKER, 3_600_000).await;
    controller.publish(vec![listed], vec![client("alice")]);
    let clock = ManualClock::new(now_millis());
    // Sessions long and on the same clock, so only the sesstime and the lease end things.
    {
        let mut state = controller.state.lock().unwrap();
        state.session_clock = Some(clock.clone());
        state.session_ttl_ms = 3_600_000;
    }
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let user = http_proxy_url("alice-session-s1-sesstime-1", gateway.http);
    let session = |response: &Curl| response.header("x-proxypool-session").map(str::to_owned);

    let first = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(session(&first).as_deref(), Some("new"));
    // One second short of the one-minute sesstime: still pinned.
    clock.advance(59_000);
    let pinned = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(session(&pinned).as_deref(), Some("pinned"));
    // The minute is over: the same session id starts a new session.
    clock.advance(1_000);
    let renewed = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(session(&renewed).as_deref(), Some("new"));

    // Past the proxy's lease (by the gateway's wall clock) it is no longer used, and the
    // refusal says why: no lease, not the selectors.
    clock.set(lease_until_ms);
    let lapsed = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(lapsed.status, 503, "{lapsed:?}");
    assert_eq!(
        lapsed.header("x-proxypool-error"),
        Some("no_leased_proxies")
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clock_makes_the_snapshot_stale_without_sleeping() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(24)).await;
    let controller = TestController::start(WORKER, 30_000).await;
    // A session longer than the wall-clock step below: only staleness is under test.
    controller.state.lock().unwrap().session_ttl_ms = 3_600_000;
    controller.publish(
        vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")],
        vec![client("alice")],
    );
    let clock = ManualClock::new(now_millis());
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let user = http_proxy_url("alice", gateway.http);
    controller.stop();
    // Staleness runs on the monotonic side: stepping the wall clock changes nothing...
    clock.set(now_millis() + 120_000);
    assert_eq!(curl(&["-x", &user, &origin.url("/")]).await.status, 200);
    // ...while letting max_staleness pass with the controller gone fails closed at once.
    clock.advance(30_001);
    let stale = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(stale.status, 503, "{stale:?}");
    assert_eq!(stale.header("x-proxypool-error"), Some("gateway_stale"));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_upstreams_are_retried_elsewhere_and_all_dead_is_a_502() {
    let _alone = alone().await;
    let origin = Origin::start().await.unwrap();
    let live = sim_upstream(ProxyKind::Http, exit(31)).await;
    // Dead three ways: nothing listening, and a proxy that accepts and hangs up at once.
    let hangs_up = sim_upstream(ProxyKind::Socks5, exit(32)).await;
    hangs_up.set_dead(true);
    let mut proxies = vec![
        proxy(1, Protocol::Http, dead_addr(), CREDS, "acme", "us"),
        proxy(2, Protocol::Socks5, dead_addr(), CREDS, "acme", "us"),
        proxy(5, Protocol::Socks5, hangs_up.addr(), CREDS, "acme", "us"),
        proxy(3, Protocol::Http, live.addr(), CREDS, "acme", "us"),
    ];
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(proxies.clone(), vec![client("alice")]);
    let mut settings = config(&controller);
    // Three dead proxies and one live one: four attempts always reach the live one.
    settings.dial.max_attempts = 4;
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;
    let failures = ["proxy_connect_refused", "proxy_auth_rejected"]
        .map(|reason| format!("proxypool_gateway_upstream_failures_total{{reason=\"{reason}\"}}"));
    let mut failures_before = Vec::new();
    for series in &failures {
        failures_before.push(metric(&gateway, series).await.unwrap_or(0.0));
    }
    for _ in 0..6 {
        let response = curl(&[
            "-x",
            &http_proxy_url("alice", gateway.http),
            &origin.url("/"),
        ])
        .await;
        assert_eq!(
            (response.status, exit_of(&response.body).as_str()),
            (200, "127.0.0.31")
        );
    }
    // Every proxy dead: a 502 with a code, a failed CONNECT, a SOCKS5 failure reply.
    proxies.retain(|p| p.port != live.addr().port());
    controller.publish(proxies, vec![client("alice")]);
    acked(&controller, 2).await;
    let failed = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(failed.status, 502, "{failed:?}");
    assert_eq!(failed.header("x-proxypool-error"), Some("upstream_failed"));
    let tunnel = curl(&[
        "-p",
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_ne!(tunnel.exit, 0);
    let socks = curl(&[
        "-x",
        &socks_proxy_url("alice", gateway.socks5),
        &origin.url("/"),
    ])
    .await;
    assert_ne!(socks.exit, 0, "SOCKS5 gets a failure reply");
    // Wrong upstream credentials are the proxy's fault too: never a 407 passed on.
    controller.publish(
        vec![proxy(
            4,
            Protocol::Http,
            live.addr(),
            Some(("vendor", "wrong")),
            "acme",
            "us",
        )],
        vec![client("alice")],
    );
    acked(&controller, 3).await;
    let (_, raw) = curl_all_headers(&[
        "-p",
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert!(raw.starts_with("HTTP/1.1 502"), "{raw}");
    assert!(raw.contains("x-proxypool-error: upstream_failed"), "{raw}");
    let plain = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(plain.status, 502, "{plain:?}");
    for (series, before) in failures.iter().zip(failures_before) {
        let after = metric(&gateway, series).await.unwrap_or(0.0);
        assert!(after > before, "{series}: {after}, {before} before");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_policy_throttles_then_locks_out() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(41)).await;
    let (_controller, gateway) = setup(
        vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")],
        vec![limited_client("alice", 0.01, 2.0, 60_000), client("bob")],
        60_000,
    )
    .await;
    let user = http_proxy_url("alice", gateway.http);
    for _ in 0..2 {
        assert_eq!(curl(&["-x", &user, &origin.url("/")]).await.status, 200);
    }
    let limited = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("x-proxypool-error"), Some("rate_limited"));
    assert!(limited.header("retry-after").is_some());
    let locked = curl(&["-x", &user, &origin.url("/")]).await;
    assert_eq!(locked.status, 429);
    assert_eq!(locked.header("x-proxypool-error"), Some("locked_out"));
    let retry: u64 = locked.header("retry-after").unwrap().parse().unwrap();
    assert!(retry > 50, "lockout lasts: {retry}");
    let socks = curl(&[
        "-x",
        &socks_proxy_url("alice", gateway.socks5),
        &origin.url("/"),
    ])
    .await;
    assert_ne!(socks.exit, 0, "SOCKS5 refusal reply while locked out");
    // Other clients are unaffected.
    assert_eq!(
        curl(&["-x", &http_proxy_url("bob", gateway.http), &origin.url("/")])
            .await
            .status,
        200
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_path_needs_no_controller_until_the_snapshot_is_stale() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(51)).await;
    let (controller, gateway) = setup(
        vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")],
        vec![client("alice")],
        2_000,
    )
    .await;
    let user = http_proxy_url("alice", gateway.http);
    assert_eq!(curl(&["-x", &user, &origin.url("/")]).await.status, 200);
    controller.stop();
    let stopped_at = tokio::time::Instant::now();
    // The controller is gone: traffic still flows from the local snapshot...
    let mut served = 0;
    while stopped_at.elapsed() < Duration::from_millis(1_200) {
        let response = curl(&["-x", &user, &origin.url("/")]).await;
        assert_eq!(response.status, 200, "served while within max_staleness");
        served += 1;
    }
    assert!(served >= 3);
    // ...until max_staleness has passed: then fail closed.
    let stale = eventually_async("a stale answer", Duration::from_secs(10), async || {
        let answer = curl(&["-x", &user, &origin.url("/")]).await;
        (answer.status != 200).then_some(answer)
    })
    .await;
    assert_eq!(stale.status, 503);
    assert_eq!(stale.header("x-proxypool-error"), Some("gateway_stale"));
    let socks = curl(&[
        "-x",
        &socks_proxy_url("alice", gateway.socks5),
        &origin.url("/"),
    ])
    .await;
    assert_ne!(socks.exit, 0);
    // The controller returns: serving resumes.
    controller.restart().await;
    eventually_async(
        "serving again once the controller answers",
        Duration::from_secs(10),
        async || (curl(&["-x", &user, &origin.url("/")]).await.status == 200).then_some(()),
    )
    .await;
    gateway.shutdown().await;
}

/// Opens a CONNECT tunnel by hand and keeps it open.
async fn open_tunnel(
    gateway: std::net::SocketAddr,
    user: &str,
    target: std::net::SocketAddr,
) -> (TcpStream, String) {
    use base64::Engine;
    let mut stream = TcpStream::connect(gateway).await.unwrap();
    let credentials =
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{PASSWORD}"));
    stream
        .write_all(
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {credentials}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_active_tunnels_draining_proxies_and_caps_client_connections() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(61)).await;
    let other = sim_upstream(ProxyKind::Http, exit(62)).await;
    let mut alice = client("alice");
    alice.max_connections = 1;
    let first = proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us");
    let second = proxy(2, Protocol::Http, other.addr(), CREDS, "acme", "us");
    let (controller, gateway) = setup(vec![first.clone()], vec![alice.clone()], 60_000).await;
    let (mut tunnel, head) = open_tunnel(gateway.http, "alice", origin.addr()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let state = controller.state.clone();
    let id = first.id.clone();
    eventually(Duration::from_secs(5), "active=1 reported", || {
        state.lock().unwrap().reports.last().is_some_and(|r| {
            r.entries
                .iter()
                .any(|e| e.proxy_id == id && e.active == 1 && !e.draining)
        })
    })
    .await;
    // The client's only connection is taken.
    let capped = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(capped.status, 429);
    assert_eq!(
        capped.header("x-proxypool-error"),
        Some("too_many_connections")
    );
    // The busy proxy leaves the snapshot: it is reported as draining while the tunnel lives.
    controller.publish(vec![second], vec![alice]);
    acked(&controller, 2).await;
    let id = first.id.clone();
    eventually(Duration::from_secs(5), "draining reported", || {
        state.lock().unwrap().reports.last().is_some_and(|r| {
            r.entries
                .iter()
                .any(|e| e.proxy_id == id && e.active == 1 && e.draining)
        })
    })
    .await;
    // The tunnel still works, then closes; the report empties.
    tunnel
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    tunnel.read_to_string(&mut reply).await.unwrap();
    assert!(reply.contains("\"exit\":\"127.0.0.61\""), "{reply}");
    drop(tunnel);
    eventually(Duration::from_secs(5), "empty report", || {
        state
            .lock()
            .unwrap()
            .reports
            .last()
            .is_some_and(|r| r.entries.is_empty())
    })
    .await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_400_and_do_not_disturb_others() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(71)).await;
    let (_controller, gateway) = setup(
        vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")],
        vec![client("alice")],
        60_000,
    )
    .await;
    let mut bad = TcpStream::connect(gateway.http).await.unwrap();
    bad.write_all(b"THIS IS NOT HTTP\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), bad.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    let mut huge = TcpStream::connect(gateway.http).await.unwrap();
    let big = format!(
        "GET http://x/ HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    let _ = huge.write_all(big.as_bytes()).await;
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), huge.read_to_string(&mut answer)).await;
    assert!(
        answer.starts_with("HTTP/1.1 431") || answer.is_empty(),
        "{answer:?}"
    );
    let ok = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(ok.status, 200);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_open_tunnels_finish_and_refuses_new_connections() {
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(81)).await;
    let (controller, gateway) = setup(
        vec![proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us")],
        vec![client("alice")],
        60_000,
    )
    .await;
    let http = gateway.http;
    let (mut tunnel, head) = open_tunnel(http, "alice", origin.addr()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(gateway.shutdown());
    // Draining: no new connections...
    eventually_async(
        "the listener to close when draining starts",
        Duration::from_secs(1),
        async || TcpStream::connect(http).await.is_err().then_some(()),
    )
    .await;
    // ...but the open tunnel still carries traffic.
    tunnel
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    tunnel.read_to_string(&mut reply).await.unwrap();
    assert!(reply.contains("\"exit\":\"127.0.0.81\""), "{reply}");
    drop(tunnel);
    stopping.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1_900),
        "shutdown ends as soon as nothing is in flight, before the 2 s grace"
    );
    let state = controller.state.lock().unwrap();
    assert_eq!(state.ended.len(), 1, "session ended");
}

/// A server that answers every request on every connection with `X-Proxypool-*` headers
/// of its own: as an origin behind an upstream, or as the upstream proxy itself.
async fn spoofing_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\
                          X-Proxypool-Session: spoofed\r\nX-Proxypool-Proxy: spoofed\r\n\
                          X-Proxypool-Attempts: spoofed\r\nX-Proxypool-Error: spoofed\r\n\
                          X-Proxypool-Anything: spoofed\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_proxypool_headers_from_an_origin_or_an_upstream_never_reach_the_client() {
    let spoofer = spoofing_server().await;
    let up = sim_upstream(ProxyKind::Http, exit(31)).await;
    let (_controller, gateway) = setup(
        vec![
            proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us"),
            proxy(2, Protocol::Http, spoofer, None, "spoof", "us"),
        ],
        vec![client("alice")],
        60_000,
    )
    .await;
    let origin = format!("http://{spoofer}/");
    for (user, session) in [
        ("alice-upstream-acme", None),
        ("alice-upstream-acme-session-s1", Some("new")),
        ("alice-upstream-spoof", None),
        ("alice-upstream-spoof-session-s2", Some("new")),
    ] {
        let response = curl(&["-x", &http_proxy_url(user, gateway.http), &origin]).await;
        assert_eq!(
            (response.status, response.body.as_str()),
            (200, "ok"),
            "{user}: {response:?}"
        );
        let own: Vec<_> = response
            .headers
            .iter()
            .filter(|(name, _)| name.starts_with("x-proxypool-"))
            .collect();
        assert!(
            own.iter().all(|(_, value)| value != "spoofed"),
            "{user}: {own:?}"
        );
        assert_eq!(response.header("x-proxypool-session"), session, "{user}");
        assert_eq!(response.header("x-proxypool-attempts"), Some("1"), "{user}");
        let carried = if user.contains("acme") { 1 } else { 2 };
        assert_eq!(
            response.header("x-proxypool-proxy"),
            Some(format!("{carried:032x}").as_str()),
            "{user}"
        );
        assert_eq!(
            own.len(),
            2 + usize::from(session.is_some()),
            "only the gateway's own: {user}: {own:?}"
        );
    }
    gateway.shutdown().await;
}

/// The value of `name` in the first header block of `raw` (curl's `-D` text) that has it.
fn raw_header(raw: &str, name: &str) -> Option<String> {
    raw.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_comes_with_the_named_proxy_on_plain_http_and_on_the_connect_200() {
    use proxypool_core::ticket::TicketSubject;
    use proxypool_core::{ClientId, Clock, ProxyId, TICKET_LIFETIME_MS, TicketError, TicketKey};
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, exit(32)).await;
    let key = TicketKey::generate().unwrap();
    let controller = TestController::start(WORKER, 3_600_000).await;
    controller.state.lock().unwrap().ticket_key = Some(key.clone());
    let carrier = proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us");
    controller.publish(vec![carrier.clone()], vec![client("alice"), client("bob")]);
    let clock = ManualClock::new(now_millis());
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let alice = ClientId::new("alice").unwrap();
    let carried = ProxyId::new(format!("{:032x}", 1)).unwrap();
    let now = clock.now();
    // The ticket is bound to the lease the snapshot gave (epoch 1 here).
    let verify_in = |epoch: u64, ticket: &str, client: &ClientId, proxy: &ProxyId, at: u64| {
        let subject = TicketSubject {
            client,
            proxy,
            lease_epoch: epoch,
        };
        proxypool_core::verify_ticket(&key, ticket, subject, at)
    };
    let verify = |ticket: &str, client: &ClientId, proxy: &ProxyId, at: u64| {
        verify_in(1, ticket, client, proxy, at)
    };

    // Plain HTTP: the ticket names this client, the proxy in X-Proxypool-Proxy and its
    // lease, for at least the ticket's lifetime from the gateway's clock (rounded up to
    // the next 10 s, so the responses of one step share a ticket).
    let plain = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(plain.status, 200, "{plain:?}");
    assert_eq!(plain.header("x-proxypool-proxy"), Some(carried.as_str()));
    let ticket = plain
        .header("x-proxypool-ticket")
        .expect("a ticket")
        .to_owned();
    let expires_at = (now + TICKET_LIFETIME_MS).div_ceil(10_000) * 10_000;
    assert!(ticket.starts_with(&format!("v2.{expires_at}.")), "{ticket}");
    assert_eq!(verify(&ticket, &alice, &carried, now), Ok(()));
    assert_eq!(
        verify(&ticket, &alice, &carried, expires_at),
        Err(TicketError::Expired)
    );
    assert_eq!(
        verify_in(2, &ticket, &alice, &carried, now),
        Err(TicketError::Mismatch),
        "another lease's"
    );
    let bob = ClientId::new("bob").unwrap();
    assert_eq!(
        verify(&ticket, &bob, &carried, now),
        Err(TicketError::Mismatch)
    );
    let other = ProxyId::new(format!("{:032x}", 2)).unwrap();
    assert_eq!(
        verify(&ticket, &alice, &other, now),
        Err(TicketError::Mismatch)
    );

    // The CONNECT 200 carries one too, issued to whoever asked.
    let (exit_code, raw) = curl_all_headers(&[
        "-p",
        "-x",
        &http_proxy_url("bob", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(exit_code, 0, "{raw}");
    assert_eq!(
        raw_header(&raw, "x-proxypool-proxy").as_deref(),
        Some(carried.as_str()),
        "{raw}"
    );
    let tunnel_ticket = raw_header(&raw, "x-proxypool-ticket").expect("a ticket on the 200");
    assert_eq!(verify(&tunnel_ticket, &bob, &carried, now), Ok(()));
    assert_eq!(
        verify(&tunnel_ticket, &alice, &carried, now),
        Err(TicketError::Mismatch)
    );

    // The proxy leased to this gateway anew (a new epoch, nothing else changed: a delta
    // of its lease alone): the next ticket names the new lease, not the old one.
    let mut released_and_leased = carrier.clone();
    released_and_leased.epoch = 2;
    controller.publish(
        vec![released_and_leased],
        vec![client("alice"), client("bob")],
    );
    acked(&controller, 2).await;
    let again = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.http),
        &origin.url("/"),
    ])
    .await;
    assert_eq!(again.status, 200, "{again:?}");
    let renewed = again.header("x-proxypool-ticket").expect("a ticket");
    assert_eq!(verify_in(2, renewed, &alice, &carried, now), Ok(()));
    assert_eq!(
        verify(renewed, &alice, &carried, now),
        Err(TicketError::Mismatch),
        "the earlier lease's"
    );
    gateway.shutdown().await;
}
