//! Shared helpers for the integration tests: limiters on a manual clock.

use proxypool_throttle::{EngineOptions, ManualClock, Policy, PolicyLimiter};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

pub(crate) const MS: u64 = 1_000_000;
pub(crate) const SEC: u64 = 1_000_000_000;

/// A limiter whose only policy is the global one, on a fresh manual clock.
pub(crate) fn global_limiter(
    options: EngineOptions,
    policy: Policy,
) -> (PolicyLimiter<Arc<ManualClock>>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let limiter = PolicyLimiter::builder(options, policy)
        .build_with_clock(clock.clone())
        .expect("valid test configuration");
    (limiter, clock)
}

/// A policy that never escalates to a lockout, to observe pure token-bucket behaviour.
pub(crate) fn no_lockout(requests_per_second: f64, burst: f64) -> Policy {
    Policy::new(requests_per_second, burst).with_max_soft_violations(u16::MAX)
}

pub(crate) fn ip(text: &str) -> IpAddr {
    text.parse().expect("test address")
}

pub(crate) fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}
