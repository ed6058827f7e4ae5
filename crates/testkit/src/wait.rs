//! Bounded waits on a condition: the one poll loop every crate's tests share.
//!
//! A test that waits for something another process, thread or task makes true polls what
//! it can observe until it holds or a deadline passes; a fixed sleep is either too long on
//! an idle machine or too short on a loaded one. The deadlines callers pass are generous
//! (the machine may be loaded); a condition that already holds returns at once, so a
//! generous deadline costs nothing when things go well.
//!
//! [`eventually`] and [`eventually_some`] block the calling thread; [`eventually_async`]
//! polls an async probe on tokio. Each fails the test naming what it waited for;
//! [`poll_until`] leaves the failure to the caller.

use std::time::{Duration, Instant};

/// How often a condition is looked at: often enough that a wait ends soon after the
/// condition holds, seldom enough not to load a busy machine.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `probe` until it gives a value, within `timeout`; `None` when the deadline passed
/// first (for callers that report the failure themselves, with more to say).
pub fn poll_until<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL.min(left));
    }
}

/// Polls `probe` until it gives a value, within `timeout`; panics naming `what` otherwise.
pub fn eventually_some<T>(what: &str, timeout: Duration, probe: impl FnMut() -> Option<T>) -> T {
    poll_until(timeout, probe).unwrap_or_else(|| panic!("{what}: not within {timeout:?}"))
}

/// Polls `probe` until it is true, within `timeout`; panics naming `what` otherwise.
/// Returns how long it took.
pub fn eventually(what: &str, timeout: Duration, mut probe: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    eventually_some(what, timeout, || probe().then_some(()));
    started.elapsed()
}

/// Awaits `probe` until it gives a value, within `timeout`, sleeping [`POLL_INTERVAL`]
/// between looks on tokio's timer; panics naming `what` otherwise. The deadline is on
/// tokio's clock too, so in a test in paused time it is virtual time. It is checked
/// between looks: one look that hangs is the probe's to bound.
pub async fn eventually_async<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(!left.is_zero(), "{what}: not within {timeout:?}");
        tokio::time::sleep(POLL_INTERVAL.min(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_condition_that_holds_returns_at_once() {
        let took = eventually("true", Duration::from_secs(60), || true);
        assert!(took < Duration::from_secs(1), "{took:?}");
    }

    #[test]
    fn the_probe_is_polled_until_it_holds() {
        let looks = Cell::new(0);
        let value = eventually_some("the third look", Duration::from_secs(10), || {
            looks.set(looks.get() + 1);
            (looks.get() == 3).then_some("third")
        });
        assert_eq!((value, looks.get()), ("third", 3));
    }

    #[test]
    fn a_deadline_passed_gives_none() {
        let started = Instant::now();
        assert_eq!(poll_until(Duration::from_millis(50), || None::<()>), None);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn an_async_probe_is_awaited_until_it_holds() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let looks = Cell::new(0);
        let value = runtime.block_on(eventually_async(
            "the second look",
            Duration::from_secs(10),
            || {
                looks.set(looks.get() + 1);
                let done = looks.get() == 2;
                async move { done.then_some(7) }
            },
        ));
        assert_eq!((value, looks.get()), (7, 2));
    }

    #[test]
    #[should_panic(expected = "the impossible: not within")]
    fn a_condition_that_never_holds_fails_naming_it() {
        eventually("the impossible", Duration::from_millis(30), || false);
    }
}
