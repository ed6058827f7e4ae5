//! Incremental snapshots at the gateway: a delta that moves only lease ends and cooldowns
//! is applied to the proxies' slots without a new view, one that adds or removes a proxy
//! builds a new view from the current one, and one that does not fit the held content is refused and the whole snapshot is
//! asked for instead.

use crate::common::control::TestController;
use crate::common::upstreams::dead_addr;
use crate::common::*;
use proxypool_core::{Domain, DomainCooldown, Protocol, now_millis};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_patch_leases_and_cooldowns_rebuild_for_new_proxies_and_recover_when_refused() {
    let _alone = alone().await;
    let controller = TestController::start(WORKER, 60_000).await;
    let addr = dead_addr();
    let p = |n: u8| proxy(n, Protocol::Http, addr, None, "vendor", "us");
    let clients = || vec![client("alice")];
    controller.publish(vec![p(1), p(2), p(3)], clients());
    let mut settings = config(&controller);
    // `/status` lists the cooldowns' entries to the admin token.
    with_operator_token(&mut settings);
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;
    let deltas = "proxypool_gateway_snapshot_updates_total{kind=\"delta\"}";
    let deltas_before = metric(&gateway, deltas).await.unwrap_or(0.0);

    // One lease renewed: a delta, patched into the slot.
    // (earlier than the others, all of which end with their usable-until, an hour out)
    let renewed_until = now_millis() + 1_800_000;
    controller.publish(
        vec![leased_until(p(1), renewed_until), p(2), p(3)],
        clients(),
    );
    acked(&controller, 2).await;
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["snapshot"]["version"], 2, "{status}");
    assert_eq!(
        status["leases"]["earliest_end_ms"], renewed_until,
        "{status}"
    );
    assert_eq!(metric(&gateway, deltas).await, Some(deltas_before + 1.0));

    // A cooldown set on one proxy: a delta, patched into that proxy's table.
    {
        let mut state = controller.state.lock().unwrap();
        state.advisories.cooldowns = vec![DomainCooldown {
            proxy_id: p(2).id,
            domain: Domain::of_host("example.com").unwrap(),
            project: None,
            until_ms: now_millis() + 600_000,
            strikes: 1,
            forget_at_ms: now_millis() + 1_200_000,
        }];
    }
    controller.bump();
    acked(&controller, 3).await;
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["cooldowns"]["cooling"], 1, "{status}");
    assert_eq!(
        status["cooldowns"]["entries"][0]["proxy_id"],
        p(2).id.as_str()
    );

    // A new proxy: a delta too, applied by building a new view.
    controller.publish(
        vec![leased_until(p(1), renewed_until), p(2), p(3), p(4)],
        clients(),
    );
    acked(&controller, 4).await;
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["snapshot"]["proxies"], 4, "{status}");
    assert_eq!(
        status["cooldowns"]["cooling"], 1,
        "kept through the rebuild"
    );
    {
        let state = controller.state.lock().unwrap();
        assert_eq!((state.wholes_served, state.deltas_served), (1, 3));
    }

    // A proxy removed: a new view without it; the others keep their lease ends.
    controller.publish(
        vec![leased_until(p(1), renewed_until), p(2), p(4)],
        clients(),
    );
    acked(&controller, 5).await;
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["snapshot"]["proxies"], 3, "{status}");
    assert_eq!(
        status["leases"]["earliest_end_ms"], renewed_until,
        "{status}"
    );
    assert_eq!(status["cooldowns"]["cooling"], 1, "{status}");

    // A delta whose result does not match: refused, and the whole snapshot asked for.
    controller.state.lock().unwrap().corrupt_next_delta = true;
    controller.publish(vec![p(1), p(2)], clients());
    acked(&controller, 6).await;
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["snapshot"]["proxies"], 2, "{status}");
    {
        let state = controller.state.lock().unwrap();
        assert_eq!(
            (state.wholes_served, state.deltas_served),
            (2, 5),
            "the refused delta was followed by the whole snapshot"
        );
        assert!(
            state
                .acks
                .iter()
                .all(|a| a.snapshot.checksum != "0".repeat(32)),
            "nothing was acknowledged at the wrong checksum"
        );
    }
    let state = controller.state.clone();
    eventually(Duration::from_secs(5), "a full update counted", || {
        state.lock().unwrap().wholes_served == 2
    })
    .await;
    gateway.shutdown().await;
}

/// A controller that speaks another control protocol: the gateway applies nothing from it
/// and says on `/status` which side to upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_of_another_protocol_is_refused_and_named_on_status() {
    let controller = TestController::start(WORKER, 60_000).await;
    controller.state.lock().unwrap().grant_protocol = Some(1);
    controller.publish(vec![], vec![client("alice")]);
    let gateway = Running::start(config(&controller)).await;
    let shown = eventually_async("a control error", Duration::from_secs(10), async || {
        let (_, status) = admin_json(&gateway, "/status").await;
        status["control_error"].as_str().map(str::to_owned)
    })
    .await;
    assert!(shown.contains("upgrade the controller"), "{shown:?}");
    let (_, status) = admin_json(&gateway, "/status").await;
    assert!(status["snapshot"].is_null(), "nothing applied: {status}");
    assert!(controller.state.lock().unwrap().acks.is_empty());
    gateway.shutdown().await;
}
