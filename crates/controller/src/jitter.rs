//! Random jitter for loop pacing, and short random ids (nothing security related).
//!
//! A xorshift generator seeded from std's randomly keyed hasher: enough to keep vendors
//! from being polled in lock step, without a dependency.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static STATE: AtomicU64 = AtomicU64::new(0);

fn next() -> u64 {
    // One atomic step, so two threads never draw the same value (ids are made from it).
    let mut drawn = 0;
    let _ = STATE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
        let mut x = if x == 0 {
            RandomState::new().hash_one(0x5eed_u64) | 1
        } else {
            x
        };
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        drawn = x;
        Some(x)
    });
    drawn
}

/// A random duration in `0..=max`.
pub(crate) fn up_to(max: Duration) -> Duration {
    let ms = max.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(next() % (ms + 1))
}

/// A short random hex id (run ids for operation ids).
pub(crate) fn hex_id() -> String {
    format!("{:016x}", next())
}
