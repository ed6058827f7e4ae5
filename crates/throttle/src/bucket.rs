//! The per-key state machine: refill, admit or deny, escalate to a lockout.
//!
//! This module holds no locks and reads no clock; the engine passes `now` in. Keeping the
//! arithmetic here, pure, is what lets the tests prove exactness without threads or time.
//!
//! Order per check (as in the seed): refill → lockout test → take one token, or deny and
//! record a soft violation. Refilling before the lockout test gives the same balance as
//! refilling after it (refill is additive and capped), and it keeps `last_seen_ns` fresh for
//! a key that keeps knocking while locked, so a sweep never mistakes it for idle.

use crate::decision::Decision;
use crate::limits::{BucketLimits, NANOS_PER_MILLI, NANOS_PER_SEC};

/// Everything the limiter remembers about one key. 32 bytes on 64-bit targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketState {
    /// Time of the latest check; refill is computed from here. Also the LRU timestamp.
    last_seen_ns: u64,
    /// Balance in units (`token_units` units = one token).
    units: u32,
    /// Refill numerator left over from the last refill, below 10^9: the exactness carry.
    carry: u32,
    phase: Phase,
}

/// Escalation state. A locked key has no use for its violation count (it restarts at zero
/// when the lockout ends), so the two share storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open {
        soft_violations: u16,
        last_violation_ns: u64,
    },
    Locked {
        until_ns: u64,
    },
}

const CLEAN: Phase = Phase::Open {
    soft_violations: 0,
    last_violation_ns: 0,
};

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
            phase: CLEAN,
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
        if let Phase::Locked { until_ns } = self.phase
            && recent_ns.saturating_add(lag_ns) < until_ns
        {
            // The hint is measured from the older reading: at worst a little long.
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
        (self.units, self.carry) = self.refilled(limits, now_ns);
        self.last_seen_ns = now_ns;

        if let Phase::Locked { until_ns } = self.phase {
            if now_ns < until_ns {
                let retry_ms = ceil_ms(until_ns - now_ns).max(self.token_ready_ms(limits));
                return Decision::hard_lockout(retry_ms);
            }
            self.phase = CLEAN;
        }

        if self.units >= limits.token_units {
            self.units -= limits.token_units;
            self.phase = CLEAN;
            return Decision::allow(self.credit(limits));
        }
        self.deny(limits, soft_violation_window_ns, now_ns)
    }

    #[inline]
    fn deny(&mut self, limits: &BucketLimits, window_ns: u64, now_ns: u64) -> Decision {
        let soft_violations = match self.phase {
            Phase::Open {
                soft_violations,
                last_violation_ns,
            } if soft_violations > 0 && now_ns - last_violation_ns <= window_ns => {
                soft_violations.saturating_add(1)
            }
            _ => 1,
        };
        if soft_violations >= limits.max_soft_violations {
            let until_ns = now_ns.saturating_add(limits.hard_lockout_ns);
            self.phase = Phase::Locked { until_ns };
            let retry_ms = ceil_ms(limits.hard_lockout_ns).max(self.token_ready_ms(limits));
            return Decision::hard_lockout(retry_ms);
        }
        self.phase = Phase::Open {
            soft_violations,
            last_violation_ns: now_ns,
        };
        Decision::soft_throttle(self.token_ready_ms(limits))
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

    /// Milliseconds until one whole token is available, counting the carried remainder:
    /// the smallest `t` with `t * rate + carry >= missing * 10^9`, rounded up to a ms.
    #[inline]
    fn token_ready_ms(&self, limits: &BucketLimits) -> u64 {
        let Some(missing_units) = limits.token_units.checked_sub(self.units) else {
            return 0;
        };
        if missing_units == 0 {
            return 0;
        }
        let needed = u64::from(missing_units) * NANOS_PER_SEC - u64::from(self.carry);
        needed.div_ceil(limits.refill_units_per_sec * NANOS_PER_MILLI)
    }

    #[inline]
    fn credit(&self, limits: &BucketLimits) -> u32 {
        self.units / limits.token_units
    }

    pub(crate) fn last_seen_ns(&self) -> u64 {
        self.last_seen_ns
    }

    pub(crate) fn is_locked_at(&self, now_ns: u64) -> bool {
        matches!(self.phase, Phase::Locked { until_ns } if now_ns < until_ns)
    }

    /// The state as it would look at `now_ns` (refilled), for reports.
    pub(crate) fn snapshot(&self, limits: &BucketLimits, now_ns: u64) -> Snapshot {
        let now_ns = now_ns.max(self.last_seen_ns);
        let (units, _) = self.refilled(limits, now_ns);
        let (lockout_remaining_ns, soft_violations) = match self.phase {
            Phase::Locked { until_ns } => (until_ns.saturating_sub(now_ns), 0),
            Phase::Open {
                soft_violations, ..
            } => (0, soft_violations),
        };
        Snapshot {
            units,
            lockout_remaining_ns,
            soft_violations,
            idle_ns: now_ns - self.last_seen_ns,
        }
    }
}

fn ceil_ms(ns: u64) -> u64 {
    ns.div_ceil(NANOS_PER_MILLI)
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
        assert_eq!(std::mem::size_of::<BucketState>(), 32);
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
