//! What a [`RedisPool`](crate::RedisPool) can be tuned with, and the defaults.
//!
//! The work bounds match MemoryPool's so both adapters answer `Unavailable(ScanBudget)` at
//! the same points; the timeout and TTL slack are Redis-only.

use proxypool_core::PoolError;
use std::time::Duration;

/// Options of a RedisPool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisPoolOptions {
    /// Every key lives under `{key_prefix}:{activity}:<layout version>:` (the version is
    /// the code's, see `keys.rs`). 1-64 characters of `[A-Za-z0-9._:-]` (no braces, so the
    /// `{activity}` hash tag stays the one tag).
    pub key_prefix: String,
    /// Upper bound of every Redis round trip (connecting included); past it the call is
    /// `Unavailable(Store)`. Never a hang.
    pub call_timeout: Duration,
    /// Candidates one extraction may examine before it must answer `Unavailable`.
    pub extract_scan_budget: usize,
    /// Records an inventory read (and other listing reads) may examine before `Unavailable`.
    pub inventory_scan_budget: usize,
    /// Expired records every write script removes on the side, so memory stays bounded even
    /// if nobody runs the maintenance sweep.
    pub opportunistic_cleanup: usize,
    /// How long an upsert's operation id (and its chunks' results) is remembered.
    pub operation_ttl_ms: u64,
    /// Records per upsert script call: the fixed work bound of one call. A larger batch is
    /// split into chunks, each with its own operation result so a retried batch never
    /// applies a finished chunk twice.
    pub upsert_chunk: usize,
    /// Added to every native key TTL (the memory safety net): logical expiry always decides
    /// first, and a key outlives its latest logical expiry by at least this much (at most
    /// twice: an extension adds one slack of headroom, so keys are not extended per call).
    pub key_ttl_slack_ms: u64,
    /// Shard groups the pool's keys are spread over (`keys::group_tags`), 1..=64. One keeps
    /// the whole pool under one hash tag (a single instance or Sentinel needs no more);
    /// on a Redis Cluster, one per primary spreads the pool over them. Every proxy lives in
    /// the group its id hashes to. A store's group count is fixed when it is first used:
    /// a pool opened with another count is refused.
    pub groups: usize,
}

/// The most shard groups a pool may have.
pub const MAX_GROUPS: usize = 64;

impl Default for RedisPoolOptions {
    fn default() -> Self {
        RedisPoolOptions {
            key_prefix: "pp".to_owned(),
            call_timeout: Duration::from_millis(500),
            extract_scan_budget: 10_000,
            inventory_scan_budget: 100_000,
            opportunistic_cleanup: 16,
            operation_ttl_ms: 10 * 60 * 1000,
            upsert_chunk: 1_000,
            key_ttl_slack_ms: 60_000,
            groups: 1,
        }
    }
}

impl RedisPoolOptions {
    pub(crate) fn validate(&self) -> Result<(), PoolError> {
        let prefix_ok = !self.key_prefix.is_empty()
            && self.key_prefix.len() <= 64
            && self
                .key_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if !prefix_ok {
            return Err(PoolError::invalid(
                "key_prefix must be 1-64 characters of [A-Za-z0-9._:-]",
            ));
        }
        if self.call_timeout.is_zero() {
            return Err(PoolError::invalid("call_timeout must be positive"));
        }
        if self.extract_scan_budget == 0 || self.inventory_scan_budget == 0 {
            return Err(PoolError::invalid("scan budgets must be at least 1"));
        }
        if self.upsert_chunk == 0 || self.upsert_chunk > 10_000 {
            return Err(PoolError::invalid(
                "upsert_chunk must be between 1 and 10000",
            ));
        }
        if self.groups == 0 || self.groups > MAX_GROUPS {
            return Err(PoolError::invalid(format!(
                "groups must be between 1 and {MAX_GROUPS}"
            )));
        }
        if self.operation_ttl_ms == 0 {
            return Err(PoolError::invalid("operation_ttl_ms must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_prefixes_are_checked() {
        assert!(RedisPoolOptions::default().validate().is_ok());
        for bad in ["", "a{b}", "has space", &"x".repeat(65)] {
            let options = RedisPoolOptions {
                key_prefix: bad.to_owned(),
                ..RedisPoolOptions::default()
            };
            assert!(options.validate().is_err(), "{bad:?}");
        }
        let zero = RedisPoolOptions {
            call_timeout: Duration::ZERO,
            ..RedisPoolOptions::default()
        };
        assert!(zero.validate().is_err());
    }
}
