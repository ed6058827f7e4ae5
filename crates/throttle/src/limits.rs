//! [`BucketLimits`]: a policy converted to exact fixed-point integers.
//!
//! One token is `token_scale` units. The refill rate is an integer number of units per
//! second, so refilling over `elapsed` nanoseconds is `elapsed * rate + carry` divided by
//! 10^9 with the remainder carried to the next call: admissions over any period are exact.
//! Validation bounds every value so that this product can never overflow a `u64`.

use crate::clock::duration_to_ns;
use crate::error::ConfigError;
use crate::options::{EngineOptions, InitialTokens, require_millisecond};
use crate::policy::Policy;

pub(crate) const NANOS_PER_SEC: u64 = 1_000_000_000;
pub(crate) const NANOS_PER_MILLI: u64 = 1_000_000;

/// Nanoseconds rounded up to whole milliseconds (hints never point too early).
pub(crate) fn ceil_ms(ns: u64) -> u64 {
    ns.div_ceil(NANOS_PER_MILLI)
}

/// Largest refill rate in units per second. With a capacity of at most `u32::MAX` units,
/// `(capacity + rate + 1) * 10^9` stays below `u64::MAX`: refill arithmetic cannot overflow.
const MAX_REFILL_UNITS_PER_SEC: u64 = 10_000_000_000;
/// Largest capacity in units: the per-key balance is a `u32` to keep the state small.
const MAX_CAPACITY_UNITS: u64 = u32::MAX as u64;

/// Validated fixed-point limits of one bucket family (one scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketLimits {
    pub(crate) token_units: u32,
    pub(crate) capacity_units: u32,
    pub(crate) refill_units_per_sec: u64,
    pub(crate) initial_units: u32,
    pub(crate) hard_lockout_ns: u64,
    pub(crate) max_soft_violations: u16,
    /// Idle time after which any bucket is full again, whatever its balance and carry.
    pub(crate) full_refill_ns: u64,
    /// Whether a lockout lasts at least `full_refill_ns`: then a token is always back
    /// before the lockout ends, and a locked check's retry hint is just the time left.
    pub(crate) lockout_outlasts_refill: bool,
}

impl BucketLimits {
    /// Validates `policy` against `options`. `scope` names the policy in error messages.
    pub fn from_policy(
        scope: &str,
        policy: &Policy,
        options: &EngineOptions,
    ) -> Result<Self, ConfigError> {
        let scale = options.token_scale;
        let setting = |name: &str| format!("policy {scope} {name}");

        let refill_units_per_sec = to_units(
            &setting("requests_per_second"),
            policy.requests_per_second,
            scale,
            MAX_REFILL_UNITS_PER_SEC,
        )?;
        if policy.burst.is_finite() && policy.burst > 0.0 && policy.burst < 1.0 {
            return Err(ConfigError::BurstBelowOneToken {
                setting: setting("burst"),
                value: policy.burst,
            });
        }
        let capacity_units = to_units(&setting("burst"), policy.burst, scale, MAX_CAPACITY_UNITS)?;
        let capacity_units = u32::try_from(capacity_units).unwrap_or(u32::MAX);

        let hard_lockout = policy.hard_lockout.unwrap_or(options.hard_lockout);
        require_millisecond(&setting("hard_lockout"), hard_lockout)?;
        let max_soft_violations = policy
            .max_soft_violations
            .unwrap_or(options.max_soft_violations);
        if max_soft_violations == 0 {
            return Err(ConfigError::ZeroCount {
                setting: setting("max_soft_violations"),
            });
        }

        let initial_units = match options.initial_tokens {
            InitialTokens::Full => capacity_units,
            InitialTokens::Empty => 0,
            InitialTokens::Tokens(tokens) => {
                let units = u64::from(tokens) * u64::from(scale);
                if units > u64::from(capacity_units) {
                    return Err(ConfigError::InitialAboveBurst {
                        scope: scope.to_owned(),
                        initial: tokens,
                        burst: policy.burst,
                    });
                }
                units as u32
            }
        };

        let full_refill_ns =
            (u64::from(capacity_units) * NANOS_PER_SEC).div_ceil(refill_units_per_sec);
        Ok(Self {
            token_units: scale,
            capacity_units,
            refill_units_per_sec,
            initial_units,
            hard_lockout_ns: duration_to_ns(hard_lockout),
            lockout_outlasts_refill: duration_to_ns(hard_lockout) >= full_refill_ns,
            max_soft_violations,
            full_refill_ns,
        })
    }

    /// Sustained rate in requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.refill_units_per_sec as f64 / f64::from(self.token_units)
    }

    /// Bucket capacity in requests.
    pub fn burst(&self) -> f64 {
        f64::from(self.capacity_units) / f64::from(self.token_units)
    }

    /// Lockout length in milliseconds (rounded up).
    pub fn hard_lockout_ms(&self) -> u64 {
        self.hard_lockout_ns.div_ceil(NANOS_PER_MILLI)
    }

    /// Soft violations that trigger a lockout.
    pub fn max_soft_violations(&self) -> u16 {
        self.max_soft_violations
    }
}

/// Converts a positive decimal into whole units, refusing anything that is not exactly
/// representable. The tolerance only absorbs binary floating-point noise (0.3 * 100 is
/// 30.000000000000004), never a real fraction of a unit.
fn to_units(setting: &str, value: f64, scale: u32, max_units: u64) -> Result<u64, ConfigError> {
    if !value.is_finite() || value <= 0.0 {
        return Err(ConfigError::NotPositive {
            setting: setting.to_owned(),
            value,
        });
    }
    let scaled = value * f64::from(scale);
    if scaled > max_units as f64 + 0.5 {
        return Err(ConfigError::TooLarge {
            setting: setting.to_owned(),
            value,
            max: max_units as f64 / f64::from(scale),
            token_scale: scale,
        });
    }
    let whole = scaled.round();
    if whole < 1.0 || (scaled - whole).abs() > 1e-9 * whole {
        return Err(ConfigError::NotRepresentable {
            setting: setting.to_owned(),
            value,
            token_scale: scale,
        });
    }
    Ok(whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(policy: Policy) -> Result<BucketLimits, ConfigError> {
        BucketLimits::from_policy("\"op:test\"", &policy, &EngineOptions::default())
    }

    #[test]
    fn converts_exactly() {
        let l = limits(Policy::new(0.5, 2.0)).unwrap();
        assert_eq!(l.refill_units_per_sec, 500);
        assert_eq!(l.capacity_units, 2000);
        assert_eq!(l.full_refill_ns, 4 * NANOS_PER_SEC);
        assert_eq!(l.hard_lockout_ms(), 30_000);
        assert_eq!(l.max_soft_violations(), 5);
        let l = limits(Policy::new(0.3, 1.5)).unwrap();
        assert_eq!(l.refill_units_per_sec, 300);
        assert_eq!(l.requests_per_second(), 0.3);
        assert_eq!(l.burst(), 1.5);
    }

    #[test]
    fn rejects_instead_of_rounding_or_clamping() {
        let cases = [
            (Policy::new(0.0, 1.0), "greater than 0"),
            (Policy::new(-1.0, 1.0), "greater than 0"),
            (Policy::new(f64::NAN, 1.0), "greater than 0"),
            (Policy::new(1.0, 0.5), "at least 1 token"),
            (Policy::new(0.0001, 1.0), "not a whole multiple"),
            (Policy::new(1.0, 1.0001), "not a whole multiple"),
            (Policy::new(1e12, 1.0), "larger than the supported maximum"),
            (Policy::new(1.0, 1e10), "larger than the supported maximum"),
            (
                Policy::new(1.0, 1.0).with_hard_lockout(Duration::ZERO),
                "hard_lockout must be at least 1 ms",
            ),
            (
                Policy::new(1.0, 1.0).with_max_soft_violations(0),
                "max_soft_violations must be at least 1",
            ),
        ];
        for (policy, expected) in cases {
            let message = limits(policy.clone()).unwrap_err().to_string();
            assert!(
                message.contains(expected),
                "{policy:?}: {message:?} lacks {expected:?}"
            );
            assert!(
                message.contains("op:test"),
                "{message:?} does not name the policy"
            );
        }
    }

    #[test]
    fn a_200_rps_policy_stays_200() {
        // The seed rounded policies to tiers (200 rps became 128): ours keeps what was asked.
        let l = limits(Policy::new(200.0, 200.0)).unwrap();
        assert_eq!(l.requests_per_second(), 200.0);
        assert_eq!(l.burst(), 200.0);
    }

    #[test]
    fn initial_tokens_must_fit_the_burst() {
        let options = EngineOptions {
            initial_tokens: InitialTokens::Tokens(3),
            ..Default::default()
        };
        let fits = BucketLimits::from_policy("p", &Policy::new(1.0, 3.0), &options).unwrap();
        assert_eq!(fits.initial_units, 3000);
        let err = BucketLimits::from_policy("p", &Policy::new(1.0, 2.0), &options).unwrap_err();
        assert!(matches!(err, ConfigError::InitialAboveBurst { .. }));
    }

    #[test]
    fn largest_values_cannot_overflow_refill() {
        let l = limits(Policy::new(10_000_000.0, 4_294_967.0)).unwrap();
        let worst =
            (u64::from(l.capacity_units) + l.refill_units_per_sec + 1).checked_mul(NANOS_PER_SEC);
        assert!(worst.is_some());
    }
}
