//! Waiting on state the test holds (a flag, a counter) with the test kit's bounded poll, the
//! one way these tests wait for something to happen. `examples/bench_gateway.rs` takes it
//! in beside the test controller.

use std::time::Duration;

/// Polls `check` until it is true, panicking with `what` after `timeout`.
pub async fn eventually<F: FnMut() -> bool>(timeout: Duration, what: &str, mut check: F) {
    proxypool_testkit::eventually_async(what, timeout, async || check().then_some(())).await;
}
