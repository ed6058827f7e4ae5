//! The one way these tests wait for something to happen: on a condition, with a deadline.
//! Free of the rest of the kit, so `examples/bench_gateway.rs` takes it in beside the
//! test controller.

use std::time::Duration;

/// How often a wait looks at its condition again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it gives a value, panicking with `what` after `timeout`: the one
/// way these tests wait for something to happen.
pub async fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_for`] a condition on state the test holds.
pub async fn eventually<F: FnMut() -> bool>(timeout: Duration, what: &str, mut check: F) {
    wait_for(timeout, what, async || check().then_some(())).await;
}
