//! Time sources for the limiter.
//!
//! The engine never reads the system time directly: it asks a [`Clock`] for nanoseconds since
//! the clock's origin. Production uses [`MonotonicClock`] (immune to wall-clock jumps); tests
//! use [`ManualClock`] and move time by hand, so no test sleeps and every result is exact.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source measured in nanoseconds since the clock's own origin.
pub trait Clock: Send + Sync + Debug {
    /// Nanoseconds since this clock's origin. Successive calls never go backwards.
    fn now_ns(&self) -> u64;
}

/// The production clock: [`Instant`] relative to the moment the clock was created.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        // u64 nanoseconds cover 584 years of uptime; saturate rather than wrap past that.
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A clock that only moves when told to. Share it with the limiter through an [`Arc`].
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ns: AtomicU64,
}

impl ManualClock {
    /// A manual clock standing at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// A manual clock standing at `elapsed` after its origin.
    pub fn starting_at(elapsed: Duration) -> Self {
        let clock = Self::new();
        clock.set(elapsed);
        clock
    }

    /// Moves the clock forward by `step`.
    pub fn advance(&self, step: Duration) {
        self.now_ns
            .fetch_add(duration_to_ns(step), Ordering::SeqCst);
    }

    /// Moves the clock forward by `step_ns` nanoseconds.
    pub fn advance_ns(&self, step_ns: u64) {
        self.now_ns.fetch_add(step_ns, Ordering::SeqCst);
    }

    /// Moves the clock to `elapsed` after its origin.
    ///
    /// # Panics
    /// If that would move the clock backwards: a monotonic clock never does.
    pub fn set(&self, elapsed: Duration) {
        let target = duration_to_ns(elapsed);
        let previous = self.now_ns.fetch_max(target, Ordering::SeqCst);
        assert!(
            previous <= target,
            "ManualClock::set would move time backwards ({previous} ns -> {target} ns)"
        );
    }

    /// Time since the origin.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

pub(crate) fn duration_to_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new();
        assert_eq!(clock.now_ns(), 0);
        clock.advance(Duration::from_millis(3));
        clock.advance_ns(7);
        assert_eq!(clock.now_ns(), 3_000_007);
        clock.set(Duration::from_secs(1));
        assert_eq!(clock.elapsed(), Duration::from_secs(1));
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn manual_clock_refuses_to_go_back() {
        let clock = ManualClock::starting_at(Duration::from_secs(2));
        clock.set(Duration::from_secs(1));
    }

    #[test]
    fn monotonic_clock_never_decreases() {
        let clock = MonotonicClock::new();
        let mut previous = clock.now_ns();
        for _ in 0..1000 {
            let now = clock.now_ns();
            assert!(now >= previous);
            previous = now;
        }
    }
}
