//! API settings: the `[api]` table's types from `proxypool-config` (transport limits,
//! extraction settings), the shield as the limiter takes it, and the errors of building
//! the state from them. Invalid values are rejected, never clamped.

use proxypool_config::api::ApiShield;
pub use proxypool_config::api::{ApiLimits, ExtractionSettings};
use proxypool_throttle::{EngineOptions, Policy};
use std::time::Duration;

/// The per-IP token bucket in front of authentication, as the limiter takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShieldSettings {
    pub engine: EngineOptions,
    pub policy: Policy,
    /// How often the background sweeper evicts idle addresses.
    pub sweep_interval: Duration,
}

impl Default for ShieldSettings {
    fn default() -> Self {
        ShieldSettings::from(&ApiShield::default())
    }
}

impl From<&ApiShield> for ShieldSettings {
    fn from(shield: &ApiShield) -> Self {
        ShieldSettings {
            engine: shield.engine.to_engine_options(),
            policy: shield.policy.to_throttle(),
            sweep_interval: shield.sweep_interval.as_duration(),
        }
    }
}

/// A setting that cannot be used as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiConfigError {
    #[error("{setting}: {problem}")]
    Setting {
        setting: &'static str,
        problem: String,
    },
    #[error("client {client}: {problem}")]
    Client { client: String, problem: String },
    #[error("two clients have the id {0}")]
    DuplicateClient(String),
    #[error("shield: {0}")]
    Shield(#[from] proxypool_throttle::ConfigError),
    #[error("shield sweeper thread: {0}")]
    Sweeper(String),
    #[error("client rate-limit policies: {0}")]
    ClientPolicy(String),
}

/// The first problem of `problems` (from the configuration crate's checks), if any.
pub(crate) fn first_problem(problems: Vec<(&'static str, String)>) -> Result<(), ApiConfigError> {
    match problems.into_iter().next() {
        Some((setting, problem)) => Err(ApiConfigError::Setting { setting, problem }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_config::Millis;
    use proxypool_core::extract::MAX_EXTRACT_COUNT;

    #[test]
    fn defaults_validate_and_zeroes_are_named() {
        first_problem(ApiLimits::default().problems()).unwrap();
        first_problem(ExtractionSettings::default().problems()).unwrap();
        let limits = ApiLimits {
            max_body_bytes: 0,
            ..ApiLimits::default()
        };
        let error = first_problem(limits.problems()).unwrap_err();
        assert!(error.to_string().contains("max_body_bytes"), "{error}");
        let extraction = ExtractionSettings {
            max_count: MAX_EXTRACT_COUNT + 1,
            ..ExtractionSettings::default()
        };
        assert!(first_problem(extraction.problems()).is_err());
        let limits = ApiLimits {
            unavailable_retry_after: Millis(1500),
            ..ApiLimits::default()
        };
        assert!(first_problem(limits.problems()).is_err());
    }
}
