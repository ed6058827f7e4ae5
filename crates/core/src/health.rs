//! Health-check results going into the pool, and what the checker asks for.

use crate::error::PoolError;
use crate::ids::ProxyId;
use crate::proxy::ProxyStatus;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// The outcome of one check through a proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CheckOutcome {
    Success {
        latency_ms: u32,
    },
    /// `error` is a short kind such as `connect_timeout` or `bad_status`.
    Failure {
        error: String,
    },
}

/// One check result for one proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthObservation {
    pub proxy_id: ProxyId,
    pub checked_at_ms: UnixMillis,
    pub outcome: CheckOutcome,
}

/// A batch of check results and the rule that turns failures into a status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthBatch {
    pub observations: Vec<HealthObservation>,
    /// Consecutive failures that make a proxy UNHEALTHY (fewer make it SUSPECT). At least 1.
    pub unhealthy_after_failures: u32,
}

/// Longest error kind kept on a record.
const MAX_ERROR_KIND: usize = 64;
/// Most observations one batch may carry.
pub const MAX_HEALTH_BATCH: usize = 10_000;

impl HealthBatch {
    /// Checks the batch before any store work. Error kinds are restricted to a short
    /// identifier so that nothing a proxy said (which could echo credentials) is stored.
    pub fn validate(&self) -> Result<(), PoolError> {
        if self.unhealthy_after_failures == 0 {
            return Err(PoolError::invalid(
                "unhealthy_after_failures must be at least 1",
            ));
        }
        if self.observations.len() > MAX_HEALTH_BATCH {
            return Err(PoolError::invalid(format!(
                "a health batch carries at most {MAX_HEALTH_BATCH} observations"
            )));
        }
        for observation in &self.observations {
            if let CheckOutcome::Failure { error } = &observation.outcome {
                let valid = !error.is_empty()
                    && error.len() <= MAX_ERROR_KIND
                    && error.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return Err(PoolError::invalid(
                        "a failure's error must be a short kind of [A-Za-z0-9_] (at most 64)",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What applying a health batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    pub applied: u32,
    /// Unknown, expired, extracted or removed proxies: the observation was ignored.
    pub ignored: u32,
}

/// Which records the checker wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueQuery {
    pub limit: usize,
    /// A checked record is due again when its last check is at least this old.
    pub recheck_after_ms: u64,
}

/// The status a record takes after an observation, given its consecutive failures so far.
pub fn status_after(
    outcome: &CheckOutcome,
    failures_after: u32,
    unhealthy_after: u32,
) -> ProxyStatus {
    match outcome {
        CheckOutcome::Success { .. } => ProxyStatus::Available,
        CheckOutcome::Failure { .. } if failures_after >= unhealthy_after => ProxyStatus::Unhealthy,
        CheckOutcome::Failure { .. } => ProxyStatus::Suspect,
    }
}
