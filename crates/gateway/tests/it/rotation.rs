//! Rotation strategies end to end: curl → gateway → proxypool-sim upstreams (each leaving
//! from its own 127.0.0.x exit) → the sim origin, which echoes the exit it saw. Each test
//! counts exits over a known sequence of requests. Time is a `ManualClock` the gateway
//! (and the test controller's session grants) run on, so nothing sleeps for a rotation
//! period or an idle bound, and the least-used counts do not decay under the test.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, exit_of, sim_upstream};
use crate::common::*;
use proxypool_core::control::{ClientRotation, GatewayClient};
use proxypool_core::{ManualClock, Protocol, now_millis};
use proxypool_gateway::Rotation;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use std::net::Ipv4Addr;
use std::sync::Arc;
use tokio::net::TcpStream;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// A gateway on a manual clock over `count` sim upstreams leaving from
/// 127.0.0.`first_exit`.., with `clients`.
struct Rig {
    origin: Origin,
    clock: Arc<ManualClock>,
    gateway: Running,
    _controller: Arc<TestController>,
    _upstreams: Vec<UpstreamProxy>,
}

impl Rig {
    async fn start(
        first_exit: u8,
        count: u8,
        clients: Vec<GatewayClient>,
        rotation: Rotation,
    ) -> Self {
        let origin = Origin::start().await.unwrap();
        let mut upstreams = Vec::new();
        for n in 0..count {
            upstreams.push(
                sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, first_exit + n)).await,
            );
        }
        let proxies = upstreams
            .iter()
            .enumerate()
            .map(|(i, up)| proxy(i as u8 + 1, Protocol::Http, up.addr(), CREDS, "acme", "us"))
            .collect();
        let controller = TestController::start(WORKER, 3_600_000).await;
        controller.publish(proxies, clients);
        let clock = ManualClock::new(now_millis());
        // Sessions long and on the same clock: only the rotation under test moves things.
        {
            let mut state = controller.state.lock().unwrap();
            state.session_clock = Some(clock.clone());
            state.session_ttl_ms = 3_600_000;
        }
        let mut config = config(&controller);
        config.rotation = rotation;
        let gateway = Running::start_with_clock(config, clock.clone()).await;
        acked(&controller, 1).await;
        Rig {
            origin,
            clock,
            gateway,
            _controller: controller,
            _upstreams: upstreams,
        }
    }

    /// One request as `user`: its exit and its `X-Proxypool-Session` header.
    async fn request(&self, user: &str) -> (String, Option<String>) {
        let response = curl(&[
            "-x",
            &http_proxy_url(user, self.gateway.http),
            &self.origin.url("/"),
        ])
        .await;
        assert_eq!(response.status, 200, "{user}: {response:?}");
        let session = response.header("x-proxypool-session").map(str::to_owned);
        (exit_of(&response.body), session)
    }

    async fn exit(&self, user: &str) -> String {
        self.request(user).await.0
    }

    async fn exits(&self, user: &str, count: usize) -> Vec<String> {
        let mut exits = Vec::with_capacity(count);
        for _ in 0..count {
            exits.push(self.exit(user).await);
        }
        exits
    }

    /// A CONNECT tunnel to the origin as `user`, held open by the caller.
    async fn tunnel(&self, user: &str) -> TcpStream {
        let mut stream = TcpStream::connect(self.gateway.http).await.unwrap();
        proxypool_proto::http_connect::connect(
            &mut stream,
            &self.origin.addr().to_string(),
            Some((user, PASSWORD)),
        )
        .await
        .expect("CONNECT through the gateway");
        stream
    }

    async fn shutdown(self) {
        self.gateway.shutdown().await;
    }
}

/// Asserts that `exits` is runs of exactly `n` equal exits, each run on another exit than
/// the one before.
fn assert_runs_of(exits: &[String], n: usize) {
    assert_eq!(exits.len() % n, 0, "whole runs: {exits:?}");
    let runs: Vec<&[String]> = exits.chunks(n).collect();
    for run in &runs {
        assert!(
            run.iter().all(|e| *e == run[0]),
            "a run of {n} on one exit: {exits:?}"
        );
    }
    for pair in runs.windows(2) {
        assert_ne!(pair[0][0], pair[1][0], "the next run moves: {exits:?}");
    }
}

fn with_rotation(rotation: ClientRotation) -> GatewayClient {
    GatewayClient {
        rotation: Some(rotation),
        ..client("alice")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_n_keeps_each_proxy_for_exactly_n_requests_per_selector_set() {
    let rig = Rig::start(101, 3, vec![client("alice")], Rotation::RoundRobin).await;
    // Two selector sets rotate independently: interleaved, each still shows its runs.
    let (mut plain, mut filtered) = (Vec::new(), Vec::new());
    for _ in 0..12 {
        plain.push(rig.exit("alice-rotate-4").await);
        filtered.push(rig.exit("alice-upstream-acme-rotate-4").await);
    }
    assert_runs_of(&plain, 4);
    assert_runs_of(&filtered, 4);
    // Per request (the default) moves every time on a round robin over three proxies.
    let each = rig.exits("alice", 6).await;
    assert!(each.windows(2).all(|w| w[0] != w[1]), "{each:?}");
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_t_keeps_the_proxy_until_t_passed_since_it_was_chosen() {
    let rig = Rig::start(111, 3, vec![client("alice")], Rotation::RoundRobin).await;
    let user = "alice-rotate-30s";
    let first = rig.exit(user).await;
    rig.clock.advance(10_000);
    assert_eq!(rig.exits(user, 3).await, vec![first.clone(); 3]);
    rig.clock.advance(19_999);
    assert_eq!(rig.exit(user).await, first, "29.999 s after it was chosen");
    rig.clock.advance(1);
    let second = rig.exit(user).await;
    assert_ne!(second, first, "30 s after it was chosen");
    // The period runs from the new choice, not from the first one.
    rig.clock.advance(29_000);
    assert_eq!(rig.exits(user, 2).await, vec![second.clone(); 2]);
    rig.clock.advance(1_000);
    let third = rig.exit(user).await;
    assert_ne!(third, second);
    // Minutes work the same way.
    let minute = rig.exit("alice-rotate-1m").await;
    rig.clock.advance(59_000);
    assert_eq!(rig.exit("alice-rotate-1m").await, minute);
    rig.clock.advance(1_000);
    assert_ne!(rig.exit("alice-rotate-1m").await, minute);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_lives_while_used_and_ends_once_unused_for_its_bound() {
    let rig = Rig::start(121, 3, vec![client("alice")], Rotation::RoundRobin).await;
    let sliding = "alice-session-s1-idle-2";
    let fixed = "alice-session-s2-sesstime-2";
    let (first, header) = rig.request(sliding).await;
    assert_eq!(header.as_deref(), Some("new"));
    assert_eq!(rig.request(fixed).await.1.as_deref(), Some("new"));
    // Used every 90 s for 15 minutes: far past its 2 minutes and the 10-minute default.
    let mut fixed_renewed = false;
    for step in 0..10 {
        rig.clock.advance(90_000);
        let (exit, header) = rig.request(sliding).await;
        assert_eq!(exit, first, "step {step}");
        assert_eq!(header.as_deref(), Some("pinned"), "step {step}");
        // A sesstime session used the same way ends 2 minutes after it began.
        let (_, fixed_header) = rig.request(fixed).await;
        if step == 1 {
            assert_eq!(
                fixed_header.as_deref(),
                Some("new"),
                "sesstime ends at 2 min"
            );
            fixed_renewed = true;
        }
    }
    assert!(fixed_renewed);
    // Unused for its 2 minutes: the session is over, the same id starts a new one. The
    // round robin has moved past the first proxy (seven picks so far, three proxies).
    rig.clock.advance(120_000);
    let (exit, header) = rig.request(sliding).await;
    assert_eq!(header.as_deref(), Some("new"));
    assert_ne!(exit, first, "a new session takes the next proxy");
    rig.shutdown().await;
}

/// Proxy X carries a long-lived tunnel, proxy Y a burst of five requests; the next four
/// picks of `user` must all go to the two proxies that carry neither.
async fn least_used_goes_around_the_tunnel_and_the_burst(
    first_exit: u8,
    clients: Vec<GatewayClient>,
    rotation: Rotation,
    user: &str,
) {
    let rig = Rig::start(first_exit, 4, clients, rotation).await;
    let tunnel_exit = rig.exit("alice-session-t").await;
    let tunnel = rig.tunnel("alice-session-t").await;
    let burst_exit = rig.exit("alice-session-b").await;
    for _ in 0..4 {
        assert_eq!(rig.exit("alice-session-b").await, burst_exit);
    }
    assert_ne!(tunnel_exit, burst_exit, "two different proxies are busy");
    let picks = rig.exits(user, 4).await;
    for pick in &picks {
        assert!(
            *pick != tunnel_exit && *pick != burst_exit,
            "{pick} is the tunnel's ({tunnel_exit}) or the burst's ({burst_exit}): {picks:?}"
        );
    }
    assert_ne!(
        picks[0], picks[1],
        "a pick counts against its proxy: {picks:?}"
    );
    drop(tunnel);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_least_picks_the_proxy_with_the_fewest_connections_and_recent_requests() {
    least_used_goes_around_the_tunnel_and_the_burst(
        131,
        vec![client("alice")],
        Rotation::RoundRobin,
        "alice-rotate-least",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_used_as_the_gateway_s_rotation() {
    least_used_goes_around_the_tunnel_and_the_burst(
        141,
        vec![client("alice")],
        Rotation::LeastUsed,
        "alice",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_used_as_a_client_s_default() {
    least_used_goes_around_the_tunnel_and_the_burst(
        151,
        vec![with_rotation(ClientRotation::LeastUsed)],
        Rotation::RoundRobin,
        "alice",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newip_changes_the_exit_then_the_new_one_stays() {
    let rig = Rig::start(161, 3, vec![client("alice")], Rotation::RoundRobin).await;
    let session = "alice-session-s1";
    let (first, _) = rig.request(session).await;
    assert_eq!(rig.exit(session).await, first);
    let (moved, header) = rig.request("alice-session-s1-newip").await;
    assert_ne!(moved, first, "newip leaves the pinned proxy");
    assert_eq!(header.as_deref(), Some("reassigned"));
    for _ in 0..3 {
        let (exit, header) = rig.request(session).await;
        assert_eq!(
            exit, moved,
            "the new proxy is pinned for the rest of the session"
        );
        assert_eq!(header.as_deref(), Some("pinned"));
    }
    // A rotation key's pin moves the same way, without waiting for its N.
    let keyed = rig.exit("alice-rotate-100").await;
    assert_eq!(rig.exit("alice-rotate-100").await, keyed);
    let fresh = rig.exit("alice-rotate-100-newip").await;
    assert_ne!(fresh, keyed);
    assert_eq!(rig.exits("alice-rotate-100", 3).await, vec![fresh; 3]);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newip_keeps_the_only_eligible_proxy() {
    let rig = Rig::start(165, 1, vec![client("alice")], Rotation::RoundRobin).await;
    let first = rig.exit("alice-session-s1").await;
    let (again, header) = rig.request("alice-session-s1-newip").await;
    assert_eq!(
        again, first,
        "no other proxy: the request is served, not refused"
    );
    assert_eq!(
        header.as_deref(),
        Some("reassigned"),
        "the pin is made again"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_s_default_rotation_applies_and_a_selector_overrides_it() {
    let rig = Rig::start(
        171,
        3,
        vec![with_rotation(ClientRotation::EveryRequests(3))],
        Rotation::RoundRobin,
    )
    .await;
    assert_runs_of(&rig.exits("alice", 9).await, 3);
    assert_runs_of(&rig.exits("alice-rotate-2", 8).await, 2);
    let each = rig.exits("alice-rotate-request", 6).await;
    assert!(
        each.windows(2).all(|w| w[0] != w[1]),
        "per request: {each:?}"
    );
    // A session is not rotated by the client's default: it stays on its proxy.
    let pinned = rig.exits("alice-session-s1", 5).await;
    assert!(pinned.iter().all(|e| *e == pinned[0]), "{pinned:?}");
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rotation_selector_is_refused_with_its_reason() {
    let rig = Rig::start(175, 1, vec![client("alice")], Rotation::RoundRobin).await;
    for (user, reason) in [
        ("alice-newip-x", "selector 'newip' takes no value, got 'x'"),
        ("alice-rotate-0", "rotate '0'"),
        ("alice-idle-5", "idle needs a session"),
    ] {
        let response = curl(&[
            "-x",
            &http_proxy_url(user, rig.gateway.http),
            &rig.origin.url("/"),
        ])
        .await;
        assert_eq!(response.status, 400, "{user}: {response:?}");
        assert!(response.body.contains(reason), "{user}: {}", response.body);
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_goes_on_across_snapshot_swaps() {
    let rig = Rig::start(181, 3, vec![client("alice")], Rotation::RoundRobin).await;
    let mut exits = std::collections::BTreeSet::new();
    for version in 2..=4 {
        // A new snapshot before every request, as lease renewals bring them under load: a
        // rotation that started again with each one would take the first proxy every time.
        rig._controller.bump();
        acked(&rig._controller, version).await;
        exits.insert(rig.exit("alice").await);
    }
    assert_eq!(exits.len(), 3, "three requests, three proxies: {exits:?}");
    rig.shutdown().await;
}
