//! A gateway that lists several controllers moves on when the one it talks to dies or
//! hangs, so a controller failover costs it one retry, not its leases.

use crate::common::control::TestController;
use crate::common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A gateway config listing `controllers` in this order.
fn listing(controllers: &[&Arc<TestController>]) -> proxypool_gateway::GatewayConfig {
    let mut config = config(controllers[0]);
    config.controller_urls = controllers.iter().map(|c| c.url()).collect();
    config
}

fn registrations(controller: &TestController) -> u32 {
    controller.state.lock().unwrap().registrations
}

async fn controller_on_status(gateway: &Running) -> String {
    let (_, status) = admin_json(gateway, "/status").await;
    status["controller"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_controller_is_passed_over_at_start() {
    let _alone = alone().await;
    let dead = TestController::start(WORKER, 60_000).await;
    dead.stop();
    let live = TestController::start(WORKER, 60_000).await;
    live.publish(vec![], vec![client("alice")]);
    let gateway = Running::start(listing(&[&dead, &live])).await;
    acked(&live, 1).await;
    assert_eq!(controller_on_status(&gateway).await, live.addr.to_string());
    assert_eq!(registrations(&dead), 0);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_dies_mid_session_is_left_at_once() {
    let _alone = alone().await;
    let first = TestController::start(WORKER, 60_000).await;
    let second = TestController::start(WORKER, 60_000).await;
    first.publish(vec![], vec![client("alice")]);
    second.publish(vec![], vec![client("alice")]);
    let mut config = listing(&[&first, &second]);
    // Far longer than the move may take: it must not wait for a timeout.
    config.control.request_timeout = Millis(10_000);
    let gateway = Running::start(config).await;
    acked(&first, 1).await;
    assert_eq!(controller_on_status(&gateway).await, first.addr.to_string());

    let killed = Instant::now();
    first.stop();
    let state = Arc::clone(&second.state);
    eventually(
        Duration::from_secs(3),
        "an ack on the second controller",
        || !state.lock().unwrap().acks.is_empty(),
    )
    .await;
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "moved within {:?}",
        killed.elapsed()
    );
    assert_eq!(
        controller_on_status(&gateway).await,
        second.addr.to_string()
    );
    gateway.shutdown().await;
}

/// A stopped process keeps its sockets: connections are accepted and never answered. The
/// gateway gives it up after one call timeout, and its long-poll waiting there is cut
/// short instead of running to the end of its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_hangs_is_left_after_one_call_timeout() {
    let _alone = alone().await;
    let first = TestController::start(WORKER, 60_000).await;
    let second = TestController::start(WORKER, 60_000).await;
    {
        let mut state = first.state.lock().unwrap();
        state.report_interval_ms = 200;
        // A long-poll left to run out would hang here for 20 s.
        state.snapshot_wait_ms = 20_000;
    }
    first.publish(vec![], vec![client("alice")]);
    second.publish(vec![], vec![client("alice")]);
    // As the controllers of one store do, the second continues the first's session.
    second.state.lock().unwrap().shared_sessions = true;
    second.publish(vec![], vec![client("alice"), client("bob")]);
    let mut config = listing(&[&first, &second]);
    config.control.request_timeout = Millis(700);
    let gateway = Running::start(config).await;
    acked(&first, 1).await;

    let frozen = Instant::now();
    first.freeze();
    let state = Arc::clone(&second.state);
    eventually(
        Duration::from_secs(5),
        "an ack on the second controller",
        || !state.lock().unwrap().acks.is_empty(),
    )
    .await;
    // One report interval, one call timeout, a retry: well under the 5 s the test allows,
    // and far under a long-poll left to run out (its wait plus the call timeout).
    let took = frozen.elapsed();
    assert!(took < Duration::from_millis(2_500), "moved after {took:?}");
    assert_eq!(registrations(&second), 0, "the session went on");
    assert_eq!(
        controller_on_status(&gateway).await,
        second.addr.to_string()
    );
    let (_, status) = admin_json(&gateway, "/status").await;
    assert_eq!(
        status["ready"],
        serde_json::json!(false),
        "no leased proxies: {status}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_controller_the_gateway_keeps_retrying_it() {
    let _alone = alone().await;
    let only = TestController::start(WORKER, 60_000).await;
    only.publish(vec![], vec![client("alice")]);
    let gateway = Running::start(config(&only)).await;
    acked(&only, 1).await;
    only.restart().await;
    only.publish(vec![], vec![client("alice"), client("bob")]);
    acked(&only, 2).await;
    assert_eq!(controller_on_status(&gateway).await, only.addr.to_string());
    gateway.shutdown().await;
}
