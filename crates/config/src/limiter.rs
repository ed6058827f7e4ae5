//! Token-bucket settings as the file writes them: [`RatePolicy`] (`[[policies]]`, and the
//! shields of the client API and the gateway) and [`LimiterConfig`] (the engine behind a
//! shield or a policy limiter), converted to the throttle crate's types.

use crate::check::Check;
use crate::duration::Millis;
use proxypool_throttle::{AddressAggregation, EngineOptions, InitialTokens, Policy};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A token-bucket policy: `requests_per_second` refill, `burst` capacity, and the
/// escalation from soft denials to a hard lockout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePolicy {
    /// Required in `[[policies]]` (clients name it); policies sharing an id share buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub requests_per_second: f64,
    pub burst: f64,
    /// Lockout after `max_soft_violations` denials in a row (default: the engine's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_lockout: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_soft_violations: Option<u16>,
}

impl RatePolicy {
    /// A policy without id or escalation overrides.
    pub fn new(requests_per_second: f64, burst: f64) -> Self {
        RatePolicy {
            id: None,
            requests_per_second,
            burst,
            hard_lockout: None,
            max_soft_violations: None,
        }
    }

    /// The throttle crate's form of this policy.
    pub fn to_throttle(&self) -> Policy {
        let mut policy = Policy::new(self.requests_per_second, self.burst);
        if let Some(id) = &self.id {
            policy = policy.with_id(id.clone());
        }
        if let Some(lockout) = self.hard_lockout {
            policy = policy.with_hard_lockout(lockout.as_duration());
        }
        if let Some(max) = self.max_soft_violations {
            policy = policy.with_max_soft_violations(max);
        }
        policy
    }

    /// Checks the policy against `engine` the way the limiter will when it loads it.
    pub(crate) fn check(&self, engine: &EngineOptions) -> Result<(), String> {
        if self.hard_lockout == Some(Millis(0)) {
            return Err("hard_lockout must be at least 1ms".into());
        }
        let id = self.id.as_deref().unwrap_or("shield");
        proxypool_throttle::BucketLimits::from_policy(id, &self.to_throttle(), engine)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The limiter engine: bounded memory, escalation defaults, key grouping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimiterConfig {
    /// Fixed-point units per token.
    pub token_scale: u32,
    /// Independently locked shards (a power of two).
    pub shard_count: usize,
    /// Denials closer together than this count up towards a lockout.
    pub soft_violation_window: Millis,
    /// Soft violations before a lockout, for policies that set none.
    pub max_soft_violations: u16,
    /// Lockout length for policies that set none.
    pub hard_lockout: Millis,
    /// Most keys tracked; a new key beyond this is denied (fail closed).
    pub max_tracked: usize,
    /// A key idle this long may be evicted.
    pub stale_after: Millis,
    /// Retry hint for a new key denied because the limiter is full.
    pub cap_retry_after: Millis,
    pub initial_tokens: InitialTokens,
    /// How client addresses are grouped into keys (IPv6 by prefix).
    pub aggregation: AddressAggregation,
}

impl Default for LimiterConfig {
    fn default() -> Self {
        let engine = EngineOptions::default();
        LimiterConfig {
            token_scale: engine.token_scale,
            shard_count: engine.shard_count,
            soft_violation_window: Millis::from_duration(engine.soft_violation_window),
            max_soft_violations: engine.max_soft_violations,
            hard_lockout: Millis::from_duration(engine.hard_lockout),
            max_tracked: engine.max_tracked,
            stale_after: Millis::from_duration(engine.stale_after),
            cap_retry_after: Millis::from_duration(engine.cap_retry_after),
            initial_tokens: engine.initial_tokens,
            aggregation: engine.aggregation,
        }
    }
}

impl LimiterConfig {
    /// The throttle crate's engine options.
    pub fn to_engine_options(&self) -> EngineOptions {
        EngineOptions {
            token_scale: self.token_scale,
            shard_count: self.shard_count,
            soft_violation_window: self.soft_violation_window.as_duration(),
            max_soft_violations: self.max_soft_violations,
            hard_lockout: self.hard_lockout.as_duration(),
            max_tracked: self.max_tracked,
            stale_after: self.stale_after.as_duration(),
            cap_retry_after: self.cap_retry_after.as_duration(),
            initial_tokens: self.initial_tokens,
            aggregation: self.aggregation,
        }
    }

    /// The engine's own checks, and a shield policy against them.
    pub(crate) fn check(&self, shield: Option<&RatePolicy>) -> Result<(), String> {
        let engine = self.to_engine_options();
        engine.validate().map_err(|e| e.to_string())?;
        if let Some(policy) = shield {
            policy.check(&engine)?;
        }
        Ok(())
    }
}

/// Checks `[[policies]]` (ids present and unique, each loadable by the gateway's limiter);
/// returns the ids, which clients may name.
pub(crate) fn validate_policies(c: &mut Check<'_>, policies: &[RatePolicy]) -> HashSet<String> {
    let mut ids = HashSet::new();
    // Client policies run in the gateway's limiter, on its default engine.
    let engine = proxypool_throttle::EngineOptions::default();
    for (i, policy) in policies.iter().enumerate() {
        let path = format!("policies[{i}]");
        match &policy.id {
            Some(id) if !id.trim().is_empty() && ids.insert(id.clone()) => {}
            _ => c.at(format!("{path}.id"), "must be present and unique"),
        }
        if let Err(message) = policy.check(&engine) {
            c.at(path, message);
        }
    }
    ids
}
