//! The one injectable clock of the controller and the gateway.
//!
//! Every decision that depends on time reads it from a [`Clock`], so production reads the
//! system in exactly one place ([`SystemClock`]) and tests move time with a
//! [`ManualClock`] instead of sleeping. A clock answers two questions:
//!
//! - [`Clock::now`]: wall-clock milliseconds since the Unix epoch. Leases, `usable_until`,
//!   sessions and sticky pins are wall-clock instants written by one process and read by
//!   another, so they must share the epoch.
//! - [`Clock::monotonic_ms`]: milliseconds on a counter that never goes back, for local
//!   durations (failure cooldowns, idle timers, "how long since the controller answered")
//!   that must not jump when the wall clock is stepped.
//!
//! The rate limiter (`proxypool-throttle`) keeps a clock of its own on purpose: it needs
//! nanoseconds on every admission check, and its production clock is a coarse one whose
//! helper thread publishes the time so the hot path reads an atomic instead of calling
//! into the OS. That crate also stands alone (it depends on nothing of ours), so merging the
//! two would either slow the limiter down or tie it to this crate.

use crate::time::{UnixMillis, now_millis};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Where time comes from.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Wall clock: milliseconds since the Unix epoch.
    fn now(&self) -> UnixMillis;

    /// Monotonic milliseconds since an arbitrary origin fixed for the clock's lifetime.
    /// Only differences mean anything. Defaults to the process-wide [`monotonic_ms`].
    fn monotonic_ms(&self) -> u64 {
        monotonic_ms()
    }
}

/// The clock every component shares.
pub type SharedClock = Arc<dyn Clock>;

/// Milliseconds since the first call in this process (never goes back).
pub fn monotonic_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The system's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// A [`SystemClock`] ready to share.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        now_millis()
    }
}

/// A clock that only moves when told (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
    monotonic: AtomicU64,
}

impl ManualClock {
    /// A clock whose wall time is `start` and whose monotonic counter is 0.
    pub fn new(start: UnixMillis) -> Arc<Self> {
        Arc::new(ManualClock {
            now: AtomicU64::new(start),
            monotonic: AtomicU64::new(0),
        })
    }

    /// Lets `ms` pass: both the wall clock and the monotonic counter move.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
        self.monotonic.fetch_add(ms, Ordering::SeqCst);
    }

    /// Steps the wall clock to `now` (either way), as an NTP correction would; the
    /// monotonic counter does not move.
    pub fn set(&self, now: UnixMillis) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        self.now.load(Ordering::SeqCst)
    }

    fn monotonic_ms(&self) -> u64 {
        self.monotonic.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_both_on_advance_and_only_wall_on_set() {
        let clock = ManualClock::new(1_000);
        clock.advance(250);
        assert_eq!((clock.now(), clock.monotonic_ms()), (1_250, 250));
        clock.set(500);
        assert_eq!((clock.now(), clock.monotonic_ms()), (500, 250));
    }

    #[test]
    fn system_monotonic_never_goes_back() {
        let clock = SystemClock;
        let a = clock.monotonic_ms();
        let b = clock.monotonic_ms();
        assert!(b >= a);
        assert!(clock.now() > 1_600_000_000_000);
    }
}
