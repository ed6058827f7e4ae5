//! A decaying count of the requests routed through one proxy, kept on its slot: what the
//! least-used rotation minimizes besides open uses. The count halves every
//! [`HALF_LIFE_MS`], packed with its epoch in one atomic word.

use std::sync::atomic::{AtomicU64, Ordering};

/// A recent request's weight halves after this long (monotonic ms).
pub(crate) const HALF_LIFE_MS: u64 = 10_000;

/// One request in the count's fixed point (so halving keeps some resolution). An open
/// connection weighs as much as one recent request.
pub(crate) const ONE: u64 = 1 << 8;

/// A decaying count of the requests routed through one proxy.
#[derive(Debug, Default)]
pub(crate) struct RecentUse {
    /// High half: the epoch (`mono_ms / HALF_LIFE_MS`) of the last update; low half: the
    /// count in [`ONE`] units as of that epoch.
    packed: AtomicU64,
}

impl RecentUse {
    /// Counts one request at `mono_ms`.
    pub(crate) fn record(&self, mono_ms: u64) {
        let epoch = epoch(mono_ms);
        let mut current = self.packed.load(Ordering::Relaxed);
        loop {
            let count = decayed(current, epoch)
                .saturating_add(ONE)
                .min(u64::from(u32::MAX));
            let next = (epoch << 32) | count;
            match self.packed.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The count at `mono_ms`, in [`ONE`] units.
    pub(crate) fn score(&self, mono_ms: u64) -> u64 {
        decayed(self.packed.load(Ordering::Relaxed), epoch(mono_ms))
    }
}

fn epoch(mono_ms: u64) -> u64 {
    (mono_ms / HALF_LIFE_MS) & u64::from(u32::MAX)
}

fn decayed(packed: u64, epoch: u64) -> u64 {
    let age = epoch.saturating_sub(packed >> 32);
    if age >= 32 {
        0
    } else {
        (packed & u64::from(u32::MAX)) >> age
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_use_counts_and_halves_every_half_life() {
        let recent = RecentUse::default();
        assert_eq!(recent.score(0), 0);
        for _ in 0..4 {
            recent.record(1_000);
        }
        assert_eq!(recent.score(1_000), 4 * ONE);
        assert_eq!(recent.score(HALF_LIFE_MS), 2 * ONE, "halved");
        assert_eq!(recent.score(2 * HALF_LIFE_MS), ONE);
        assert_eq!(recent.score(40 * HALF_LIFE_MS), 0, "forgotten");
        recent.record(2 * HALF_LIFE_MS);
        assert_eq!(
            recent.score(2 * HALF_LIFE_MS),
            2 * ONE,
            "decayed, then one more"
        );
    }
}
