//! The controller's one source of `now`.
//!
//! Every port call takes `now` explicitly; the controller reads it from a [`Clock`] so the
//! wall clock is read in exactly one place ([`SystemClock`]) and tests can move time with
//! a [`ManualClock`] (leases, sessions and proxy lifetimes all key off it). Sleeps between
//! loop rounds still use tokio's timer: they pace the work, they do not decide anything.

use proxypool_core::UnixMillis;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Milliseconds since the epoch, as the controller's decisions see them.
pub trait Clock: Send + Sync + Debug + 'static {
    fn now(&self) -> UnixMillis;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        proxypool_core::time::now_millis()
    }
}

/// A clock that only moves when told (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start: UnixMillis) -> Arc<Self> {
        Arc::new(ManualClock {
            now: AtomicU64::new(start),
        })
    }

    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, now: UnixMillis) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        self.now.load(Ordering::SeqCst)
    }
}

/// The clock every component shares.
pub type SharedClock = Arc<dyn Clock>;
