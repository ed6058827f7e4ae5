//! Admission: the per-IP pre-authentication [`Shield`], the per-client policy
//! [`ClientLimiter`] and the per-client concurrent-connection cap ([`ClientCounters`]).
//!
//! Both limiters come from `proxypool-throttle`. Client policies arrive with snapshots, so
//! the client limiter is rebuilt only when the set of policies changes (rebuilding resets
//! buckets, which must not happen on every snapshot). Keys are (client scope, source IP) as
//! the throttle's policy layer defines them; clients sharing a policy `id` share buckets.
//! All limiters read one shared clock (the precise monotonic one: no helper thread).

use crate::refusal::Refusal;
use proxypool_core::control::RateLimitSpec;
use proxypool_core::{ClientId, LockExt};
use proxypool_throttle::{
    Clock, ConfigError, ConnectionScopes, Decision, EngineOptions, OperationHandle, Policy,
    PolicyLimiter, Reason,
};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The clock every limiter of one gateway shares (the throttle's own nanosecond clock,
/// not the gateway's [`proxypool_core::Clock`]).
pub(crate) type LimiterClock = Arc<dyn Clock>;

fn refusal(decision: Decision) -> Result<(), Refusal> {
    if decision.allowed {
        Ok(())
    } else {
        Err(Refusal::RateLimited {
            retry_after_ms: decision.retry_after_ms,
            lockout: decision.reason == Reason::HardLockout,
        })
    }
}

/// The per-IP limiter checked before authentication.
#[derive(Debug)]
pub(crate) struct Shield {
    limiter: PolicyLimiter<LimiterClock>,
}

impl Shield {
    /// Validates `policy` (with `options`) on a private clock; used by config validation.
    pub(crate) fn new(policy: Policy, options: EngineOptions) -> Result<Self, ConfigError> {
        Self::with_clock(
            policy,
            options,
            Arc::new(proxypool_throttle::MonotonicClock::new()),
        )
    }

    pub(crate) fn with_clock(
        policy: Policy,
        options: EngineOptions,
        clock: LimiterClock,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            limiter: PolicyLimiter::builder(options, policy).build_with_clock(clock)?,
        })
    }

    /// A per-connection key cache for the client at `ip`.
    pub(crate) fn connection(&self, ip: IpAddr) -> ConnectionScopes {
        self.limiter.connection(ip)
    }

    /// One request (or SOCKS5 connection) from the connection's address.
    pub(crate) fn check(&self, scopes: &mut ConnectionScopes) -> Result<(), Refusal> {
        refusal(scopes.check(&self.limiter, None))
    }

    pub(crate) fn sweep(&self, max_evictions: usize) {
        self.limiter.sweep(max_evictions);
    }
}

/// The per-client policy limiter of one set of client policies.
#[derive(Debug)]
pub(crate) struct ClientLimiter {
    limiter: PolicyLimiter<LimiterClock>,
    handles: HashMap<ClientId, OperationHandle>,
    /// The specs it was built from, to tell whether a new snapshot needs a rebuild.
    specs: Vec<(ClientId, RateLimitSpec)>,
    /// Clients whose policy could not be used; they are refused (fail closed).
    invalid: HashMap<ClientId, String>,
}

/// What a client's policy says for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientPolicy {
    /// No policy: only the shield applies.
    Unlimited,
    Limited(OperationHandle),
    /// The policy was invalid; the client is refused until a snapshot fixes it.
    Invalid,
}

impl ClientLimiter {
    /// Builds a limiter from the clients' specs. A spec that cannot be used, or that
    /// reuses a shared policy id with different numbers, marks only its client invalid.
    pub(crate) fn build(
        mut specs: Vec<(ClientId, RateLimitSpec)>,
        options: &EngineOptions,
        clock: LimiterClock,
    ) -> Result<Self, ConfigError> {
        specs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut invalid = HashMap::new();
        let mut shared: HashMap<String, RateLimitSpec> = HashMap::new();
        // The global scope is never used for clients; any valid policy will do.
        let mut builder = PolicyLimiter::builder(options.clone(), Policy::new(1.0, 1.0));
        let mut accepted = Vec::new();
        for (client, spec) in &specs {
            let policy = to_policy(spec);
            let alone = PolicyLimiter::builder(options.clone(), Policy::new(1.0, 1.0))
                .operation(client.as_str(), policy.clone())
                .build_with_clock(Arc::clone(&clock));
            if let Err(error) = alone {
                invalid.insert(client.clone(), error.to_string());
                continue;
            }
            if let Some(id) = &spec.id {
                match shared.get(id) {
                    Some(first) if !same_limits(first, spec) => {
                        invalid.insert(
                            client.clone(),
                            format!("policy id {id:?} is shared with different limits"),
                        );
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        shared.insert(id.clone(), spec.clone());
                    }
                }
            }
            builder = builder.operation(client.as_str(), policy);
            accepted.push(client.clone());
        }
        let limiter = builder.build_with_clock(clock)?;
        let handles = accepted
            .into_iter()
            .filter_map(|client| {
                let handle = limiter.operation(client.as_str())?;
                Some((client, handle))
            })
            .collect();
        Ok(Self {
            limiter,
            handles,
            specs,
            invalid,
        })
    }

    /// Whether this limiter was built from exactly `specs` (sorted by client).
    pub(crate) fn built_from(&self, specs: &[(ClientId, RateLimitSpec)]) -> bool {
        self.specs == specs
    }

    pub(crate) fn policy_of(&self, client: &ClientId) -> ClientPolicy {
        if let Some(handle) = self.handles.get(client) {
            ClientPolicy::Limited(*handle)
        } else if self.invalid.contains_key(client) {
            ClientPolicy::Invalid
        } else {
            ClientPolicy::Unlimited
        }
    }

    /// Why each invalid client's policy was rejected (for logs).
    pub(crate) fn invalid(&self) -> &HashMap<ClientId, String> {
        &self.invalid
    }

    /// One request of the client from `ip`.
    pub(crate) fn check(&self, handle: OperationHandle, ip: IpAddr) -> Result<(), Refusal> {
        refusal(self.limiter.check(Some(handle), ip))
    }

    pub(crate) fn sweep(&self, max_evictions: usize) {
        self.limiter.sweep(max_evictions);
    }
}

fn to_policy(spec: &RateLimitSpec) -> Policy {
    Policy {
        id: spec.id.clone(),
        requests_per_second: spec.requests_per_second,
        burst: spec.burst,
        hard_lockout: spec.hard_lockout_ms.map(Duration::from_millis),
        max_soft_violations: spec.max_soft_violations,
    }
}

fn same_limits(a: &RateLimitSpec, b: &RateLimitSpec) -> bool {
    a.requests_per_second == b.requests_per_second
        && a.burst == b.burst
        && a.hard_lockout_ms == b.hard_lockout_ms
        && a.max_soft_violations == b.max_soft_violations
}

/// Concurrent-connection counters per client, kept across snapshots.
#[derive(Debug, Default)]
pub(crate) struct ClientCounters {
    counters: Mutex<HashMap<ClientId, Arc<AtomicU32>>>,
}

impl ClientCounters {
    /// Counters for the snapshot's clients; counters of clients no longer listed are
    /// dropped once they reach zero.
    pub(crate) fn prepare(&self, clients: &[&ClientId]) -> Vec<Arc<AtomicU32>> {
        let mut counters = self.counters.lock_or_recover();
        let listed: std::collections::HashSet<&ClientId> = clients.iter().copied().collect();
        counters.retain(|id, counter| listed.contains(id) || counter.load(Ordering::Relaxed) > 0);
        clients
            .iter()
            .map(|id| Arc::clone(counters.entry((*id).clone()).or_default()))
            .collect()
    }
}

/// One of the client's concurrent connections; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct ConnectionPermit {
    counter: Arc<AtomicU32>,
}

impl ConnectionPermit {
    /// Takes a place if fewer than `max` are held.
    pub(crate) fn try_acquire(counter: &Arc<AtomicU32>, max: u32) -> Result<Self, Refusal> {
        let mut current = counter.load(Ordering::Relaxed);
        loop {
            if current >= max {
                return Err(Refusal::TooManyConnections);
            }
            match counter.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Ok(Self {
                        counter: Arc::clone(counter),
                    });
                }
                Err(actual) => current = actual,
            }
        }
    }
}

impl ConnectionPermit {
    /// A place that counts against no client's cap: a fleet hop's request, whose client's
    /// place the relaying member holds for it.
    pub(crate) fn uncounted() -> Self {
        Self {
            counter: Arc::new(AtomicU32::new(1)),
        }
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_throttle::ManualClock;

    fn spec(id: Option<&str>, rps: f64, burst: f64) -> RateLimitSpec {
        RateLimitSpec {
            id: id.map(str::to_owned),
            requests_per_second: rps,
            burst,
            hard_lockout_ms: Some(60_000),
            max_soft_violations: Some(2),
        }
    }

    fn client(name: &str) -> ClientId {
        ClientId::new(name).unwrap()
    }

    #[test]
    fn client_policies_limit_and_lock_out() {
        let clock = Arc::new(ManualClock::new());
        let limiter = ClientLimiter::build(
            vec![(client("a"), spec(None, 1.0, 2.0))],
            &EngineOptions::default(),
            clock.clone(),
        )
        .unwrap();
        let ClientPolicy::Limited(handle) = limiter.policy_of(&client("a")) else {
            panic!("a has a policy");
        };
        assert_eq!(limiter.policy_of(&client("b")), ClientPolicy::Unlimited);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(limiter.check(handle, ip).is_ok());
        assert!(limiter.check(handle, ip).is_ok());
        let denied = limiter.check(handle, ip).unwrap_err();
        assert_eq!(denied.code(), "rate_limited");
        let locked = limiter.check(handle, ip).unwrap_err();
        assert_eq!(locked.code(), "locked_out");
        clock.advance(Duration::from_secs(5));
        assert_eq!(limiter.check(handle, ip).unwrap_err().code(), "locked_out");
    }

    #[test]
    fn a_bad_policy_only_disables_its_client() {
        let clock = Arc::new(ManualClock::new());
        let limiter = ClientLimiter::build(
            vec![
                (client("good"), spec(Some("shared"), 5.0, 5.0)),
                (client("zero"), spec(None, 0.0, 0.0)),
                (client("x_clash"), spec(Some("shared"), 9.0, 9.0)),
                (client("same"), spec(Some("shared"), 5.0, 5.0)),
            ],
            &EngineOptions::default(),
            clock,
        )
        .unwrap();
        assert!(matches!(
            limiter.policy_of(&client("good")),
            ClientPolicy::Limited(_)
        ));
        assert_eq!(limiter.policy_of(&client("zero")), ClientPolicy::Invalid);
        // Clients sharing a policy id share one bucket scope.
        assert_eq!(
            limiter.policy_of(&client("same")),
            limiter.policy_of(&client("good"))
        );
        assert_eq!(limiter.policy_of(&client("x_clash")), ClientPolicy::Invalid);
        assert_eq!(limiter.invalid().len(), 2);
    }

    #[test]
    fn connection_permits_cap_and_release() {
        let counters = ClientCounters::default();
        let a = client("a");
        let counter = counters.prepare(&[&a]).remove(0);
        let first = ConnectionPermit::try_acquire(&counter, 1).unwrap();
        assert_eq!(
            ConnectionPermit::try_acquire(&counter, 1).unwrap_err(),
            Refusal::TooManyConnections
        );
        drop(first);
        assert!(ConnectionPermit::try_acquire(&counter, 1).is_ok());
        let uncounted = ConnectionPermit::uncounted();
        assert_eq!(counter.load(Ordering::Relaxed), 0);
        drop(uncounted);
    }
}
