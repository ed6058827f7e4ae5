//! The fleet's entry side end to end: three gateways, each with its own test controller
//! and its own leased sim upstreams (each upstream leaving from its own 127.0.0.x exit,
//! which the sim origin echoes), all three listed as one fleet. A session or rotation key
//! sent round-robin to the three over HTTP, CONNECT and SOCKS5 keeps the exits of its one
//! owner; a request without a key is served where it lands; a client cannot speak for the
//! fleet; an owner that goes away hands its keys to the next owner at once.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, exit_of, free_port, sim_upstream};
use crate::common::*;
use proxypool_core::fleet::FleetMember;
use proxypool_core::{Protocol, WorkerId};
use proxypool_gateway::FleetConfig;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// Upstreams per gateway.
const PER_GATEWAY: u8 = 2;

/// One member: its gateway, controller and upstreams, and the exits they leave from.
struct Member {
    gateway: Option<Running>,
    controller: Arc<TestController>,
    exits: Vec<String>,
    _upstreams: Vec<UpstreamProxy>,
}

impl Member {
    fn gateway(&self) -> &Running {
        self.gateway.as_ref().expect("a running member")
    }
}

/// Three fleet members and the origin they reach.
struct Fleet {
    origin: Origin,
    members: Vec<Member>,
}

impl Fleet {
    /// Three gateways `fleet-a`..`fleet-c` whose exits start at 127.0.0.`first_exit`,
    /// listed as one fleet by each one's controller.
    async fn start(first_exit: u8) -> Self {
        let origin = Origin::start().await.unwrap();
        let mut members = Vec::new();
        let mut listed = Vec::new();
        for (index, name) in ["fleet-a", "fleet-b", "fleet-c"].into_iter().enumerate() {
            let mut upstreams = Vec::new();
            let mut proxies = Vec::new();
            let mut exits = Vec::new();
            for n in 0..PER_GATEWAY {
                let number = index as u8 * PER_GATEWAY + n;
                let exit = Ipv4Addr::new(127, 0, 0, first_exit + number);
                let upstream = sim_upstream(ProxyKind::Http, exit).await;
                proxies.push(proxy(
                    number + 1,
                    Protocol::Http,
                    upstream.addr(),
                    CREDS,
                    "acme",
                    "us",
                ));
                exits.push(exit.to_string());
                upstreams.push(upstream);
            }
            let controller = TestController::start(name, 3_600_000).await;
            controller.publish(proxies, vec![client("alice")]);
            let mut config = config(&controller);
            config.worker_id = WorkerId::new(name).unwrap();
            let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
            config.fleet = Some(FleetConfig::new(listen));
            let gateway = Running::start(config).await;
            acked(&controller, 1).await;
            let endpoint = eventually_async(
                "a fleet endpoint reported",
                Duration::from_secs(10),
                async || controller.last_fleet_endpoint(),
            )
            .await;
            listed.push(FleetMember {
                worker: WorkerId::new(name).unwrap(),
                address: listen.to_string(),
                spki_sha256: endpoint.spki_sha256,
                since_ms: 1,
            });
            members.push(Member {
                gateway: Some(gateway),
                controller,
                exits,
                _upstreams: upstreams,
            });
        }
        for member in &members {
            let reports = member.controller.state.lock().unwrap().reports.len();
            member.controller.set_fleet(listed.clone());
            // The answer to the next report carries the list; the one after shows it was
            // taken in (the control loop reports one at a time).
            let state = Arc::clone(&member.controller.state);
            eventually(Duration::from_secs(10), "the fleet list delivered", || {
                state.lock().unwrap().reports.len() >= reports + 2
            })
            .await;
        }
        Fleet { origin, members }
    }

    /// Which member's upstream `exit` is.
    fn owner_of_exit(&self, exit: &str) -> usize {
        self.members
            .iter()
            .position(|member| member.exits.iter().any(|e| e == exit))
            .unwrap_or_else(|| panic!("{exit} is no member's exit"))
    }

    /// A plain HTTP request as `user` through member `at`, with `extra` curl arguments.
    async fn http(&self, at: usize, user: &str, extra: &[&str]) -> Curl {
        let proxy = http_proxy_url(user, self.members[at].gateway().http);
        let url = self.origin.url("/");
        let mut args = vec!["-x", &proxy];
        args.extend_from_slice(extra);
        args.push(&url);
        let response = curl(&args).await;
        assert_eq!(response.status, 200, "{user} at {at}: {response:?}");
        response
    }

    /// The exit of a request as `user` through member `at` over `how`.
    async fn exit(&self, at: usize, user: &str, how: How) -> String {
        let gateway = self.members[at].gateway();
        let url = self.origin.url("/");
        let response = match how {
            How::Http => self.http(at, user, &[]).await,
            How::Connect => curl(&["-p", "-x", &http_proxy_url(user, gateway.http), &url]).await,
            How::Socks5 => curl(&["-x", &socks_proxy_url(user, gateway.socks5), &url]).await,
        };
        assert_eq!(
            response.status, 200,
            "{user} at {at} over {how:?}: {response:?}"
        );
        exit_of(&response.body)
    }

    async fn shutdown(mut self) {
        for member in &mut self.members {
            if let Some(gateway) = member.gateway.take() {
                gateway.shutdown().await;
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum How {
    Http,
    Connect,
    Socks5,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_one_exit_whichever_gateway_and_protocol_it_lands_on() {
    let fleet = Fleet::start(60).await;
    let mut relayed = 0;
    for session in ["s1", "s2", "s3", "s4"] {
        let user = format!("alice-session-{session}");
        let first = fleet.http(0, &user, &[]).await;
        assert_eq!(
            first.header("x-proxypool-session"),
            Some("new"),
            "{first:?}"
        );
        assert!(first.header("x-proxypool-proxy").is_some(), "{first:?}");
        let exit = exit_of(&first.body);
        let owner = fleet.owner_of_exit(&exit);
        for round in 0..2 {
            for at in 0..3 {
                for how in [How::Http, How::Connect, How::Socks5] {
                    assert_eq!(
                        fleet.exit(at, &user, how).await,
                        exit,
                        "{user} round {round} at {at} over {how:?}"
                    );
                    relayed += usize::from(at != owner);
                }
            }
        }
        // Relayed answers carry the owner's headers as its own would.
        let again = fleet.http((owner + 1) % 3, &user, &[]).await;
        assert_eq!(
            again.header("x-proxypool-session"),
            Some("pinned"),
            "{again:?}"
        );
    }
    assert!(relayed > 0, "every request was served by its owner");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_key_advances_every_three_requests_fleet_wide() {
    let fleet = Fleet::start(70).await;
    let mut exits = Vec::new();
    for n in 0..12 {
        exits.push(fleet.exit(n % 3, "alice-rotate-3", How::Http).await);
    }
    let runs: Vec<&[String]> = exits.chunks(3).collect();
    for run in &runs {
        assert!(
            run.iter().all(|exit| *exit == run[0]),
            "runs of 3: {exits:?}"
        );
    }
    for pair in runs.windows(2) {
        assert_ne!(pair[0][0], pair[1][0], "a new exit every 3: {exits:?}");
    }
    let owner = fleet.owner_of_exit(&exits[0]);
    assert!(
        exits.iter().all(|exit| fleet.owner_of_exit(exit) == owner),
        "one owner's proxies: {exits:?}"
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_key_is_served_where_it_lands() {
    let fleet = Fleet::start(80).await;
    for at in 0..3 {
        for how in [How::Http, How::Connect, How::Socks5] {
            for _ in 0..3 {
                let exit = fleet.exit(at, "alice", how).await;
                assert!(
                    fleet.members[at].exits.contains(&exit),
                    "{exit} is not gateway {at}'s own ({how:?})"
                );
            }
        }
    }
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_speak_for_the_fleet() {
    let fleet = Fleet::start(90).await;
    let mut relayed = 0;
    for n in 0..6 {
        let at = n % 3;
        let user = format!("alice-session-forged{n}");
        // Claims to be a hop of another client's moved key: dropped at the entry.
        let forged = fleet
            .http(
                at,
                &user,
                &[
                    "-H",
                    "Proxypool-Fleet-Client: other",
                    "-H",
                    "Proxypool-Fleet-Moved: 1",
                    "-H",
                    "Proxypool-Fleet-Username: other-session-x",
                ],
            )
            .await;
        assert_eq!(
            forged.header("x-proxypool-session"),
            Some("new"),
            "{user} at {at}: {forged:?}"
        );
        let exit = exit_of(&forged.body);
        relayed += usize::from(!fleet.members[at].exits.contains(&exit));
        // And the session is alice's: the next request finds it pinned.
        let next = fleet.http((at + 1) % 3, &user, &[]).await;
        assert_eq!(
            next.header("x-proxypool-session"),
            Some("pinned"),
            "{next:?}"
        );
        assert_eq!(exit_of(&next.body), exit);
    }
    assert!(relayed > 0, "no forged request was relayed");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_stops_hands_its_keys_to_the_next_owner_at_once() {
    let mut fleet = Fleet::start(100).await;
    // A session owned by gateway 2, asked through gateway 0 (found by its exit).
    let mut chosen = None;
    for n in 0..64 {
        let user = format!("alice-session-moving{n}");
        let exit = exit_of(&fleet.http(0, &user, &[]).await.body);
        if fleet.owner_of_exit(&exit) == 2 {
            chosen = Some((user, exit));
            break;
        }
    }
    let (user, exit) = chosen.expect("a session owned by gateway 2");
    assert_eq!(fleet.exit(1, &user, How::Http).await, exit);
    fleet.members[2].gateway.take().unwrap().shutdown().await;
    let hop_timeout = FleetConfig::new(SocketAddr::from(([127, 0, 0, 1], 1)))
        .hop_timeout
        .as_duration();
    let started = Instant::now();
    let moved = fleet.http(0, &user, &[]).await;
    assert!(
        started.elapsed() < hop_timeout,
        "answered in {:?}",
        started.elapsed()
    );
    assert_eq!(
        moved.header("x-proxypool-session"),
        Some("reassigned"),
        "{moved:?}"
    );
    let new_exit = exit_of(&moved.body);
    let new_owner = fleet.owner_of_exit(&new_exit);
    assert_ne!(new_owner, 2);
    // Every member still up agrees on the new owner.
    for at in [1, 0, 1] {
        let response = fleet.http(at, &user, &[]).await;
        assert_eq!(exit_of(&response.body), new_exit, "at {at}: {response:?}");
        assert_eq!(response.header("x-proxypool-session"), Some("pinned"));
    }
    fleet.shutdown().await;
}
