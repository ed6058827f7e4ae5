//! A waiting snapshot long-poll over the store's snapshot version: it notices a change
//! another controller made and a change made by time alone within `poll_interval`, and
//! while nothing changes it reads only the version.
//!
//! The tests count store calls in the process's one metrics registry, so they run one at
//! a time (`SERIAL`).

use crate::SERIAL;
use crate::common::*;
use hyper::StatusCode;
use proxypool_controller::{AlwaysLeader, Controller, OpenedStore};
use std::time::{Duration, Instant};

/// `poll_interval` is 50 ms in the test config: an answer well within a second is the
/// periodic look, not the end of the wait (8 s).
const WAIT_MS: u64 = 8_000;
const PROMPT: Duration = Duration::from_secs(1);

/// Waits until a waiting poll has looked at the store's snapshot version `looks` more
/// times (one look per `poll_interval`), so it has had its chances to answer early.
async fn until_the_poll_looked(looks: u64) {
    let before = store_calls("snapshot_version");
    eventually_async(
        "the waiting poll looked at the version",
        Duration::from_secs(10),
        async || (store_calls("snapshot_version") >= before + looks).then_some(()),
    )
    .await;
}

/// Store calls the controllers of this process made so far, by call name.
fn store_calls(call: &str) -> u64 {
    let handle = proxypool_metrics::install().expect("the controller installed the recorder");
    let series = format!("proxypool_controller_store_duration_seconds_count{{call=\"{call}\"}} ");
    handle
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_poll_notices_a_change_another_controller_made() {
    let _serial = SERIAL.lock().await;
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (serving, pool, clock) = controller(config.clone());
    // A second controller on the same store: its writes do not reach the first one's
    // change signal, only the store.
    let other = Controller::with_store(
        config,
        OpenedStore {
            pool: pool.clone(),
            leadership: std::sync::Arc::new(AlwaysLeader::new()),
        },
        clock.clone(),
    );
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(&serving).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    serving.ownership_manager().round().await.unwrap();
    let (current, owned) = client.sync("gw-a", "s", 0).await;
    assert_eq!(owned.len(), 3);
    let version = current["version"].as_u64().unwrap();

    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.snapshot("gw-a", "s", version, WAIT_MS).await })
    };
    until_the_poll_looked(3).await;
    assert!(
        !waiting.is_finished(),
        "nothing changed yet: the poll waits"
    );

    seed_more(pool.as_ref(), T0, "acme", 3, 2).await;
    let started = Instant::now();
    let round = other.ownership_manager().round().await.unwrap();
    assert_eq!(
        round.assigned, 2,
        "the other controller leases the new proxies"
    );
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        started.elapsed() < PROMPT,
        "answered after {:?}",
        started.elapsed()
    );
    let snapshot = reply.json();
    assert_eq!(snapshot["proxies"].as_array().unwrap().len(), 5);
    assert_eq!(snapshot["reference"]["version"], version + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_poll_notices_a_lease_ending_by_the_clock() {
    let _serial = SERIAL.lock().await;
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, clock) = controller(config);
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    // Leases of 30 s from T0; the session (30 s too) is renewed below, so only the
    // leases end.
    controller.ownership_manager().round().await.unwrap();
    let (current, owned) = client.sync("gw-a", "s", 0).await;
    assert_eq!(owned.len(), 3);
    let version = current["version"].as_u64().unwrap();
    clock.set(T0 + 20_000);
    assert_eq!(client.register("gw-a", "s").await.status, StatusCode::OK);

    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.snapshot("gw-a", "s", version, WAIT_MS).await })
    };
    until_the_poll_looked(3).await;
    assert!(!waiting.is_finished(), "nothing ended yet: the poll waits");

    // No write happens: only time passes the leases' end.
    let started = Instant::now();
    clock.set(T0 + 30_000);
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        started.elapsed() < PROMPT,
        "answered after {:?}",
        started.elapsed()
    );
    let snapshot = reply.json();
    assert!(
        snapshot["proxies"].as_array().unwrap().is_empty(),
        "every lease ended: {snapshot}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_poll_reads_only_the_version_while_nothing_changes() {
    let _serial = SERIAL.lock().await;
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, _clock) = controller(config);
    seed_available(pool.as_ref(), T0, "acme", 3).await;
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    controller.ownership_manager().round().await.unwrap();
    let (current, _) = client.sync("gw-a", "s", 0).await;
    let version = current["version"].as_u64().unwrap();

    let (owned_before, versions_before) =
        (store_calls("owned_by"), store_calls("snapshot_version"));
    // Two polls in a row, as a gateway does after a 204: neither rebuilds.
    for _ in 0..2 {
        let reply = client.snapshot("gw-a", "s", version, 500).await;
        assert_eq!(reply.status, StatusCode::NO_CONTENT);
    }
    let versions = store_calls("snapshot_version") - versions_before;
    assert_eq!(
        store_calls("owned_by"),
        owned_before,
        "no re-read of the worker's records while nothing changed"
    );
    // About one look per 50 ms over 1 s (fewer on a loaded machine).
    assert!(versions >= 4, "{versions} version reads");
}
