//! The answer to one check: admitted or not, why, and when to come back.

use serde::Serialize;
use std::time::Duration;

/// Why a check was denied (or [`Reason::None`] when it was admitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Admitted.
    None,
    /// Denied because the bucket is empty; the key is not (yet) locked out.
    SoftThrottle,
    /// Denied because the key is locked out after repeated violations, or because the limiter
    /// is tracking as many keys as it may and this key is new (fail closed).
    HardLockout,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// When denied: milliseconds until a retry will be admitted (always at least 1).
    /// A request made exactly this long after the denial is admitted unless other requests
    /// for the same key took the tokens in between. Zero when allowed.
    pub retry_after_ms: u64,
    /// Whole tokens the caller may still spend right now, after this decision: always 0 when
    /// denied (an empty bucket, or tokens that a lockout keeps out of reach).
    pub credit: u32,
    /// Why the decision came out this way.
    pub reason: Reason,
}

impl Decision {
    pub(crate) fn allow(credit: u32) -> Self {
        Self {
            allowed: true,
            retry_after_ms: 0,
            credit,
            reason: Reason::None,
        }
    }

    pub(crate) fn soft_throttle(retry_after_ms: u64) -> Self {
        Self {
            allowed: false,
            retry_after_ms: retry_after_ms.max(1),
            credit: 0,
            reason: Reason::SoftThrottle,
        }
    }

    pub(crate) fn hard_lockout(retry_after_ms: u64) -> Self {
        Self {
            allowed: false,
            retry_after_ms: retry_after_ms.max(1),
            credit: 0,
            reason: Reason::HardLockout,
        }
    }

    /// [`Decision::retry_after_ms`] as a [`Duration`].
    pub fn retry_after(&self) -> Duration {
        Duration::from_millis(self.retry_after_ms)
    }

    /// Whole seconds for an HTTP `Retry-After` header: rounded up, at least 1 when denied,
    /// so a client that obeys it never comes back too early.
    pub fn retry_after_secs_ceil(&self) -> u64 {
        if self.allowed {
            0
        } else {
            self.retry_after_ms.div_ceil(1000).max(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_header_rounds_up() {
        assert_eq!(Decision::soft_throttle(1250).retry_after_secs_ceil(), 2);
        assert_eq!(Decision::soft_throttle(1).retry_after_secs_ceil(), 1);
        assert_eq!(Decision::hard_lockout(30_000).retry_after_secs_ceil(), 30);
        assert_eq!(Decision::allow(3).retry_after_secs_ceil(), 0);
    }

    #[test]
    fn denials_never_say_retry_now() {
        assert_eq!(Decision::soft_throttle(0).retry_after_ms, 1);
        assert_eq!(Decision::hard_lockout(0).retry_after_ms, 1);
    }

    #[test]
    fn serializes_reason_in_snake_case() {
        let json = serde_json::to_string(&Decision::soft_throttle(5)).unwrap();
        assert!(json.contains("\"soft_throttle\""), "{json}");
    }
}
