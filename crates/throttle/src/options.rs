//! Engine-wide settings ([`EngineOptions`]) and their validation.
//!
//! Defaults follow the seed's newer version (soft window 8 s, 5 soft violations, 30 s lockout,
//! 180 s stale, 100,000 tracked keys) with two changes: the token scale is 1000, so rates
//! down to 0.001 requests per second are exact, and there are 64 shards instead of 256. A
//! check holds its shard for a few dozen nanoseconds, so 64 shards keep contention
//! negligible on machines with dozens of cores, while the shard array and the lockout board
//! (one 64-byte line per shard each) stay at 8 KiB and live in L1; at 256 they took 32 KiB
//! and cost about one extra L1 miss per check (measured with cachegrind).

use crate::address::AddressAggregation;
use crate::clock::duration_to_ns;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Largest accepted token scale: keeps one token's worth of units far from `u32` limits.
pub const MAX_TOKEN_SCALE: u32 = 1_000_000;
/// Largest accepted shard count.
pub const MAX_SHARDS: usize = 1 << 16;

/// How full a key's bucket is when the key is first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialTokens {
    /// Full: a new client may burst at once (the usual choice).
    Full,
    /// Empty: a new client must wait for the refill.
    Empty,
    /// This many whole tokens; must not exceed any policy's burst.
    Tokens(u32),
}

/// Settings shared by every bucket of one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineOptions {
    /// Fixed-point units per token. Rates and bursts must be whole multiples of `1/token_scale`.
    pub token_scale: u32,
    /// Number of independently locked shards; a power of two.
    pub shard_count: usize,
    /// Denials closer together than this count up towards a lockout.
    #[serde(rename = "soft_violation_window_ms", with = "crate::serde_ms")]
    pub soft_violation_window: Duration,
    /// Soft violations that trigger a lockout, for policies that do not set their own.
    pub max_soft_violations: u16,
    /// Lockout length for policies that do not set their own. Never below 1 ms.
    #[serde(rename = "hard_lockout_ms", with = "crate::serde_ms")]
    pub hard_lockout: Duration,
    /// Most keys tracked at once; a new key beyond this is denied (fail closed).
    pub max_tracked: usize,
    /// A key idle this long may be evicted by a sweep (unless it is locked out).
    #[serde(rename = "stale_after_ms", with = "crate::serde_ms")]
    pub stale_after: Duration,
    /// Retry hint given to a new key denied because the limiter is full.
    #[serde(rename = "cap_retry_after_ms", with = "crate::serde_ms")]
    pub cap_retry_after: Duration,
    /// Tokens a key starts with.
    pub initial_tokens: InitialTokens,
    /// How client addresses are grouped into keys.
    pub aggregation: AddressAggregation,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            token_scale: 1000,
            shard_count: 64,
            soft_violation_window: Duration::from_secs(8),
            max_soft_violations: 5,
            hard_lockout: Duration::from_secs(30),
            max_tracked: 100_000,
            stale_after: Duration::from_secs(180),
            cap_retry_after: Duration::from_secs(1),
            initial_tokens: InitialTokens::Full,
            aggregation: AddressAggregation::default(),
        }
    }
}

impl EngineOptions {
    /// Checks every setting; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.token_scale == 0 || self.token_scale > MAX_TOKEN_SCALE {
            return Err(ConfigError::TokenScale {
                value: self.token_scale,
                max: MAX_TOKEN_SCALE,
            });
        }
        if !self.shard_count.is_power_of_two() || self.shard_count > MAX_SHARDS {
            return Err(ConfigError::ShardCount {
                value: self.shard_count,
                max: MAX_SHARDS,
            });
        }
        for (setting, value) in [
            ("soft_violation_window", self.soft_violation_window),
            ("hard_lockout", self.hard_lockout),
            ("stale_after", self.stale_after),
            ("cap_retry_after", self.cap_retry_after),
        ] {
            require_millisecond(setting, value)?;
        }
        if self.max_soft_violations == 0 {
            return Err(ConfigError::ZeroCount {
                setting: "max_soft_violations".into(),
            });
        }
        if self.max_tracked == 0 {
            return Err(ConfigError::ZeroCount {
                setting: "max_tracked".into(),
            });
        }
        self.aggregation.validate()
    }

    pub(crate) fn soft_violation_window_ns(&self) -> u64 {
        duration_to_ns(self.soft_violation_window)
    }

    pub(crate) fn stale_after_ns(&self) -> u64 {
        duration_to_ns(self.stale_after)
    }

    pub(crate) fn cap_retry_after_ms(&self) -> u64 {
        ceil_millis(self.cap_retry_after)
    }
}

/// Rejects durations under one millisecond, naming the setting.
pub(crate) fn require_millisecond(setting: &str, value: Duration) -> Result<(), ConfigError> {
    if value < Duration::from_millis(1) {
        return Err(ConfigError::DurationTooShort {
            setting: setting.to_owned(),
            value,
        });
    }
    Ok(())
}

pub(crate) fn ceil_millis(value: Duration) -> u64 {
    duration_to_ns(value).div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        EngineOptions::default().validate().unwrap();
    }

    #[test]
    fn rejects_bad_settings_with_named_errors() {
        let cases: Vec<(EngineOptions, &str)> = vec![
            (
                EngineOptions {
                    token_scale: 0,
                    ..Default::default()
                },
                "token_scale",
            ),
            (
                EngineOptions {
                    shard_count: 3,
                    ..Default::default()
                },
                "shard_count",
            ),
            (
                EngineOptions {
                    hard_lockout: Duration::ZERO,
                    ..Default::default()
                },
                "hard_lockout must be at least 1 ms",
            ),
            (
                EngineOptions {
                    soft_violation_window: Duration::from_micros(10),
                    ..Default::default()
                },
                "soft_violation_window",
            ),
            (
                EngineOptions {
                    max_soft_violations: 0,
                    ..Default::default()
                },
                "max_soft_violations",
            ),
            (
                EngineOptions {
                    max_tracked: 0,
                    ..Default::default()
                },
                "max_tracked",
            ),
        ];
        for (options, expected) in cases {
            let message = options.validate().unwrap_err().to_string();
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
    }

    #[test]
    fn reads_millisecond_fields_and_rejects_unknown_ones() {
        let options: EngineOptions =
            serde_json::from_str(r#"{"hard_lockout_ms": 1500, "initial_tokens": {"tokens": 3}}"#)
                .unwrap();
        assert_eq!(options.hard_lockout, Duration::from_millis(1500));
        assert_eq!(options.initial_tokens, InitialTokens::Tokens(3));
        assert!(serde_json::from_str::<EngineOptions>(r#"{"cooldown_reset_sec": 1}"#).is_err());
    }
}
