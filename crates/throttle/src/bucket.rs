//! The per-key state machine: refill, admit or deny, escalate to a lockout.
//!
//! This module holds no locks and reads no clock; the engine passes `now` in. Keeping the
//! arithmetic here, pure, is what lets the tests prove exactness without threads or time.
//!
//! Order per check (as in the seed): lockout test → refill → take one token, or deny and
//! record a soft violation.
//!
//! The state is 24 bytes because two instants are never stored:
//! * the last violation: while the count is above zero every check is a denial, and each
//!   denial updates `last_seen_ns`, so the last violation *is* the last check;
//! * the end of a lockout: a lockout starts at a check, and a locked key's state is frozen
//!   (a check while locked changes nothing), so it ends at `last_seen_ns + hard_lockout`.
//!   Freezing loses nothing: refill from the lockout's start, done when it ends, adds the
//!   same tokens as refilling along the way (refill is additive, capped, carry exact).

use crate::decision::Decision;
use crate::limits::{BucketLimits, NANOS_PER_MILLI, NANOS_PER_SEC, ceil_ms};

/// Everything the limiter remembers about one key. 24 bytes on 64-bit targets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BucketState {
    /// Time of the latest check that changed the state (for a locked key: the lockout's
    /// start). Refill is computed from here; it is also the LRU timestamp.
    pub(crate) last_seen_ns: u64,
    /// Balance in units (`token_units` units = one token).
    pub(crate) units: u32,
    /// Refill numerator left over from the last refill, below 10^9: the exactness carry.
    pub(crate) carry: u32,
    /// Denials in a row, each within the soft window of the previous one.
    pub(crate) soft_violations: u16,
    /// Locked out until `last_seen_ns + hard_lockout`.
    pub(crate) locked: bool,
}

/// A read-only view of a key's state for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) units: u32,
    pub(crate) lockout_remaining_ns: u64,
    pub(crate) soft_violations: u16,
    pub(crate) idle_ns: u64,
}

impl BucketState {
    pub(crate) fn new(limits: &BucketLimits, now_ns: u64) -> Self {
        Self {
            last_seen_ns: now_ns,
            units: limits.initial_units,
            carry: 0,
            soft_violations: 0,
            locked: false,
        }
    }

    /// Decides one request using a clock that offers a cheap reading `recent_ns`, at most
    /// `lag_ns` behind the precise one that `precise_now` reads (`lag_ns == 0`: exact).
    ///
    /// The cheap reading is trusted only where it cannot change the answer's correctness:
    /// an admission at an earlier instant is one the precise instant would also grant (the
    /// bucket only gains tokens as time passes), and a key locked until after
    /// `recent + lag` is locked now. Everything else (a denial, a lock about to end) is
    /// decided again on the precise reading, so denials and their retry hints stay exact.
    #[inline]
    pub(crate) fn decide(
        &mut self,
        limits: &BucketLimits,
        soft_violation_window_ns: u64,
        recent_ns: u64,
        lag_ns: u64,
        precise_now: impl FnOnce() -> u64,
    ) -> Decision {
        if lag_ns == 0 {
            return self.decide_at(limits, soft_violation_window_ns, recent_ns);
        }
        if self.locked && recent_ns.saturating_add(lag_ns) < self.lock_end_ns(limits) {
            // Certainly still locked. The hint is measured from the older reading: at worst
            // a little long, never short.
            return self.decide_at(limits, soft_violation_window_ns, recent_ns);
        }
        let mut trial = *self;
        let decision = trial.decide_at(limits, soft_violation_window_ns, recent_ns);
        if decision.allowed {
            *self = trial;
            return decision;
        }
        self.decide_at(limits, soft_violation_window_ns, precise_now())
    }

    /// Decides one request at `now_ns` and updates the state.
    #[inline]
    pub(crate) fn decide_at(
        &mut self,
        limits: &BucketLimits,
        soft_violation_window_ns: u64,
        now_ns: u64,
    ) -> Decision {
        // Threads read the clock before taking the shard lock, so a slightly older `now` can
        // arrive after a newer one: never move time backwards (that would refill twice).
        let now_ns = now_ns.max(self.last_seen_ns);
        if self.locked {
            let lock_end_ns = self.lock_end_ns(limits);
            if now_ns < lock_end_ns {
                let lock_ms = ceil_ms(lock_end_ns - now_ns);
                if limits.lockout_outlasts_refill {
                    // A token is back before the lockout ends: no need to compute when.
                    return Decision::hard_lockout(lock_ms);
                }
                let (units, carry) = self.refilled(limits, now_ns);
                let token_ms = token_ready_ms(units, carry, limits);
                return Decision::hard_lockout(lock_ms.max(token_ms));
            }
            self.locked = false;
            self.soft_violations = 0;
        }
        let since_previous_ns = now_ns - self.last_seen_ns;
        (self.units, self.carry) = self.refilled(limits, now_ns);
        self.last_seen_ns = now_ns;

        if self.units >= limits.token_units {
            self.units -= limits.token_units;
            self.soft_violations = 0;
            return Decision::allow(self.units / limits.token_units);
        }
        self.deny(limits, soft_violation_window_ns, since_previous_ns)
    }

    /// Records a denial; `since_previous_ns` is the time since the previous check, which is
    /// the previous violation whenever the count is above zero.
    #[inline]
    fn deny(&mut self, limits: &BucketLimits, window_ns: u64, since_previous_ns: u64) -> Decision {
        let soft_violations = if self.soft_violations > 0 && since_previous_ns <= window_ns {
            self.soft_violations.saturating_add(1)
        } else {
            1
        };
        if soft_violations >= limits.max_soft_violations {
            self.locked = true;
            self.soft_violations = 0;
            let token_ms = token_ready_ms(self.units, self.carry, limits);
            return Decision::hard_lockout(ceil_ms(limits.hard_lockout_ns).max(token_ms));
        }
        self.soft_violations = soft_violations;
        Decision::soft_throttle(token_ready_ms(self.units, self.carry, limits))
    }

    /// Balance and carry after refilling up to `now_ns`, without changing the state.
    #[inline]
    fn refilled(&self, limits: &BucketLimits, now_ns: u64) -> (u32, u32) {
        if self.units >= limits.capacity_units {
            // Full: whatever would flow in (carry included) overflows and is discarded.
            return (limits.capacity_units, 0);
        }
        let elapsed_ns = now_ns.saturating_sub(self.last_seen_ns);
        if elapsed_ns >= limits.full_refill_ns {
            // Also the overflow guard: past this point the product below could be huge.
            return (limits.capacity_units, 0);
        }
        // elapsed < full_refill_ns bounds this by (capacity + rate + 1) * 10^9 < u64::MAX.
        let numerator = elapsed_ns * limits.refill_units_per_sec + u64::from(self.carry);
        let units = u64::from(self.units) + numerator / NANOS_PER_SEC;
        if units >= u64::from(limits.capacity_units) {
            return (limits.capacity_units, 0);
        }
        (units as u32, (numerator % NANOS_PER_SEC) as u32)
    }

    pub(crate) fn lock_end_ns(&self, limits: &BucketLimits) -> u64 {
        self.last_seen_ns.saturating_add(limits.hard_lockout_ns)
    }

    pub(crate) fn last_seen_ns(&self) -> u64 {
        self.last_seen_ns
    }

    /// While locked: the instant a retry hint given now points to, the later of the
    /// lockout's end and the next whole token (rounded up to a millisecond from the
    /// lockout's start). Both are fixed while the lockout lasts.
    pub(crate) fn lockout_retry_at_ns(&self, limits: &BucketLimits) -> u64 {
        let token_at_ns = self.last_seen_ns.saturating_add(
            token_ready_ms(self.units, self.carry, limits).saturating_mul(NANOS_PER_MILLI),
        );
        self.lock_end_ns(limits).max(token_at_ns)
    }

    pub(crate) fn is_locked_at(&self, limits: &BucketLimits, now_ns: u64) -> bool {
        self.locked && now_ns < self.lock_end_ns(limits)
    }

    /// The state as it would look at `now_ns` (refilled), for reports.
    pub(crate) fn snapshot(&self, limits: &BucketLimits, now_ns: u64) -> Snapshot {
        let now_ns = now_ns.max(self.last_seen_ns);
        let (units, _) = self.refilled(limits, now_ns);
        let locked = self.is_locked_at(limits, now_ns);
        Snapshot {
            units,
            lockout_remaining_ns: if locked {
                self.lock_end_ns(limits) - now_ns
            } else {
                0
            },
            soft_violations: if self.locked { 0 } else { self.soft_violations },
            idle_ns: now_ns - self.last_seen_ns,
        }
    }
}

/// Milliseconds until one whole token is available from `units` and `carry`: the smallest
/// `t` with `t * rate + carry >= missing * 10^9`, rounded up to a millisecond.
#[inline]
fn token_ready_ms(units: u32, carry: u32, limits: &BucketLimits) -> u64 {
    let Some(missing_units) = limits.token_units.checked_sub(units) else {
        return 0;
    };
    if missing_units == 0 {
        return 0;
    }
    let needed = u64::from(missing_units) * NANOS_PER_SEC - u64::from(carry);
    needed.div_ceil(limits.refill_units_per_sec * NANOS_PER_MILLI)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::options::EngineOptions;
    use crate::policy::Policy;
    use std::time::Duration;

    const WINDOW_NS: u64 = 8 * NANOS_PER_SEC;
    const MS: u64 = NANOS_PER_MILLI;

    fn limits(policy: Policy) -> BucketLimits {
        BucketLimits::from_policy("test", &policy, &EngineOptions::default()).unwrap()
    }

    #[test]
    fn state_is_compact() {
        assert_eq!(std::mem::size_of::<BucketState>(), 24);
    }

    #[test]
    fn burst_then_exact_refill() {
        let l = limits(Policy::new(2.0, 3.0));
        let mut state = BucketState::new(&l, 0);
        for left in [2, 1, 0] {
            let d = state.decide_at(&l, WINDOW_NS, 0);
            assert!(d.allowed);
            assert_eq!(d.credit, left);
        }
        let denied = state.decide_at(&l, WINDOW_NS, 0);
        assert_eq!(denied.reason, Reason::SoftThrottle);
        assert_eq!(denied.retry_after_ms, 500);
        assert!(!state.decide_at(&l, WINDOW_NS, 499 * MS).allowed);
        assert!(state.decide_at(&l, WINDOW_NS, 500 * MS).allowed);
    }

    #[test]
    fn carry_keeps_fractions_between_calls() {
        // 3 tokens per second from empty, checked every 100 ms: each call refills 0.3 tokens;
        // without the carry (or with float drift) the 10 s total would not be exactly 30.
        // Burst 2 so the bucket never overflows between calls (overflow is rightly lost).
        let l = BucketLimits::from_policy(
            "t",
            &Policy::new(3.0, 2.0),
            &EngineOptions {
                token_scale: 1,
                initial_tokens: crate::InitialTokens::Empty,
                ..Default::default()
            },
        )
        .unwrap();
        let mut state = BucketState::new(&l, 0);
        let admitted = (1..=100)
            .filter(|step| state.decide_at(&l, WINDOW_NS, step * 100 * MS).allowed)
            .count();
        assert_eq!(admitted, 30);
    }

    #[test]
    fn a_full_bucket_discards_the_overflow() {
        // Capacity 1, refill 0.3 per call: reaching 1.2 keeps only 1; the 0.2 is not owed.
        let l = BucketLimits::from_policy(
            "t",
            &Policy::new(3.0, 1.0),
            &EngineOptions {
                token_scale: 1,
                initial_tokens: crate::InitialTokens::Empty,
                ..Default::default()
            },
        )
        .unwrap();
        let mut state = BucketState::new(&l, 0);
        let admitted = (1..=100)
            .filter(|step| state.decide_at(&l, WINDOW_NS, step * 100 * MS).allowed)
            .count();
        assert_eq!(
            admitted, 25,
            "one admission per 4 calls: 0.3, 0.6, 0.9, 1.2 -> 1"
        );
    }

    #[test]
    fn escalates_to_lockout_and_expires() {
        let l = limits(
            Policy::new(1.0, 1.0)
                .with_max_soft_violations(3)
                .with_hard_lockout(Duration::from_secs(10)),
        );
        let mut state = BucketState::new(&l, 0);
        assert!(state.decide_at(&l, WINDOW_NS, 0).allowed);
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, MS).reason,
            Reason::SoftThrottle
        );
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, 2 * MS).reason,
            Reason::SoftThrottle
        );
        let locked = state.decide_at(&l, WINDOW_NS, 3 * MS);
        assert_eq!(locked.reason, Reason::HardLockout);
        assert_eq!(locked.retry_after_ms, 10_000);
        let still = state.decide_at(&l, WINDOW_NS, 5_003 * MS);
        assert_eq!(
            (still.reason, still.retry_after_ms),
            (Reason::HardLockout, 5_000)
        );
        assert!(state.decide_at(&l, WINDOW_NS, 10_003 * MS).allowed);
    }

    #[test]
    fn lockout_retry_waits_for_a_token_too() {
        // 1 token per 100 s, 1 ms lockout: the lock ends long before a token is back, so the
        // hint must cover the token, or a client obeying it would be denied again.
        let l = limits(
            Policy::new(0.01, 1.0)
                .with_max_soft_violations(1)
                .with_hard_lockout(Duration::from_millis(1)),
        );
        let mut state = BucketState::new(&l, 0);
        assert!(state.decide_at(&l, WINDOW_NS, 0).allowed);
        let locked = state.decide_at(&l, WINDOW_NS, 0);
        assert_eq!(
            (locked.reason, locked.retry_after_ms),
            (Reason::HardLockout, 100_000)
        );
        assert!(state.decide_at(&l, WINDOW_NS, 100_000 * MS).allowed);
    }

    #[test]
    fn violations_outside_the_window_restart_the_count() {
        let l = limits(Policy::new(0.001, 1.0).with_max_soft_violations(2));
        let mut state = BucketState::new(&l, 0);
        assert!(state.decide_at(&l, WINDOW_NS, 0).allowed);
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, 0).reason,
            Reason::SoftThrottle
        );
        let later = WINDOW_NS + 1;
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, later).reason,
            Reason::SoftThrottle
        );
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, later + WINDOW_NS).reason,
            Reason::HardLockout
        );
    }

    #[test]
    fn an_older_now_never_refills_twice() {
        let l = limits(Policy::new(1.0, 1.0));
        let mut state = BucketState::new(&l, 0);
        assert!(state.decide_at(&l, WINDOW_NS, 0).allowed);
        assert!(state.decide_at(&l, WINDOW_NS, 1000 * MS).allowed);
        // A thread that read the clock at 600 ms arrives late: no tokens appear.
        assert!(!state.decide_at(&l, WINDOW_NS, 600 * MS).allowed);
        assert_eq!(state.last_seen_ns(), 1000 * MS);
    }

    #[test]
    fn a_stale_cheap_reading_only_ever_admits_or_confirms_a_lock() {
        let l = limits(
            Policy::new(1.0, 1.0)
                .with_max_soft_violations(1)
                .with_hard_lockout(Duration::from_secs(10)),
        );
        let lag = 4 * MS;
        let mut state = BucketState::new(&l, 0);
        // Admission on the cheap reading: the precise clock is not consulted.
        let d = state.decide(&l, WINDOW_NS, 0, lag, || panic!("not needed"));
        assert!(d.allowed);
        // A denial is re-decided on the precise reading: at 1 s a token is back.
        let d = state.decide(&l, WINDOW_NS, 990 * MS, lag, || 1000 * MS);
        assert!(d.allowed, "{d:?}");
        // Denied precisely at 1 s + 1 ms: locked until 11.001 s.
        let d = state.decide(&l, WINDOW_NS, 1000 * MS, lag, || 1001 * MS);
        assert_eq!(d.reason, Reason::HardLockout);
        // Deep inside the lock the cheap reading suffices; its hint is measured from it.
        let d = state.decide(&l, WINDOW_NS, 5000 * MS, lag, || panic!("not needed"));
        assert_eq!((d.reason, d.retry_after_ms), (Reason::HardLockout, 6001));
        // Near the end of the lock the precise clock decides: 11.001 s is admitted.
        let d = state.decide(&l, WINDOW_NS, 10_999 * MS, lag, || 11_001 * MS);
        assert!(d.allowed, "{d:?}");
    }

    #[test]
    fn a_locked_state_is_frozen_until_the_lock_ends() {
        let l = limits(
            Policy::new(2.0, 2.0)
                .with_max_soft_violations(1)
                .with_hard_lockout(Duration::from_secs(5)),
        );
        let mut state = BucketState::new(&l, 0);
        state.decide_at(&l, WINDOW_NS, 0);
        state.decide_at(&l, WINDOW_NS, 0);
        assert_eq!(
            state.decide_at(&l, WINDOW_NS, 0).reason,
            Reason::HardLockout
        );
        let locked = state;
        for at in [1, 1000, 4999] {
            let d = state.decide_at(&l, WINDOW_NS, at * MS);
            assert_eq!(
                (d.reason, d.retry_after_ms),
                (Reason::HardLockout, 5000 - at)
            );
            assert_eq!(state, locked, "a check while locked changes nothing");
        }
        assert!(state.locked);
        assert_eq!(state.lock_end_ns(&l), 5000 * MS);
        // At the end the whole lockout's refill is there (capped at the burst of 2).
        let after = state.decide_at(&l, WINDOW_NS, 5000 * MS);
        assert_eq!((after.allowed, after.credit), (true, 1));
    }

    #[test]
    fn snapshot_refills_without_mutating() {
        let l = limits(Policy::new(1.0, 2.0));
        let mut state = BucketState::new(&l, 0);
        state.decide_at(&l, WINDOW_NS, 0);
        state.decide_at(&l, WINDOW_NS, 0);
        let before = state;
        let view = state.snapshot(&l, 1500 * MS);
        assert_eq!(view.units, 1500);
        assert_eq!(view.idle_ns, 1500 * MS);
        assert_eq!(state, before);
    }
}
