//! Health-check results going into the pool, what the checker asks for, and the bounded
//! set of reasons a check fails for.

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
    /// `error` is a short kind: the checker writes a [`CheckFailure`]'s name (records
    /// stored by older versions may carry other kinds).
    Failure {
        error: String,
    },
}

impl CheckOutcome {
    /// A failure for `reason`.
    pub fn failure(reason: CheckFailure) -> Self {
        CheckOutcome::Failure {
            error: reason.as_str().to_owned(),
        }
    }
}

/// Why a health check failed. A closed set, so that it can be a metric label without
/// unbounded series, and so that what a record keeps as its `last_error` is never text a
/// proxy or target sent (which could echo a credential).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckFailure {
    /// The proxy's host did not resolve, or resolved to an internal address that this
    /// upstream may not dial.
    Dns,
    /// TCP to the proxy failed: refused, unreachable.
    Connect,
    /// TLS to an `https` proxy failed: a certificate its trust does not vouch for, a name
    /// it is not valid for, a failed handshake, an unusable CA bundle.
    ProxyTls,
    /// The proxy refused the credentials (HTTP 407, SOCKS5 authentication failure).
    Auth,
    /// The proxy declined to reach the target: `CONNECT` answered with another non-2xx
    /// status, or a SOCKS5 failure reply.
    Refused,
    /// An answer that is not the protocol: malformed, or cut off (closed or reset in the
    /// middle of an exchange).
    Protocol,
    /// TLS to an `https://` check target through the proxy failed.
    TargetTls,
    /// The target answered a status other than the one expected.
    Status,
    /// The check did not finish within the checker's timeout.
    Timeout,
    /// The check finished, but slower than the upstream's `max_latency`.
    Slow,
    /// Anything else (a target the protocol cannot carry, no target at all).
    Other,
}

impl CheckFailure {
    pub const ALL: [CheckFailure; 11] = [
        CheckFailure::Dns,
        CheckFailure::Connect,
        CheckFailure::ProxyTls,
        CheckFailure::Auth,
        CheckFailure::Refused,
        CheckFailure::Protocol,
        CheckFailure::TargetTls,
        CheckFailure::Status,
        CheckFailure::Timeout,
        CheckFailure::Slow,
        CheckFailure::Other,
    ];

    /// The name stored, listed and used as the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckFailure::Dns => "dns",
            CheckFailure::Connect => "connect",
            CheckFailure::ProxyTls => "proxy_tls",
            CheckFailure::Auth => "auth",
            CheckFailure::Refused => "refused",
            CheckFailure::Protocol => "protocol",
            CheckFailure::TargetTls => "target_tls",
            CheckFailure::Status => "status",
            CheckFailure::Timeout => "timeout",
            CheckFailure::Slow => "slow",
            CheckFailure::Other => "other",
        }
    }

    /// The reason named `name`, if it is one.
    pub fn parse(name: &str) -> Option<CheckFailure> {
        CheckFailure::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_reason_is_a_storable_kind_and_parses_back() {
        let mut names = std::collections::BTreeSet::new();
        for reason in CheckFailure::ALL {
            assert_eq!(CheckFailure::parse(reason.as_str()), Some(reason));
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::Value::from(reason.as_str()),
                "one name on the wire and in the store"
            );
            assert!(names.insert(reason.as_str()), "{reason} named twice");
            let batch = HealthBatch {
                observations: vec![HealthObservation {
                    proxy_id: crate::proxy::proxy_id_for(
                        crate::proxy::Protocol::Http,
                        "h",
                        1,
                        None,
                    ),
                    checked_at_ms: 1,
                    outcome: CheckOutcome::failure(reason),
                }],
                unhealthy_after_failures: 1,
            };
            assert_eq!(batch.validate(), Ok(()), "{reason}");
        }
        assert_eq!(CheckFailure::parse("none"), None);
        assert_eq!(CheckFailure::parse("Timeout"), None);
    }
}
