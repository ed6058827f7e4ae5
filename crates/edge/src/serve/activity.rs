//! [`Activity`]: when a connection last moved a byte and how many requests it has in
//! flight, what the idle watchdog reads.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// When the connection last moved a byte, and how many requests it has in flight.
#[derive(Debug)]
pub(super) struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    pub(super) in_flight: AtomicUsize,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    pub(super) fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    pub(super) fn quiet(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}
