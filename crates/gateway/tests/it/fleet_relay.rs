//! The fleet's entry side end to end: three gateways, each with its own test controller
//! and its own leased sim upstreams (each upstream leaving from its own 127.0.0.x exit,
//! which the sim origin echoes), all three listed as one fleet. A session or rotation key
//! sent round-robin to the three over HTTP, CONNECT and SOCKS5 keeps the exits of its one
//! owner; a request without a key is served where it lands; a client cannot speak for the
//! fleet; an owner that goes away hands its keys to the next owner at once. An owner that
//! stops answering behind an open connection (frozen behind a [`BlackHole`]) is given up
//! within the hop's bounds, not the answer's; one that is only slow is waited for.

use crate::common::fleet::{BlackHole, Fleet, How};
use crate::common::upstreams::exit_of;
use crate::common::{Millis, client, curl, http_proxy_url};
use proxypool_gateway::{ERROR_HEADER, FleetConfig, GatewayConfig, SESSION_HEADER};
use proxypool_sim::Origin;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

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

/// `hop_timeout` in the tests of a stopped or slow owner.
const HOP_TIMEOUT: Duration = Duration::from_secs(1);

/// Short hop bounds (`hop_timeout` 1 s, `connect_timeout` 500 ms) beside dials whose
/// handshake may take 20 s: the longest a live owner may take to answer (over 21 s) is
/// then far from what giving up a stopped one may take (about 2 * 1 s + 500 ms).
fn quick_hops(config: &mut GatewayConfig) {
    let fleet = config.fleet.as_mut().expect("a fleet member");
    fleet.hop_timeout = Millis::from_duration(HOP_TIMEOUT);
    fleet.connect_timeout = Millis(500);
    config.dial.handshake_timeout = Millis::from_secs(20);
}

/// A session of alice's owned by member `owner`, found through gateway 0 (the first
/// request pins the owner's exit), and that exit.
async fn session_owned_by(fleet: &Fleet, owner: usize, name: &str) -> (String, String) {
    for n in 0..64 {
        let user = format!("alice-session-{name}{n}");
        let exit = exit_of(&fleet.http(0, &user, &[]).await.body);
        if fleet.owner_of_exit(&exit) == owner {
            return (user, exit);
        }
    }
    panic!("none of 64 sessions is owned by gateway {owner}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_stops_answering_is_given_up_within_the_hops_bounds() {
    let origin = Origin::start().await.unwrap();
    let (fleet, hole): (Fleet, BlackHole) =
        Fleet::start_with_black_hole(200, origin, vec![client("alice")], quick_hops, 2).await;
    let (http_user, http_exit) = session_owned_by(&fleet, 2, "frozenhttp").await;
    let (connect_user, connect_exit) = session_owned_by(&fleet, 2, "frozenconnect").await;
    // Relayed by gateway 0 over a pooled hop connection, which stays open.
    for _ in 0..2 {
        assert_eq!(fleet.exit(0, &http_user, How::Http).await, http_exit);
    }
    hole.freeze();

    // The request is written on the kept-alive connection and never answered; the
    // probe's handshake cannot finish either.
    let proxy = http_proxy_url(&http_user, fleet.members[0].gateway().http);
    let started = Instant::now();
    let refused = curl(&["-x", &proxy, &fleet.origin.url("/")]).await;
    let took = started.elapsed();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(
        refused.header(ERROR_HEADER),
        Some("fleet_unavailable"),
        "{refused:?}"
    );
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(
        took >= HOP_TIMEOUT && took < Duration::from_secs(8),
        "given up after {took:?}, not within the hop's bounds (the answer's is over 21 s)"
    );
    // The member is unreachable for gateway 0 now: the session's next owner serves it.
    let moved = fleet.http(0, &http_user, &[]).await;
    assert_eq!(
        moved.header(SESSION_HEADER),
        Some("reassigned"),
        "{moved:?}"
    );
    let new_exit = exit_of(&moved.body);
    assert_ne!(fleet.owner_of_exit(&new_exit), 2, "{moved:?}");
    assert_eq!(fleet.exit(0, &http_user, How::Http).await, new_exit);

    // A tunnel through gateway 1 (which has not given the member up yet) takes a hop of
    // its own, whose handshake cannot finish: the next owner opens it.
    let started = Instant::now();
    let tunneled = fleet.exit(1, &connect_user, How::Connect).await;
    let took = started.elapsed();
    assert!(
        took >= HOP_TIMEOUT && took < Duration::from_secs(8),
        "tunnel opened after {took:?}"
    );
    assert_ne!(tunneled, connect_exit);
    assert_ne!(fleet.owner_of_exit(&tunneled), 2, "{tunneled}");
    assert_eq!(fleet.exit(1, &connect_user, How::Connect).await, tunneled);

    // Closed first, so no member waits on a frozen connection while it stops.
    drop(hole);
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_slower_than_the_hop_timeout_is_waited_for_not_given_up() {
    let origin = Origin::start().await.unwrap();
    let fleet = Fleet::start_with(210, origin, vec![client("alice")], quick_hops).await;
    let (user, exit) = session_owned_by(&fleet, 2, "slow").await;
    let (slow_url, _slow) = slow_origin(2 * HOP_TIMEOUT).await;

    let proxy = http_proxy_url(&user, fleet.members[0].gateway().http);
    let started = Instant::now();
    let slow = curl(&["-x", &proxy, &slow_url]).await;
    let took = started.elapsed();
    assert_eq!(slow.status, 200, "after {took:?}: {slow:?}");
    assert!(took >= 2 * HOP_TIMEOUT, "the origin answered in {took:?}");
    assert_eq!(exit_of(&slow.body), exit, "{slow:?}");
    assert_eq!(slow.header(SESSION_HEADER), Some("pinned"), "{slow:?}");
    // Not marked unreachable: the session's next request still goes to its owner.
    let next = fleet.http(0, &user, &[]).await;
    assert_eq!(exit_of(&next.body), exit, "{next:?}");
    assert_eq!(next.header(SESSION_HEADER), Some("pinned"), "{next:?}");
    fleet.shutdown().await;
}

/// A loopback origin that answers every request `delay` after its head arrived, with the
/// sim origin's echo of the peer (the exit): an owner's slow answer, not a dead one. Its
/// URL, and its handle (the origin stops when that is dropped).
async fn slow_origin(delay: Duration) -> (String, SlowOrigin) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((mut stream, peer)) = accepted else { continue };
                    connections.spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 4096];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        tokio::time::sleep(delay).await;
                        let body = format!("{{\"exit\":\"{}\"}}", peer.ip());
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = stream.write_all(answer.as_bytes()).await;
                        let _ = stream.shutdown().await;
                    });
                }
                Some(_) = connections.join_next() => {}
            }
        }
    });
    (url, SlowOrigin(task))
}

/// The slow origin's serving task, ended with it.
struct SlowOrigin(JoinHandle<()>);

impl Drop for SlowOrigin {
    fn drop(&mut self) {
        self.0.abort();
    }
}
