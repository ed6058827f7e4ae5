//! Ownership across two workers over the real control API: assign, renew, drain (with the
//! worker's report deciding when a drain is done) and expire, on a time-travelling clock.

mod common;

use common::*;
use hyper::StatusCode;
use proxypool_controller::Clock;
use proxypool_core::{OwnershipRepository, ProxyId, WorkerId};
use std::collections::HashSet;

#[tokio::test]
async fn two_workers_share_assign_renew_drain_and_expire() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let seeded = seed_available(pool.as_ref(), T0, "acme", 6).await;

    // One worker takes everything.
    assert_eq!(client.register("gw-a", "a1").await.status, StatusCode::OK);
    let round = manager.round().await.unwrap();
    assert_eq!(round.assigned, 6);
    let (ref_a1, owned_a) = client.sync("gw-a", "a1", 0).await;
    assert_eq!(owned_a.len(), 6);
    assert_eq!(ref_a1["version"], 1);

    // A second worker joins: the first drains half of its proxies.
    assert_eq!(client.register("gw-b", "b1").await.status, StatusCode::OK);
    let round = manager.round().await.unwrap();
    assert_eq!(round.drains_started, 3);
    assert_eq!(
        round.assigned, 0,
        "drained proxies stay owned until the worker lets go"
    );
    let (ref_a2, owned_a) = client.sync("gw-a", "a1", 1).await;
    assert_eq!(
        owned_a.len(),
        3,
        "the new snapshot no longer lists the draining proxies"
    );
    let draining: Vec<String> = seeded
        .iter()
        .map(ProxyId::to_string)
        .filter(|id| !owned_a.contains(id))
        .collect();
    assert_eq!(draining.len(), 3);

    // The worker still has a connection on one draining proxy: only the idle two are released.
    let busy = draining[0].as_str();
    let report = client
        .report("gw-a", "a1", 1, &ref_a2, &[(busy, 1, 0)])
        .await;
    assert_eq!(report.status, StatusCode::OK);
    assert_eq!(report.json()["outcome"], "accepted");
    let round = manager.round().await.unwrap();
    assert_eq!(round.drains_acknowledged, 2);
    assert_eq!(
        round.assigned, 2,
        "released proxies go to the other worker in the same round"
    );
    let (mut ref_b, owned_b) = client.sync("gw-b", "b1", 0).await;
    assert_eq!(owned_b.len(), 2);
    assert!(!owned_b.iter().any(|id| id == busy));

    // The connection ends: the last drain completes and the proxy moves.
    let report = client.report("gw-a", "a1", 2, &ref_a2, &[]).await;
    assert_eq!(report.status, StatusCode::OK);
    let round = manager.round().await.unwrap();
    assert_eq!((round.drains_acknowledged, round.assigned), (1, 1));
    let (r, owned_b) = client
        .sync("gw-b", "b1", ref_b["version"].as_u64().unwrap())
        .await;
    ref_b = r;
    assert_eq!(owned_b.len(), 3);
    let all: HashSet<String> = owned_a.iter().chain(owned_b.iter()).cloned().collect();
    assert_eq!(all.len(), 6, "every proxy has exactly one owner");

    // Renewal: 21 s later leases are within renew_before (10 s of a 30 s lease).
    let proxy = ProxyId::new(&owned_b[0]).unwrap();
    let before = pool.get(clock.now(), &proxy).await.unwrap().unwrap();
    clock.advance(21_000);
    // Reports keep both sessions alive.
    assert_eq!(
        client.report("gw-a", "a1", 3, &ref_a2, &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        client.report("gw-b", "b1", 1, &ref_b, &[]).await.status,
        StatusCode::OK
    );
    let round = manager.round().await.unwrap();
    assert_eq!(round.renewed, 6);
    let after = pool.get(clock.now(), &proxy).await.unwrap().unwrap();
    assert_eq!(after.epoch, before.epoch);
    assert_eq!(after.lease_until_ms, clock.now() + 30_000);

    // gw-b goes silent: its session lapses, its leases are not renewed and expire, and its
    // proxies go back to gw-a.
    // (Its last renewal, while its session still lived, runs to t+71s.)
    for step in 0..5u64 {
        clock.advance(10_000);
        let report = client.report("gw-a", "a1", 4 + step, &ref_a2, &[]).await;
        assert_eq!(report.status, StatusCode::OK);
        manager.round().await.unwrap();
    }
    let b = WorkerId::new("gw-b").unwrap();
    assert!(
        pool.owned_by(clock.now(), &b, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let (_, owned_a) = client
        .sync("gw-a", "a1", ref_a2["version"].as_u64().unwrap())
        .await;
    assert_eq!(owned_a.len(), 6, "gw-a owns everything again");
}

#[tokio::test]
async fn per_worker_target_leaves_proxies_for_extraction() {
    let text = config_text(&static_upstream("acme"))
        .replace("per_worker_target = 100", "per_worker_target = 2");
    let (controller, pool, _clock) = controller(parse_config(&text));
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    seed_available(pool.as_ref(), T0, "acme", 5).await;
    client.register("gw-a", "a1").await;
    let round = controller.ownership_manager().round().await.unwrap();
    assert_eq!(round.assigned, 2);
    let free = pool.assignable(T0, 100).await.unwrap();
    assert_eq!(free.len(), 3);
}

#[tokio::test]
async fn a_cordoned_worker_hands_its_proxies_over_after_its_connections_end() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, _clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    seed_available(pool.as_ref(), T0, "acme", 4).await;
    client.register("gw-a", "a1").await;
    client.register("gw-b", "b1").await;
    manager.round().await.unwrap();
    let (_, owned_a) = client.sync("gw-a", "a1", 0).await;
    assert_eq!(owned_a.len(), 2);

    controller.cordon(&WorkerId::new("gw-a").unwrap());
    let round = manager.round().await.unwrap();
    assert_eq!((round.drains_started, round.assigned), (2, 0));
    let (reference, owned_a) = client.sync("gw-a", "a1", 1).await;
    assert!(owned_a.is_empty());
    client.report("gw-a", "a1", 1, &reference, &[]).await;
    let round = manager.round().await.unwrap();
    assert_eq!((round.drains_acknowledged, round.assigned), (2, 2));
    let b = WorkerId::new("gw-b").unwrap();
    assert_eq!(pool.owned_by(T0, &b, 100).await.unwrap().len(), 4);
    assert_eq!(
        controller.cordons().list(),
        vec![WorkerId::new("gw-a").unwrap()]
    );
}
