//! Ownership across two workers over the real control API: assign, renew, drain (with the
//! worker's report deciding when a drain is done) and expire, on a time-travelling clock;
//! a clean session close handing a worker's proxies back at once (a stale one: nothing);
//! a crashed worker's proxies coming back once its session lapses; and the share of the
//! pool kept unowned for extraction.

use crate::common::*;
use hyper::StatusCode;
use proxypool_controller::Clock;
use proxypool_core::{
    ActivityPool, AdminStore, OwnershipRepository, ProxyId, WorkerId, WorkerMode,
    WorkerRuntimeStore,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

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

    // gw-b goes silent: once its session lapses its proxies are released (its last lease
    // renewal, while its session still lived, ran to t+71s) and go back to gw-a.
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

/// With `extraction_share`, a round leases only what leaves extraction its share of the
/// usable proxies and takes nothing back when extraction uses its share up; the
/// controller's view says how the pool is split, and since when the gateways hold it all.
#[tokio::test]
async fn the_extraction_share_stays_unowned_and_the_view_shows_the_split() {
    use proxypool_core::{ClientId, ExtractMode, ExtractRequest, Extractor, ProxyFilter};
    let text = config_text(&static_upstream("acme")).replace(
        "per_worker_target = 100",
        "per_worker_target = 100\nextraction_share = 0.5",
    );
    let (controller, pool, clock) = controller(parse_config(&text));
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    seed_available(pool.as_ref(), T0, "acme", 6).await;
    assert_eq!(controller.extraction_view(), None, "no round yet");
    client.register("gw-a", "a1").await;
    assert_eq!(manager.round().await.unwrap().assigned, 3);
    assert_eq!(pool.assignable(clock.now(), 100).await.unwrap().len(), 3);
    let view = controller.extraction_view().unwrap();
    assert_eq!(view.extraction_share, 0.5);
    assert_eq!((view.unowned, view.leased), (3, 3));
    assert_eq!(view.gateways_hold_all_since_ms, None);

    // Extraction takes its three: the gateway keeps its own, and now holds every usable one.
    let request = ExtractRequest {
        project: None,
        for_domain: None,
        client: ClientId::new("acme").unwrap(),
        idempotency_key: None,
        request_id: "take-the-share".into(),
        count: 3,
        mode: ExtractMode::AllOrNothing,
        filter: ProxyFilter::default(),
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 60_000,
        key_held_ms: 0,
    };
    let taken = pool.extract(clock.now(), request).await.unwrap();
    assert_eq!(taken.response.proxies.len(), 3);
    clock.advance(1_000);
    let round = manager.round().await.unwrap();
    assert_eq!((round.assigned, round.drains_started), (0, 0));
    let view = controller.extraction_view().unwrap();
    assert_eq!((view.unowned, view.leased), (0, 3));
    assert_eq!(view.gateways_hold_all_since_ms, Some(clock.now()));

    // Only the leader's current view is shown: one left over from rounds long ago is not.
    clock.advance(6_000);
    assert_eq!(controller.extraction_view(), None);
}

#[tokio::test]
async fn a_draining_worker_hands_its_proxies_over_after_its_connections_end() {
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

    // Set through the store (as any controller's admin route does), not this process.
    pool.set_worker_mode(T0, &WorkerId::new("gw-a").unwrap(), WorkerMode::Draining)
        .await
        .unwrap();
    let round = manager.round().await.unwrap();
    assert_eq!((round.drains_started, round.assigned), (2, 0));
    let (reference, owned_a) = client.sync("gw-a", "a1", 1).await;
    assert!(owned_a.is_empty());
    client.report("gw-a", "a1", 1, &reference, &[]).await;
    let round = manager.round().await.unwrap();
    assert_eq!((round.drains_acknowledged, round.assigned), (2, 2));
    let b = WorkerId::new("gw-b").unwrap();
    assert_eq!(pool.owned_by(T0, &b, 100).await.unwrap().len(), 4);
    let modes = pool.worker_modes().await.unwrap();
    assert_eq!(modes.len(), 1);
    assert_eq!(modes[0].mode, WorkerMode::Draining);
}

#[tokio::test]
async fn a_cordoned_worker_keeps_its_proxies_gets_no_new_ones_and_an_uncordon_lifts_it() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, _clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let a = WorkerId::new("gw-a").unwrap();
    let b = WorkerId::new("gw-b").unwrap();
    seed_available(pool.as_ref(), T0, "acme", 2).await;
    client.register("gw-a", "a1").await;
    manager.round().await.unwrap();
    assert_eq!(pool.owned_by(T0, &a, 100).await.unwrap().len(), 2);

    pool.set_worker_mode(T0, &a, WorkerMode::Cordoned)
        .await
        .unwrap();
    client.register("gw-b", "b1").await;
    seed_more(pool.as_ref(), T0, "acme", 2, 4).await;
    let round = manager.round().await.unwrap();
    assert_eq!(round.drains_started, 0, "a cordon takes nothing away");
    assert_eq!(pool.owned_by(T0, &a, 100).await.unwrap().len(), 2);
    assert_eq!(
        pool.owned_by(T0, &b, 100).await.unwrap().len(),
        4,
        "new ones go elsewhere"
    );

    pool.set_worker_mode(T0, &a, WorkerMode::Active)
        .await
        .unwrap();
    seed_more(pool.as_ref(), T0, "acme", 6, 2).await;
    manager.round().await.unwrap();
    assert!(
        pool.owned_by(T0, &a, 100).await.unwrap().len() > 2,
        "uncordoned: takes leases again"
    );
}

/// Each seeded proxy's owner right now (`None` = unowned); `get` returns one assignment per
/// proxy, so this also shows no proxy has two owners.
async fn owners(pool: &dyn ActivityPool, now: u64, proxies: &[ProxyId]) -> Vec<Option<String>> {
    let mut owners = Vec::with_capacity(proxies.len());
    for proxy in proxies {
        let assignment = pool.get(now, proxy).await.unwrap();
        owners.push(assignment.map(|a| a.worker.to_string()));
    }
    owners
}

#[tokio::test]
async fn a_clean_session_close_hands_the_workers_proxies_back_at_once() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let seeded = seed_available(pool.as_ref(), T0, "acme", 6).await;
    client.register("gw-a", "a1").await;
    client.register("gw-b", "b1").await;
    manager.round().await.unwrap();
    let (reference, owned_a) = client.sync("gw-a", "a1", 0).await;
    assert_eq!(owned_a.len(), 3);
    client.sync("gw-b", "b1", 0).await;

    // One of gw-a's proxies is already draining (an operator cordon) when it stops, and its
    // last report still shows a connection: a worker that says it is gone has none.
    let a = WorkerId::new("gw-a").unwrap();
    pool.set_worker_mode(T0, &a, WorkerMode::Draining)
        .await
        .unwrap();
    let round = manager.round().await.unwrap();
    assert_eq!(round.drains_started, 3);
    pool.set_worker_mode(T0, &a, WorkerMode::Active)
        .await
        .unwrap();
    let busy = owned_a[0].as_str();
    let report = client
        .report("gw-a", "a1", 1, &reference, &[(busy, 1, 0)])
        .await;
    assert_eq!(report.status, StatusCode::OK);

    assert_eq!(
        client.close("gw-a", "a1").await.status,
        StatusCode::NO_CONTENT
    );
    let a = WorkerId::new("gw-a").unwrap();
    let now = clock.now();
    assert_eq!(now, T0, "no time passed: nothing lapsed");
    assert!(pool.owned_by(now, &a, 100).await.unwrap().is_empty());
    assert!(pool.draining_of(now, &a, 100).await.unwrap().is_empty());
    let after_close = owners(pool.as_ref(), now, &seeded).await;
    assert!(
        after_close
            .iter()
            .all(|o| o.is_none() || o.as_deref() == Some("gw-b")),
        "{after_close:?}"
    );
    assert_eq!(pool.assignable(now, 100).await.unwrap().len(), 3);

    // The next round (which the close woke) gives them to the other worker.
    let round = manager.round().await.unwrap();
    assert_eq!(round.assigned, 3);
    let after_round = owners(pool.as_ref(), now, &seeded).await;
    assert!(
        after_round.iter().all(|o| o.as_deref() == Some("gw-b")),
        "{after_round:?}"
    );
    let (_, owned_b) = client.sync("gw-b", "b1", 1).await;
    assert_eq!(owned_b.len(), 6);
    assert!(pool.owned_by(now, &a, 100).await.unwrap().is_empty());
}

#[tokio::test]
async fn closing_a_stale_session_releases_nothing() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let seeded = seed_available(pool.as_ref(), T0, "acme", 4).await;
    client.register("gw-a", "a1").await;
    client.register("gw-b", "b1").await;
    manager.round().await.unwrap();
    // gw-a restarts: its new session keeps the worker's proxies.
    client.register("gw-a", "a2").await;
    let before = owners(pool.as_ref(), clock.now(), &seeded).await;
    let a = WorkerId::new("gw-a").unwrap();
    let held = pool.owned_by(clock.now(), &a, 100).await.unwrap();
    assert_eq!(held.len(), 2);

    // The old process's late DELETE is fenced and takes nothing with it.
    let reply = client.close("gw-a", "a1").await;
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (StatusCode::CONFLICT, "fenced")
    );
    assert_eq!(owners(pool.as_ref(), clock.now(), &seeded).await, before);
    assert_eq!(pool.owned_by(clock.now(), &a, 100).await.unwrap(), held);
    assert!(
        pool.draining_of(clock.now(), &a, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let round = manager.round().await.unwrap();
    assert_eq!((round.assigned, round.drains_started), (0, 0));
    let (_, owned_a) = client.sync("gw-a", "a2", 0).await;
    assert_eq!(owned_a.len(), 2, "the live session still serves them");
}

#[tokio::test]
async fn a_running_controller_reassigns_a_closed_workers_proxies_without_waiting_a_round() {
    // Rounds are a minute apart, so a reassignment within seconds is the close's wake-up.
    let text = config_text("")
        .replace("lease = \"30s\"", "lease = \"10m\"")
        .replace("renew_before = \"10s\"", "renew_before = \"5m\"")
        .replace("interval = \"200ms\"", "interval = \"60s\"");
    let (controller, pool, clock) = controller(parse_config(&text));
    let seeded = seed_available(pool.as_ref(), T0, "acme", 4).await;
    // Sessions opened before start, so the first round splits the proxies between them.
    for (worker, session) in [("gw-a", "a1"), ("gw-b", "b1")] {
        pool.open_session(T0, &WorkerId::new(worker).unwrap(), session, 30_000)
            .await
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = controller.start_on(listener).unwrap();
    let client = ControlClient::new(running.control_addr(), Some(WORKER_TOKEN));
    let b = WorkerId::new("gw-b").unwrap();
    let owned_by_b = || async { pool.owned_by(clock.now(), &b, 100).await.unwrap().len() };
    eventually_async("gw-b owns two", Duration::from_secs(10), async || {
        (owned_by_b().await == 2).then_some(())
    })
    .await;

    assert_eq!(
        client.close("gw-a", "a1").await.status,
        StatusCode::NO_CONTENT
    );
    eventually_async("gw-b owns all four", Duration::from_secs(10), async || {
        (owned_by_b().await == 4).then_some(())
    })
    .await;
    let after = owners(pool.as_ref(), clock.now(), &seeded).await;
    assert!(after.iter().all(|o| o.as_deref() == Some("gw-b")));
    running.shutdown().await;
}

#[tokio::test]
async fn release_works_in_batches_and_spares_later_assignments() {
    let (_controller, pool, _clock) = controller(parse_config(&config_text("")));
    let count = u16::try_from(proxypool_controller::ownership::RELEASE_BATCH).unwrap() + 44;
    let seeded = seed_available(pool.as_ref(), T0, "acme", count).await;
    let a = WorkerId::new("gw-a").unwrap();
    let (last, earlier) = seeded.split_last().unwrap();
    for proxy in earlier {
        pool.assign(T0, proxy, &a, 30_000).await.unwrap();
    }
    // Already draining when the worker stops.
    let drained = pool.owned_by(T0, &a, 1).await.unwrap().remove(0).assignment;
    pool.begin_drain(T0, &drained.proxy_id, &a, drained.epoch)
        .await
        .unwrap();
    let up_to_epoch = pool.current_epoch(T0).await.unwrap();
    // Assigned after the close (a new session of the same worker id): not ours to release.
    pool.assign(T0, last, &a, 30_000).await.unwrap();

    let done = proxypool_controller::ownership::release_worker(pool.as_ref(), T0, &a, up_to_epoch)
        .await
        .unwrap();
    assert_eq!((done.released, done.skipped), (earlier.len(), 1));
    let left = pool.owned_by(T0, &a, 1_000).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(&left[0].assignment.proxy_id, last);
    assert!(pool.draining_of(T0, &a, 1_000).await.unwrap().is_empty());
    assert_eq!(
        pool.assignable(T0, 1_000).await.unwrap().len(),
        earlier.len()
    );
}

/// A proxy that fails a health check while the worker still relays a long tunnel through
/// it: the assignment moves to draining and is renewed as long as the worker's reports
/// show the tunnel, so for three lease lengths nobody else can extract or lease it, and
/// every report of the worker is accepted. When the tunnel ends it is given back, and, being
/// SUSPECT, goes to nobody.
#[tokio::test]
async fn a_busy_proxy_that_turns_suspect_stays_with_its_worker_for_as_long_as_it_is_busy() {
    use proxypool_core::{
        CheckOutcome, ClientId, ExtractMode, ExtractRequest, Extractor, HealthBatch,
        HealthObservation, HealthStore, PoolError, ProxyFilter,
    };
    let config = parse_config(&config_text(&static_upstream("acme")));
    let lease_ms = config.ownership.lease.0;
    let (controller, pool, clock) = controller(config);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let seeded = seed_available(pool.as_ref(), T0, "acme", 1).await;
    let proxy = seeded[0].clone();
    let (a, b) = (
        WorkerId::new("gw-a").unwrap(),
        WorkerId::new("gw-b").unwrap(),
    );

    client.register("gw-a", "a1").await;
    manager.round().await.unwrap();
    let (reference, owned) = client.sync("gw-a", "a1", 0).await;
    assert_eq!(owned, vec![proxy.to_string()]);
    let mut sequence = 1;
    let busy = [(proxy.as_str(), 1, 0)];
    let report = client
        .report("gw-a", "a1", sequence, &reference, &busy)
        .await;
    assert_eq!(report.status, StatusCode::OK);

    // One failed check: SUSPECT (two would make it UNHEALTHY).
    pool.apply_health(
        clock.now(),
        HealthBatch {
            observations: vec![HealthObservation {
                proxy_id: proxy.clone(),
                checked_at_ms: clock.now(),
                outcome: CheckOutcome::Failure {
                    error: "connect_timeout".into(),
                },
            }],
            unhealthy_after_failures: 2,
        },
    )
    .await
    .unwrap();
    client.register("gw-b", "b1").await;
    let (reference_b, owned_b) = client.sync("gw-b", "b1", 0).await;
    assert!(owned_b.is_empty());

    let extract = |now: u64| {
        let pool = Arc::clone(&pool);
        async move {
            let request = ExtractRequest {
                project: None,
                for_domain: None,
                client: ClientId::new("acme").unwrap(),
                idempotency_key: None,
                request_id: format!("probe-{now}"),
                count: 1,
                mode: ExtractMode::AllOrNothing,
                filter: ProxyFilter::default(),
                min_health_freshness_ms: None,
                reserve_for_gateway: 0,
                idempotency_ttl_ms: 60_000,
                key_held_ms: 0,
            };
            pool.extract(now, request).await
        }
    };
    let start = clock.now();
    let mut first_round = true;
    while clock.now() < start + 3 * lease_ms {
        let round = manager.round().await.unwrap();
        if first_round {
            assert_eq!(
                round.drains_started, 1,
                "busy and no longer serving: draining"
            );
            first_round = false;
        }
        let assignment = pool.get(clock.now(), &proxy).await.unwrap().expect("owned");
        assert_eq!(assignment.worker, a, "at +{} ms", clock.now() - start);
        assert!(assignment.is_draining());
        assert!(assignment.lease_until_ms > clock.now());
        assert!(pool.owned_by(clock.now(), &b, 10).await.unwrap().is_empty());
        assert!(matches!(
            extract(clock.now()).await,
            Err(PoolError::InsufficientInventory { .. })
        ));
        clock.advance(5_000);
        sequence += 1;
        let report = client
            .report("gw-a", "a1", sequence, &reference, &busy)
            .await;
        assert_eq!(report.status, StatusCode::OK, "{}", report.json());
        assert_eq!(report.json()["outcome"], "accepted");
        assert!(
            report.json().get("stale_proxies").is_none(),
            "{}",
            report.json()
        );
        let report = client
            .report("gw-b", "b1", sequence, &reference_b, &[])
            .await;
        assert_eq!(report.status, StatusCode::OK);
    }
    assert!(clock.now() - start >= 3 * lease_ms);

    // The tunnel ends: once the worker has applied the snapshot without it (the drain's
    // epoch) and reports it idle, the drain is acknowledged and the SUSPECT proxy is owned
    // by nobody.
    let (drained, owned) = client.sync("gw-a", "a1", 1).await;
    assert!(owned.is_empty());
    sequence += 1;
    let report = client.report("gw-a", "a1", sequence, &drained, &[]).await;
    assert_eq!(report.status, StatusCode::OK);
    let round = manager.round().await.unwrap();
    assert_eq!(round.drains_acknowledged, 1);
    assert!(pool.get(clock.now(), &proxy).await.unwrap().is_none());
    assert!(pool.owned_by(clock.now(), &b, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_crashed_workers_proxies_come_back_when_its_session_lapses_not_its_leases() {
    let config = parse_config(&config_text(&static_upstream("acme")));
    let (controller, pool, clock) = controller(config);
    let client = ControlClient::new(serve_control(&controller).await, Some(WORKER_TOKEN));
    let manager = controller.ownership_manager();
    let seeded = seed_available(pool.as_ref(), T0, "acme", 6).await;
    for (worker, session) in [("gw-a", "a"), ("gw-b", "b"), ("gw-c", "c")] {
        assert_eq!(
            client.register(worker, session).await.status,
            StatusCode::OK
        );
    }
    assert_eq!(manager.round().await.unwrap().assigned, 6);
    let (ref_a, _) = client.sync("gw-a", "a", 0).await;
    let before = owners(pool.as_ref(), clock.now(), &seeded).await;
    let held_by = |owners: &[Option<String>], worker: &str| {
        owners
            .iter()
            .filter(|o| o.as_deref() == Some(worker))
            .count()
    };
    let crashed_held = held_by(&before, "gw-b");
    assert!(crashed_held > 0, "{before:?}");

    // gw-a keeps reporting; gw-b crashed at T0; gw-c goes silent too, then comes back.
    // Leases are renewed while every session still lives (30 s leases, 10 s ahead).
    clock.advance(21_000);
    let report = client.report("gw-a", "a", 1, &ref_a, &[]).await;
    assert_eq!(report.status, StatusCode::OK);
    let round = manager.round().await.unwrap();
    assert_eq!((round.renewed, round.orphans_released), (6, 0));
    let lease_end = pool
        .get(clock.now(), &seeded[0])
        .await
        .unwrap()
        .unwrap()
        .lease_until_ms;
    assert_eq!(lease_end, T0 + 21_000 + 30_000);

    // Just past session_ttl: gw-b's session lapsed, its leases run 21 s more.
    clock.advance(9_001);
    let report = client.report("gw-a", "a", 2, &ref_a, &[]).await;
    assert_eq!(report.status, StatusCode::OK);
    assert_eq!(
        client.register("gw-c", "c-again").await.status,
        StatusCode::OK
    );
    let round = manager.round().await.unwrap();
    assert_eq!(round.orphans_released, crashed_held);
    assert_eq!(
        round.assigned, crashed_held,
        "the released proxies go to the live workers in the same round"
    );
    let after = owners(pool.as_ref(), clock.now(), &seeded).await;
    assert_eq!(held_by(&after, "gw-b"), 0, "{after:?}");
    assert!(
        after.iter().all(Option::is_some),
        "every proxy serves again: {after:?}"
    );
    for (was, is) in before.iter().zip(&after) {
        if was.as_deref() != Some("gw-b") {
            assert_eq!(was, is, "a worker with a live session keeps its proxies");
        }
    }
    let b = WorkerId::new("gw-b").unwrap();
    assert!(
        pool.draining_of(clock.now(), &b, 100)
            .await
            .unwrap()
            .is_empty()
    );
}
