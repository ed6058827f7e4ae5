//! Waiting on a condition with a deadline, the one way these tests wait for something to
//! happen (a fixed sleep would be too short on a loaded machine and too long elsewhere).

use std::time::{Duration, Instant};

/// How often [`eventually`] asks again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Asks `probe` until it answers `Some`, and returns that; panics naming `what` once
/// `within` has passed without it.
pub async fn eventually<T>(
    within: Duration,
    what: &str,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(POLL_EVERY).await;
    }
}
