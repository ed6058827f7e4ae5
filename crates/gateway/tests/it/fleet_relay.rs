//! The fleet's entry side end to end: three gateways, each with its own test controller
//! and its own leased sim upstreams (each upstream leaving from its own 127.0.0.x exit,
//! which the sim origin echoes), all three listed as one fleet. A session or rotation key
//! sent round-robin to the three over HTTP, CONNECT and SOCKS5 keeps the exits of its one
//! owner; a request without a key is served where it lands; a client cannot speak for the
//! fleet; an owner that goes away hands its keys to the next owner at once.

use crate::common::fleet::{Fleet, How};
use crate::common::upstreams::exit_of;
use proxypool_gateway::FleetConfig;
use std::net::SocketAddr;
use std::time::Instant;

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
