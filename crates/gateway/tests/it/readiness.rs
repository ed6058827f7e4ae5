//! Honest health: `/readyz`, `/status` and the refusals say when the gateway cannot route
//! for want of leases or of a fresh snapshot, and never blame the selectors for it; a
//! selector that matches nothing keeps its own code. Time moves on a manual clock.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::{Clock, ManualClock, Protocol, now_millis};
use proxypool_proto::socks5::Reply;
use proxypool_sim::{Origin, ProxyKind};
use std::net::Ipv4Addr;
use std::time::Duration;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));
const LEASE_MS: u64 = 10_000;

async fn get(gateway: &Running, user: &str, origin: &Origin) -> Curl {
    curl(&["-x", &http_proxy_url(user, gateway.http), &origin.url("/")]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_refusals_follow_leases_and_staleness() {
    let _alone = alone().await;
    let origin = Origin::start().await.unwrap();
    let up = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 111)).await;
    let clock = ManualClock::new(now_millis());
    let listed = |until| {
        leased_until(
            proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us"),
            until,
        )
    };
    let controller = TestController::start(WORKER, 30_000).await;
    // Sessions granted on the gateway's clock, as a controller in step with it would.
    controller.state.lock().unwrap().session_clock = Some(clock.clone());
    controller.publish(vec![listed(clock.now() + LEASE_MS)], vec![client("alice")]);
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;

    let (status, ready) = admin_json(&gateway, "/readyz").await;
    assert_eq!((status, &ready["ready"]), (200, &true.into()), "{ready}");
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(status["leases"]["proxies"], 1, "{status}");
    assert_eq!(status["leases"]["leased"], 1, "{status}");
    assert!(status["leases"]["earliest_end_ms"].is_u64(), "{status}");
    // The cutoff stays inside the lease (the skew margin, and the session's end).
    let cutoff = status["leases"]["cutoff_ms"].as_u64().expect("cutoff_ms");
    assert!(
        cutoff < status["leases"]["latest_end_ms"].as_u64().unwrap(),
        "{status}"
    );
    assert!(status["snapshot_age_ms"].is_u64(), "{status}");
    assert!(status["since_controller_ms"].is_u64(), "{status}");
    assert_eq!(get(&gateway, "alice", &origin).await.status, 200);
    assert_eq!(
        socks_reply(&gateway, "alice", origin.addr()).await,
        Reply::Succeeded
    );

    // The lease ends and no snapshot renews it (the controller is reachable but silent):
    // not ready, and every refusal says "no leased proxies", whatever the selectors.
    clock.advance(LEASE_MS);
    let (status, ready) = admin_json(&gateway, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["reason"], "no_leased_proxies", "{ready}");
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(
        (&status["serving"], &status["ready"]),
        (&true.into(), &false.into()),
        "{status}"
    );
    assert_eq!(status["not_ready_reason"], "no_leased_proxies", "{status}");
    assert_eq!(status["leases"]["leased"], 0, "{status}");
    for user in ["alice", "alice-region-us", "alice-region-nowhere"] {
        let refused = get(&gateway, user, &origin).await;
        assert_eq!(refused.status, 503, "{user}: {refused:?}");
        assert_eq!(
            refused.header("x-proxypool-error"),
            Some("no_leased_proxies"),
            "{user}"
        );
        assert!(refused.header("retry-after").is_some());
    }
    assert_eq!(
        socks_reply(&gateway, "alice", origin.addr()).await,
        Reply::NetworkUnreachable
    );
    assert_eq!(metric(&gateway, "proxypool_gateway_ready").await, Some(0.0));

    // A fresh snapshot with a renewed lease: ready again.
    controller.publish(vec![listed(clock.now() + 3_600_000)], vec![client("alice")]);
    acked(&controller, 2).await;
    let (status, _) = admin_json(&gateway, "/readyz").await;
    assert_eq!(status, 200);
    assert_eq!(get(&gateway, "alice", &origin).await.status, 200);
    assert_eq!(metric(&gateway, "proxypool_gateway_ready").await, Some(1.0));

    // The controller goes away: leases still live, but past max_staleness the snapshot is
    // stale, and that is what the answers say.
    controller.stop();
    clock.advance(30_001);
    let (status, ready) = admin_json(&gateway, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["reason"], "stale_snapshot", "{ready}");
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["serving"], false, "{status}");
    assert_eq!(status["not_ready_reason"], "stale_snapshot", "{status}");
    let stale = get(&gateway, "alice", &origin).await;
    assert_eq!(stale.status, 503, "{stale:?}");
    assert_eq!(stale.header("x-proxypool-error"), Some("gateway_stale"));
    assert_eq!(
        socks_reply(&gateway, "alice", origin.addr()).await,
        Reply::GeneralFailure
    );
    let health = curl(&[&format!("http://{}/healthz", gateway.admin)]).await;
    assert_eq!(health.status, 200, "alive throughout");

    // It comes back: the next answer makes the gateway fresh, and ready, again.
    controller.restart().await;
    eventually_async("ready again", Duration::from_secs(10), async || {
        (admin_json(&gateway, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(get(&gateway, "alice", &origin).await.status, 200);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_matches_nothing_keeps_its_own_code() {
    let _alone = alone().await;
    let origin = Origin::start().await.unwrap();
    let us = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 112)).await;
    let de = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 113)).await;
    let clock = ManualClock::new(now_millis());
    let controller = TestController::start(WORKER, 3_600_000).await;
    // Sessions granted on the gateway's clock, as a controller in step with it would.
    controller.state.lock().unwrap().session_clock = Some(clock.clone());
    controller.publish(
        vec![
            leased_until(
                proxy(1, Protocol::Http, us.addr(), CREDS, "acme", "us"),
                clock.now() + LEASE_MS,
            ),
            proxy(2, Protocol::Http, de.addr(), CREDS, "acme", "de"),
        ],
        vec![client("alice")],
    );
    let gateway = Running::start_with_clock(config(&controller), clock.clone()).await;
    acked(&controller, 1).await;
    let code = |response: &Curl| response.header("x-proxypool-error").map(str::to_owned);
    let unleased_series = "proxypool_gateway_refusals_total{code=\"no_leased_proxies\"}";
    let unleased_before = metric(&gateway, unleased_series).await.unwrap();

    // Leases live: a region nothing is in is the selectors' doing.
    let nowhere = get(&gateway, "alice-region-fr", &origin).await;
    assert_eq!(nowhere.status, 503, "{nowhere:?}");
    assert_eq!(code(&nowhere).as_deref(), Some("no_eligible_proxy"));
    assert_eq!(
        socks_reply(&gateway, "alice-region-fr", origin.addr()).await,
        Reply::GeneralFailure
    );
    assert_eq!(get(&gateway, "alice-region-us", &origin).await.status, 200);

    // The us proxy's lease ends: the gateway is still ready (de is leased), a us request
    // is refused for want of a lease, a fr request still for its selectors.
    clock.advance(LEASE_MS);
    assert_eq!(admin_json(&gateway, "/readyz").await.0, 200);
    let unleased = get(&gateway, "alice-region-us", &origin).await;
    assert_eq!(unleased.status, 503, "{unleased:?}");
    assert_eq!(code(&unleased).as_deref(), Some("no_leased_proxies"));
    assert_eq!(
        socks_reply(&gateway, "alice-region-us", origin.addr()).await,
        Reply::NetworkUnreachable
    );
    let nowhere = get(&gateway, "alice-region-fr", &origin).await;
    assert_eq!(code(&nowhere).as_deref(), Some("no_eligible_proxy"));
    assert_eq!(get(&gateway, "alice-region-de", &origin).await.status, 200);
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(status["leases"]["proxies"], 2, "{status}");
    assert_eq!(status["leases"]["leased"], 1, "{status}");
    assert_eq!(
        metric(&gateway, unleased_series).await,
        Some(unleased_before + 2.0),
        "the HTTP and the SOCKS5 refusal"
    );
    gateway.shutdown().await;
}
