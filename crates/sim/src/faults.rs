//! Seeded failure dice: the same seed and rate fail the same requests, run after run.
//!
//! A lock-free splitmix64 stream: each roll takes the next value of a counter, so under a
//! fixed request order the outcome sequence is fixed too.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const PPM: u32 = 1_000_000;

#[derive(Debug)]
pub(crate) struct FaultDice {
    state: AtomicU64,
    /// Failure probability in parts per million.
    rate_ppm: AtomicU32,
}

impl FaultDice {
    pub(crate) fn new(seed: u64, rate: f64) -> Self {
        let dice = Self {
            state: AtomicU64::new(seed),
            rate_ppm: AtomicU32::new(0),
        };
        dice.set_rate(rate);
        dice
    }

    /// Sets the failure probability, clamped to `0.0..=1.0` (NaN counts as 0).
    pub(crate) fn set_rate(&self, rate: f64) {
        let rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        // In range by the clamp above.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ppm = (rate * f64::from(PPM)).round() as u32;
        self.rate_ppm.store(ppm, Ordering::Relaxed);
    }

    pub(crate) fn rate(&self) -> f64 {
        f64::from(self.rate_ppm.load(Ordering::Relaxed)) / f64::from(PPM)
    }

    /// True when this roll should fail.
    pub(crate) fn roll(&self) -> bool {
        let ppm = self.rate_ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return false;
        }
        if ppm >= PPM {
            return true;
        }
        let x = splitmix64(
            self.state
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed),
        );
        x % u64::from(PPM) < u64::from(ppm)
    }
}

fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_outcomes_and_rate_holds() {
        let a = FaultDice::new(42, 0.3);
        let b = FaultDice::new(42, 0.3);
        let rolls_a: Vec<bool> = (0..10_000).map(|_| a.roll()).collect();
        let rolls_b: Vec<bool> = (0..10_000).map(|_| b.roll()).collect();
        assert_eq!(rolls_a, rolls_b);
        let failures = rolls_a.iter().filter(|f| **f).count();
        assert!((2_700..3_300).contains(&failures), "{failures}");

        let other = FaultDice::new(43, 0.3);
        let rolls_other: Vec<bool> = (0..10_000).map(|_| other.roll()).collect();
        assert_ne!(rolls_a, rolls_other);
    }

    #[test]
    fn extremes() {
        let never = FaultDice::new(1, 0.0);
        assert!((0..1000).all(|_| !never.roll()));
        let always = FaultDice::new(1, 1.0);
        assert!((0..1000).all(|_| always.roll()));
        let clamped = FaultDice::new(1, 7.0);
        assert!((clamped.rate() - 1.0).abs() < f64::EPSILON);
        clamped.set_rate(f64::NAN);
        assert!(clamped.rate().abs() < f64::EPSILON);
    }
}
