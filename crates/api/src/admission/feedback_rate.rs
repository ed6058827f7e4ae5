//! The rate limit of `POST /v1/feedback`: one token bucket per client, of its own.
//!
//! A feedback is a write every tenant's routing reads, and it costs only one `inspect`
//! unit, so the quota alone would let one client post hundreds of reports a minute. This
//! bucket (`[cooldowns] feedback_per_minute` and `feedback_burst`) applies to every client,
//! with or without a `[[policies]]` entry, and is independent of the extraction quota and
//! of that policy: a client that floods feedback is refused (429 `rate_limited` with
//! `Retry-After`) before anything is charged or changed, and its extractions go on.

use crate::clients::ApiClient;
use crate::error::{ApiError, ErrorCode};
use proxypool_core::ClientId;
use proxypool_throttle::{ConfigError, EngineOptions, OperationHandle, Policy, PolicyLimiter};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// The address every feedback bucket is keyed by: the bucket is the client's.
const WHOLE_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// How many feedback calls a client may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackRate {
    pub per_minute: u32,
    pub burst: u32,
}

impl Default for FeedbackRate {
    fn default() -> Self {
        let defaults = proxypool_config::CooldownsConfig::default();
        FeedbackRate {
            per_minute: defaults.feedback_per_minute,
            burst: defaults.feedback_burst,
        }
    }
}

impl FeedbackRate {
    fn policy(self) -> Policy {
        Policy::new(f64::from(self.per_minute) / 60.0, f64::from(self.burst))
    }
}

/// One feedback bucket per client, rebuilt when the clients or the rate change.
pub(crate) struct FeedbackLimits {
    limiter: PolicyLimiter,
    handles: HashMap<ClientId, OperationHandle>,
    /// What it was built from, so a reload that keeps both keeps the buckets.
    rate: FeedbackRate,
    clients: Vec<ClientId>,
}

impl fmt::Debug for FeedbackLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedbackLimits")
            .field("rate", &self.rate)
            .field("clients", &self.handles.len())
            .finish()
    }
}

impl FeedbackLimits {
    /// A bucket for each of `clients` at `rate`; `previous` is kept when nothing changed,
    /// so a reload of something else does not refill every bucket.
    pub(crate) fn build(
        clients: &[Arc<ApiClient>],
        rate: FeedbackRate,
        previous: Option<&Arc<FeedbackLimits>>,
    ) -> Result<Arc<FeedbackLimits>, ConfigError> {
        let mut ids: Vec<ClientId> = clients.iter().map(|c| c.id.clone()).collect();
        ids.sort();
        if let Some(previous) = previous.filter(|p| p.rate == rate && p.clients == ids) {
            return Ok(previous.clone());
        }
        // A token of 60 000 units makes every whole number per minute a whole number of
        // units per second (the engine refuses rates it cannot represent).
        let options = EngineOptions {
            token_scale: 60_000,
            ..EngineOptions::default()
        };
        // The global scope is never checked here; any valid policy will do.
        let mut builder = PolicyLimiter::builder(options, Policy::new(1.0, 1.0));
        for id in &ids {
            // No policy id: a bucket per (client, address), and the address is always
            // the same, so one bucket per client.
            builder = builder.operation(id.as_str(), rate.policy());
        }
        let limiter = builder.build()?;
        let handles = ids
            .iter()
            .filter_map(|id| Some((id.clone(), limiter.operation(id.as_str())?)))
            .collect();
        Ok(Arc::new(FeedbackLimits {
            limiter,
            handles,
            rate,
            clients: ids,
        }))
    }

    pub(crate) fn rate(&self) -> FeedbackRate {
        self.rate
    }

    /// One feedback call of `client`.
    pub(crate) fn check(&self, client: &ClientId) -> Result<(), ApiError> {
        // A client unknown here was removed by a reload after it authenticated: its
        // request finishes as it started, as with the other per-client limits.
        let Some(handle) = self.handles.get(client) else {
            return Ok(());
        };
        let decision = self.limiter.check(Some(*handle), WHOLE_CLIENT);
        if decision.allowed {
            return Ok(());
        }
        crate::metrics::policy_denied("feedback");
        Err(ApiError::new(
            ErrorCode::RateLimited,
            "this client's feedback rate is used up; retry later",
        )
        .retry_after(decision.retry_after_secs_ceil()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_config::MAX_FEEDBACK_RATE;

    #[test]
    fn every_rate_the_configuration_accepts_builds() {
        for per_minute in [1, 7, 59, 61, MAX_FEEDBACK_RATE] {
            for burst in [1, 13, MAX_FEEDBACK_RATE] {
                let rate = FeedbackRate { per_minute, burst };
                assert!(FeedbackLimits::build(&[], rate, None).is_ok(), "{rate:?}");
            }
        }
    }
}
