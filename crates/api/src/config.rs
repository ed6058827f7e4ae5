//! API settings: transport limits, extraction settings and the shield policy, validated once
//! when the state is built (invalid values are rejected, never clamped).

use proxypool_core::extract::MAX_EXTRACT_COUNT;
use proxypool_throttle::{EngineOptions, Policy};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Limits enforced before authentication, so an anonymous peer can only spend this much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiLimits {
    /// Open connections [`crate::serve`] accepts at once; further peers wait in the
    /// kernel's backlog.
    pub max_connections: usize,
    /// Requests processed at once; beyond that a request is answered 503 at once instead
    /// of queueing (a queue only adds latency to an overloaded server).
    pub max_concurrent_requests: usize,
    /// A request not answered within this is 503. An admitted extraction still completes
    /// in the background, so a retry with the same `Idempotency-Key` gets its result.
    #[serde(with = "millis", rename = "request_timeout_ms")]
    pub request_timeout: Duration,
    /// Largest request body; a larger declared length is 413 before authentication, a
    /// larger streamed body is cut at this size.
    pub max_body_bytes: usize,
    /// `Retry-After` for 503 answers (store unavailable, saturated, timed out).
    pub unavailable_retry_after_secs: u64,
    /// How long `/readyz` waits for each dependency.
    #[serde(with = "millis", rename = "readiness_timeout_ms")]
    pub readiness_timeout: Duration,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            max_connections: 1024,
            max_concurrent_requests: 256,
            request_timeout: Duration::from_secs(10),
            // The seed's shield caps bodies at 64 KiB; an extraction request is a few
            // hundred bytes.
            max_body_bytes: 64 * 1024,
            unavailable_retry_after_secs: 1,
            readiness_timeout: Duration::from_secs(2),
        }
    }
}

/// How extractions are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractionSettings {
    /// Most proxies one request may ask for (at most the core's 1000).
    pub max_count: u32,
    /// Matching proxies every extraction leaves in the pool for the gateway.
    pub reserve_for_gateway: u32,
    /// How long a keyed extraction stays replayable (cut at its earliest proxy expiry).
    #[serde(with = "millis", rename = "idempotency_ttl_ms")]
    pub idempotency_ttl: Duration,
    /// Most assignments one admin drain call starts (the rest: call again).
    pub drain_batch: usize,
    /// Most workers the admin listing returns.
    pub max_workers_listed: usize,
}

impl Default for ExtractionSettings {
    fn default() -> Self {
        ExtractionSettings {
            max_count: 100,
            reserve_for_gateway: 0,
            idempotency_ttl: Duration::from_secs(10 * 60),
            drain_batch: 10_000,
            max_workers_listed: 1_000,
        }
    }
}

/// The per-IP token bucket in front of authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShieldSettings {
    pub engine: EngineOptions,
    pub policy: Policy,
    /// How often the background sweeper evicts idle addresses.
    #[serde(with = "millis", rename = "sweep_interval_ms")]
    pub sweep_interval: Duration,
}

impl Default for ShieldSettings {
    fn default() -> Self {
        ShieldSettings {
            engine: EngineOptions::default(),
            // Generous for one client address (an office NAT, a scraper fleet's egress),
            // small enough that one address cannot saturate the authentication path.
            policy: Policy::new(200.0, 400.0),
            sweep_interval: Duration::from_secs(30),
        }
    }
}

/// A setting that cannot be used as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiConfigError {
    #[error("{setting} must be at least 1")]
    Zero { setting: &'static str },
    #[error("extraction max_count must be in 1..={MAX_EXTRACT_COUNT}, got {0}")]
    MaxCount(u32),
    #[error("client {client}: {problem}")]
    Client { client: String, problem: String },
    #[error("two clients have the id {0}")]
    DuplicateClient(String),
    #[error("shield: {0}")]
    Shield(#[from] proxypool_throttle::ConfigError),
    #[error("shield sweeper thread: {0}")]
    Sweeper(String),
}

impl ApiLimits {
    pub fn validate(&self) -> Result<(), ApiConfigError> {
        nonzero("max_connections", self.max_connections as u64)?;
        nonzero(
            "max_concurrent_requests",
            self.max_concurrent_requests as u64,
        )?;
        nonzero(
            "request_timeout_ms",
            self.request_timeout.as_millis() as u64,
        )?;
        nonzero("max_body_bytes", self.max_body_bytes as u64)?;
        nonzero(
            "unavailable_retry_after_secs",
            self.unavailable_retry_after_secs,
        )?;
        nonzero(
            "readiness_timeout_ms",
            self.readiness_timeout.as_millis() as u64,
        )
    }
}

impl ExtractionSettings {
    pub fn validate(&self) -> Result<(), ApiConfigError> {
        if !(1..=MAX_EXTRACT_COUNT).contains(&self.max_count) {
            return Err(ApiConfigError::MaxCount(self.max_count));
        }
        nonzero(
            "idempotency_ttl_ms",
            self.idempotency_ttl.as_millis() as u64,
        )?;
        nonzero("drain_batch", self.drain_batch as u64)?;
        nonzero("max_workers_listed", self.max_workers_listed as u64)
    }
}

fn nonzero(setting: &'static str, value: u64) -> Result<(), ApiConfigError> {
    if value == 0 {
        Err(ApiConfigError::Zero { setting })
    } else {
        Ok(())
    }
}

/// Durations as whole milliseconds in configuration files.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(value.as_millis() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_zeroes_are_named() {
        ApiLimits::default().validate().unwrap();
        ExtractionSettings::default().validate().unwrap();
        let limits = ApiLimits {
            max_body_bytes: 0,
            ..ApiLimits::default()
        };
        assert!(
            limits
                .validate()
                .unwrap_err()
                .to_string()
                .contains("max_body_bytes")
        );
        let extraction = ExtractionSettings {
            max_count: MAX_EXTRACT_COUNT + 1,
            ..ExtractionSettings::default()
        };
        assert!(extraction.validate().is_err());
    }

    #[test]
    fn reads_milliseconds_and_rejects_unknown_fields() {
        let limits: ApiLimits = serde_json::from_str(r#"{"request_timeout_ms": 1500}"#).unwrap();
        assert_eq!(limits.request_timeout, Duration::from_millis(1500));
        assert!(serde_json::from_str::<ApiLimits>(r#"{"timeout": 1}"#).is_err());
    }
}
