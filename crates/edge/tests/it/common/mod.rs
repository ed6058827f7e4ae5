//! Shared test kit: the one way these tests wait for something to happen.

use std::time::Duration;

/// How often a wait looks at its condition again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it gives a value, panicking with `what` after `timeout`.
pub(crate) async fn wait_for<T>(
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
