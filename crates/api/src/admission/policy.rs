//! Per-client admission after authentication and before the quota: the client's
//! rate-limit policy and the cap on its extractions in flight.
//!
//! The policy is the one `[[policies]]` entry the client names, the same the gateway
//! applies to it. In the API it is one bucket per client, whatever address the requests
//! come from: an API request costs the service the same from anywhere, and the quota it
//! protects is per client too. A denial is 429 `rate_limited` with `Retry-After` and charges
//! no quota.
//!
//! The in-flight cap bounds the extraction scans one client can have running at once (each
//! may examine up to the store's scan budget): one more is refused at once, not queued.

use crate::clients::ApiClient;
use crate::error::{ApiError, ErrorCode};
use proxypool_core::ClientId;
use proxypool_throttle::{ConfigError, EngineOptions, OperationHandle, Policy, PolicyLimiter};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// The address every API bucket is keyed by: the bucket is the client's, not an address's.
const WHOLE_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// The policies of one client directory, built when the clients are (re)loaded.
pub(crate) struct ClientPolicies {
    limiter: Option<PolicyLimiter>,
    handles: HashMap<ClientId, OperationHandle>,
    /// The policies it was built from, so a reload that keeps them keeps the buckets.
    built_from: Vec<(ClientId, Policy)>,
}

impl fmt::Debug for ClientPolicies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientPolicies")
            .field("clients", &self.handles.len())
            .finish()
    }
}

impl ClientPolicies {
    /// One bucket per client with a policy. `previous` is reused when the policies are the
    /// same, so a reload that changes something else does not refill every bucket.
    pub(crate) fn build(
        clients: &[Arc<ApiClient>],
        previous: Option<&Arc<ClientPolicies>>,
    ) -> Result<Arc<ClientPolicies>, ConfigError> {
        let mut built_from: Vec<(ClientId, Policy)> = clients
            .iter()
            .filter_map(|client| {
                let mut policy = client.rate_limit.clone()?;
                // A shared id would merge clients into one bucket here (there is no address
                // to tell them apart); each client is limited on its own.
                policy.id = None;
                Some((client.id.clone(), policy))
            })
            .collect();
        built_from.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(previous) = previous.filter(|p| p.built_from == built_from) {
            return Ok(previous.clone());
        }
        if built_from.is_empty() {
            return Ok(Arc::new(ClientPolicies {
                limiter: None,
                handles: HashMap::new(),
                built_from,
            }));
        }
        // The global scope is never checked here; any valid policy will do.
        let mut builder = PolicyLimiter::builder(EngineOptions::default(), Policy::new(1.0, 1.0));
        for (client, policy) in &built_from {
            builder = builder.operation(client.as_str(), policy.clone());
        }
        let limiter = builder.build()?;
        let handles = built_from
            .iter()
            .filter_map(|(client, _)| Some((client.clone(), limiter.operation(client.as_str())?)))
            .collect();
        Ok(Arc::new(ClientPolicies {
            limiter: Some(limiter),
            handles,
            built_from,
        }))
    }

    /// One request of `client` under its policy.
    pub(crate) fn check(&self, client: &ClientId) -> Result<(), ApiError> {
        let (Some(limiter), Some(handle)) = (&self.limiter, self.handles.get(client)) else {
            return Ok(());
        };
        let decision = limiter.check(Some(*handle), WHOLE_CLIENT);
        if decision.allowed {
            return Ok(());
        }
        crate::metrics::policy_denied(match decision.reason {
            proxypool_throttle::Reason::HardLockout => "hard_lockout",
            _ => "soft_throttle",
        });
        Err(ApiError::new(
            ErrorCode::RateLimited,
            "this client's rate limit is used up; retry later",
        )
        .retry_after(decision.retry_after_secs_ceil()))
    }
}

/// Extractions in flight per client.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    counts: std::sync::Mutex<HashMap<ClientId, Arc<AtomicU32>>>,
}

/// A slot of the client's in-flight cap, released when dropped.
#[derive(Debug)]
pub(crate) struct InFlightSlot {
    count: Arc<AtomicU32>,
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    /// A slot for one more extraction of `client`, or 429 when it has `cap` running.
    pub(crate) fn acquire(&self, client: &ClientId, cap: u32) -> Result<InFlightSlot, ApiError> {
        let count = {
            let mut counts = proxypool_core::LockExt::lock_or_recover(&self.counts);
            counts.entry(client.clone()).or_default().clone()
        };
        let taken = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
            (running < cap).then_some(running + 1)
        });
        match taken {
            Ok(_) => Ok(InFlightSlot { count }),
            Err(_) => {
                crate::metrics::policy_denied("in_flight");
                Err(ApiError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "this client already has {cap} extractions running; retry when one finishes"
                    ),
                )
                .retry_after(1))
            }
        }
    }

    /// Forgets clients that are gone (a reload), keeping the counts of those still running.
    pub(crate) fn retain(&self, clients: &[Arc<ApiClient>]) {
        let mut counts = proxypool_core::LockExt::lock_or_recover(&self.counts);
        counts.retain(|id, count| {
            count.load(Ordering::Acquire) > 0 || clients.iter().any(|client| &client.id == id)
        });
    }
}
