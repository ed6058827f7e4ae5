//! Time sources for the limiter.
//!
//! The engine never reads the system time directly: it asks a [`Clock`] for nanoseconds since
//! the clock's origin. Three clocks:
//!
//! * [`CoarseClock`]: a helper thread publishes the time every millisecond, so most checks
//!   read one atomic instead of the OS clock (about 24 ns here). Admissions use that
//!   slightly old reading, which is always safe (an earlier "now" refills less, never
//!   more); every denial that could depend on the last millisecond re-reads the precise
//!   clock, so retry hints stay exact. Worth it only where checks are dense: its thousand
//!   wake-ups a second cost a process that makes a few checks per request more than they
//!   save (the gateway measured about 3 % of its CPU per request), and an idle one CPU.
//! * [`MonotonicClock`]: reads `Instant` on every check (the gateway's clock).
//! * [`ManualClock`]: tests move time by hand, so no test sleeps and every result is exact.

use std::fmt::Debug;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A monotonic time source measured in nanoseconds since the clock's own origin.
pub trait Clock: Send + Sync + Debug {
    /// Nanoseconds since this clock's origin. Successive calls never go backwards.
    fn now_ns(&self) -> u64;

    /// A cheaper reading that is never ahead of [`Clock::now_ns`] and normally at most
    /// [`Clock::recent_lag_ns`] behind it. Defaults to the precise reading.
    fn recent_ns(&self) -> u64 {
        self.now_ns()
    }

    /// How far [`Clock::recent_ns`] may normally lag; 0 means it is exact.
    fn recent_lag_ns(&self) -> u64 {
        0
    }
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

    fn recent_ns(&self) -> u64 {
        (**self).recent_ns()
    }

    fn recent_lag_ns(&self) -> u64 {
        (**self).recent_lag_ns()
    }
}

/// `Instant`-based clock whose [`Clock::recent_ns`] is a value a helper thread refreshes
/// every `resolution`. Dropping the clock stops the thread.
#[derive(Debug)]
pub struct CoarseClock {
    shared: Arc<CoarseShared>,
    ticker: Option<JoinHandle<()>>,
    lag_ns: u64,
}

#[derive(Debug)]
struct CoarseShared {
    origin: Instant,
    recent_ns: AtomicU64,
    stop: AtomicBool,
}

impl CoarseShared {
    fn precise_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl CoarseClock {
    /// The default resolution: 1 ms, the unit of retry hints.
    pub const DEFAULT_RESOLUTION: Duration = Duration::from_millis(1);

    /// Starts a clock refreshed every [`CoarseClock::DEFAULT_RESOLUTION`].
    pub fn new() -> io::Result<Self> {
        Self::with_resolution(Self::DEFAULT_RESOLUTION)
    }

    /// Starts a clock refreshed every `resolution` (at least 10 µs).
    pub fn with_resolution(resolution: Duration) -> io::Result<Self> {
        let resolution = resolution.max(Duration::from_micros(10));
        let origin = Instant::now();
        let shared = Arc::new(CoarseShared {
            origin,
            recent_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        shared
            .recent_ns
            .store(shared.precise_ns(), Ordering::Relaxed);
        let ticking = Arc::clone(&shared);
        let ticker = thread::Builder::new()
            .name("throttle-clock".into())
            .spawn(move || {
                while !ticking.stop.load(Ordering::Relaxed) {
                    thread::park_timeout(resolution);
                    // fetch_max keeps the published value monotonic whatever the OS does.
                    ticking
                        .recent_ns
                        .fetch_max(ticking.precise_ns(), Ordering::Relaxed);
                }
            })?;
        Ok(Self {
            shared,
            ticker: Some(ticker),
            // Slack for timer overshoot and scheduling: if the thread is starved for longer,
            // the only effect is that a lockout can end up to that much later (fail closed).
            lag_ns: duration_to_ns(resolution) * 4,
        })
    }
}

impl Clock for CoarseClock {
    fn now_ns(&self) -> u64 {
        self.shared.precise_ns()
    }

    fn recent_ns(&self) -> u64 {
        // The value was read from the clock before it was stored: never ahead of now.
        self.shared.recent_ns.load(Ordering::Relaxed)
    }

    fn recent_lag_ns(&self) -> u64 {
        self.lag_ns
    }
}

impl Drop for CoarseClock {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(ticker) = self.ticker.take() {
            ticker.thread().unpark();
            // The ticker cannot panic; nothing to report if it somehow did.
            let _ = ticker.join();
        }
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
    fn coarse_clock_recent_is_never_ahead_and_catches_up() {
        let clock = CoarseClock::with_resolution(Duration::from_micros(100)).unwrap();
        let start = clock.recent_ns();
        for _ in 0..1000 {
            let recent = clock.recent_ns();
            assert!(recent <= clock.now_ns());
        }
        // Wait (bounded) for the ticker to publish a newer value.
        let deadline = Instant::now() + Duration::from_secs(10);
        while clock.recent_ns() == start && Instant::now() < deadline {
            thread::yield_now();
        }
        assert!(clock.recent_ns() > start, "ticker publishes");
        assert_eq!(clock.recent_lag_ns(), 400_000);
        drop(clock);
    }

    #[test]
    fn precise_clocks_report_no_lag() {
        assert_eq!(MonotonicClock::new().recent_lag_ns(), 0);
        let manual = ManualClock::starting_at(Duration::from_secs(1));
        assert_eq!(manual.recent_ns(), manual.now_ns());
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
