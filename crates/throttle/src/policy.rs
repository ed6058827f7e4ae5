//! [`Policy`]: the limits a caller configures for one operation (or for all traffic without
//! one). It is plain data that deserializes from config; [`crate::BucketLimits`] is its
//! validated fixed-point form.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Limits for one operation, or for a group of operations sharing an `id`.
///
/// Sustained rate `requests_per_second`, bucket capacity `burst` (both may be fractional but
/// must be whole multiples of `1/token_scale`), and escalation: `max_soft_violations` denials
/// in a row, each within the engine's soft violation window of the previous one, lock the key
/// out for `hard_lockout`. Unset escalation settings use the engine defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Operations whose policies have the same id share one bucket per client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Sustained refill rate in requests per second.
    pub requests_per_second: f64,
    /// Bucket capacity in requests (at least 1).
    pub burst: f64,
    /// Lockout length after too many soft violations (at least 1 ms).
    #[serde(
        default,
        rename = "hard_lockout_ms",
        with = "crate::serde_ms::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub hard_lockout: Option<Duration>,
    /// Soft violations that trigger a lockout (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_soft_violations: Option<u16>,
}

impl Policy {
    /// A policy with this rate and burst and the engine's escalation defaults.
    pub fn new(requests_per_second: f64, burst: f64) -> Self {
        Self {
            id: None,
            requests_per_second,
            burst,
            hard_lockout: None,
            max_soft_violations: None,
        }
    }

    /// Shares buckets with every other operation whose policy has this id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the lockout length.
    pub fn with_hard_lockout(mut self, lockout: Duration) -> Self {
        self.hard_lockout = Some(lockout);
        self
    }

    /// Sets how many soft violations trigger a lockout.
    pub fn with_max_soft_violations(mut self, count: u16) -> Self {
        self.max_soft_violations = Some(count);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_config_form_and_rejects_unknown_fields() {
        let policy: Policy = serde_json::from_str(
            r#"{"id": "search", "requests_per_second": 0.5, "burst": 2, "hard_lockout_ms": 1500}"#,
        )
        .unwrap();
        assert_eq!(
            policy,
            Policy::new(0.5, 2.0)
                .with_id("search")
                .with_hard_lockout(Duration::from_millis(1500))
        );
        let typo = r#"{"requests_per_second": 1, "burst": 1, "hard_lockout_seconds": 3}"#;
        assert!(serde_json::from_str::<Policy>(typo).is_err());
    }
}
