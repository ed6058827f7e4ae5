//! [`StripedCounter`]: a counter many threads can bump without sharing a cache line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes of a counter on separate cache lines; each thread adds to its own stripe, so
/// threads counting at once do not contend for one line.
#[derive(Debug, Default)]
pub(super) struct StripedCounter {
    stripes: [PaddedCounter; COUNTER_STRIPES],
}

const COUNTER_STRIPES: usize = 16;

#[repr(align(128))]
#[derive(Debug, Default)]
struct PaddedCounter(AtomicU64);

thread_local! {
    /// This thread's stripe, assigned round-robin when the thread first counts.
    static STRIPE: usize = {
        static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);
        NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % COUNTER_STRIPES
    };
}

impl StripedCounter {
    pub(super) fn increment(&self) {
        let stripe = STRIPE.with(|stripe| *stripe);
        self.stripes[stripe].0.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|stripe| stripe.0.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up() {
        let counter = StripedCounter::default();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        counter.increment();
                    }
                });
            }
        });
        assert_eq!(counter.sum(), 4000);
    }
}
