//! [`PolicyLimiter`]: the policy layer the gateway and the HTTP API use.
//!
//! Operations are configured with a [`Policy`] each. A policy with an `id` is shared: every
//! operation naming that id lands in one bucket per client. A policy without an id gets a
//! bucket per (operation, client). Traffic with no operation goes to the global per-IP
//! limiter. Names are resolved once into [`OperationHandle`]s; a connection can cache its
//! resolved keys in [`ConnectionScopes`] so each later check is a single shard lookup.

use crate::clock::{Clock, CoarseClock};
use crate::decision::Decision;
use crate::engine::{ScopeSpec, SweepOutcome, TokenBucketEngine};
use crate::error::ConfigError;
use crate::key::{BucketKey, ScopeId, ScopeName};
use crate::limits::BucketLimits;
use crate::options::EngineOptions;
use crate::policy::Policy;
use crate::report::{OperationReport, PolicyReport};
use crate::sweeper::Sweep;
use std::collections::HashMap;
use std::net::IpAddr;

/// A resolved operation: cheap to copy, checked without any name lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationHandle {
    scope: ScopeId,
}

/// Collects the global policy and per-operation policies, then validates them all at once.
#[derive(Debug, Clone)]
pub struct PolicyLimiterBuilder {
    options: EngineOptions,
    global: Policy,
    operations: Vec<(String, Policy)>,
}

impl PolicyLimiterBuilder {
    /// Adds an operation and its policy.
    pub fn operation(mut self, name: impl Into<String>, policy: Policy) -> Self {
        self.operations.push((name.into(), policy));
        self
    }

    /// Validates everything and builds a limiter on a [`CoarseClock`] (the production
    /// default; it starts one small helper thread).
    pub fn build(self) -> Result<PolicyLimiter, ConfigError> {
        let clock =
            CoarseClock::new().map_err(|error| ConfigError::ClockThread(error.to_string()))?;
        self.build_with_clock(clock)
    }

    /// Validates everything and builds a limiter on `clock`.
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<PolicyLimiter<C>, ConfigError> {
        let global_name = scope_name_for(None, &self.global)?;
        let mut specs = vec![ScopeSpec {
            name: global_name.clone(),
            policy: self.global.clone(),
        }];
        // Who defined each shared scope first, to name both sides of a conflict.
        let mut defined_by: HashMap<ScopeName, String> =
            HashMap::from([(global_name, "(global)".to_owned())]);
        let mut operation_scopes: Vec<(String, ScopeName)> = Vec::new();

        for (operation, policy) in &self.operations {
            validate_name("operation name", operation)?;
            if operation_scopes.iter().any(|(name, _)| name == operation) {
                return Err(ConfigError::DuplicateOperation(operation.clone()));
            }
            let scope = scope_name_for(Some(operation), policy)?;
            match specs.iter().find(|spec| spec.name == scope) {
                Some(existing) => {
                    let label = format!("\"{scope}\"");
                    let theirs =
                        BucketLimits::from_policy(&label, &existing.policy, &self.options)?;
                    let ours = BucketLimits::from_policy(&label, policy, &self.options)?;
                    if theirs != ours {
                        return Err(ConfigError::ConflictingSharedPolicy {
                            id: policy.id.clone().unwrap_or_default(),
                            first: defined_by[&scope].clone(),
                            second: operation.clone(),
                        });
                    }
                }
                None => {
                    defined_by.insert(scope.clone(), operation.clone());
                    specs.push(ScopeSpec {
                        name: scope.clone(),
                        policy: policy.clone(),
                    });
                }
            }
            operation_scopes.push((operation.clone(), scope));
        }

        let engine = TokenBucketEngine::with_clock(self.options, specs, clock)?;
        let resolve = |name: &ScopeName| {
            engine
                .scope_id(name)
                .expect("every scope name was given to the engine")
        };
        let global = resolve(&scope_name_for(None, &self.global)?);
        let operations = operation_scopes
            .into_iter()
            .map(|(operation, scope)| {
                (
                    operation,
                    OperationHandle {
                        scope: resolve(&scope),
                    },
                )
            })
            .collect::<Vec<_>>();
        Ok(PolicyLimiter {
            by_name: operations.iter().cloned().collect(),
            operations,
            global: OperationHandle { scope: global },
            engine,
        })
    }
}

/// The scope a policy's buckets live in: its id if it has one, else the operation (or the
/// global scope when there is no operation).
fn scope_name_for(operation: Option<&str>, policy: &Policy) -> Result<ScopeName, ConfigError> {
    Ok(match (&policy.id, operation) {
        (Some(id), _) => {
            validate_name("policy id", id)?;
            ScopeName::Policy(id.clone())
        }
        (None, Some(operation)) => ScopeName::Operation(operation.to_owned()),
        (None, None) => ScopeName::Global,
    })
}

fn validate_name(what: &'static str, value: &str) -> Result<(), ConfigError> {
    let length = value.chars().count();
    let printable = value.chars().all(|c| !c.is_whitespace() && !c.is_control());
    if (1..=128).contains(&length) && printable {
        Ok(())
    } else {
        Err(ConfigError::InvalidName {
            what,
            value: value.to_owned(),
        })
    }
}

/// Policy rate limits per (policy or operation, client IP), plus a global per-IP limiter.
#[derive(Debug)]
pub struct PolicyLimiter<C: Clock = CoarseClock> {
    engine: TokenBucketEngine<C>,
    operations: Vec<(String, OperationHandle)>,
    by_name: HashMap<String, OperationHandle>,
    global: OperationHandle,
}

impl PolicyLimiter<CoarseClock> {
    /// Starts a configuration: engine options and the global per-IP policy.
    pub fn builder(options: EngineOptions, global: Policy) -> PolicyLimiterBuilder {
        PolicyLimiterBuilder {
            options,
            global,
            operations: Vec::new(),
        }
    }
}

impl<C: Clock> PolicyLimiter<C> {
    /// Resolves an operation name once (at startup or route registration).
    pub fn operation(&self, name: &str) -> Option<OperationHandle> {
        self.by_name.get(name).copied()
    }

    /// The handle of the global per-IP limiter.
    pub fn global(&self) -> OperationHandle {
        self.global
    }

    /// Checks one request of `operation` (or, for `None`, the global limiter) from `ip`.
    /// Take `ip` from `SocketAddr::ip()`: the port is never part of a key.
    ///
    /// # Panics
    /// If `operation` was resolved by a different limiter with fewer scopes.
    pub fn check(&self, operation: Option<OperationHandle>, ip: IpAddr) -> Decision {
        self.engine.check_ip(self.scope_of(operation), ip)
    }

    /// Checks by operation name; an unknown name falls back to the global limiter, as
    /// traffic without a policy does. Prefer [`PolicyLimiter::operation`] + `check`.
    pub fn check_operation(&self, name: &str, ip: IpAddr) -> Decision {
        self.check(self.operation(name), ip)
    }

    /// Checks one request against the global per-IP limiter (the pre-auth shield).
    pub fn check_global(&self, ip: IpAddr) -> Decision {
        self.check(None, ip)
    }

    /// Resolves (operation, ip) into a key (with its hash) to check repeatedly.
    pub fn key(&self, operation: Option<OperationHandle>, ip: IpAddr) -> BucketKey {
        self.engine.key(self.scope_of(operation), ip)
    }

    /// Checks a resolved key: one shard lookup, no hashing.
    pub fn check_key(&self, key: &BucketKey) -> Decision {
        self.engine.check(key)
    }

    /// An empty per-connection cache for the client at `ip`.
    pub fn connection(&self, ip: IpAddr) -> ConnectionScopes {
        ConnectionScopes {
            ip,
            engine_id: self.engine.id,
            keys: Vec::new(),
        }
    }

    /// One bounded cleanup pass; see [`TokenBucketEngine::sweep`].
    pub fn sweep(&self, max_evictions: usize) -> SweepOutcome {
        self.engine.sweep(max_evictions)
    }

    /// A report with the `top_n` keys under most pressure.
    pub fn report(&self, top_n: usize) -> PolicyReport {
        PolicyReport {
            operations: self
                .operations
                .iter()
                .map(|(operation, handle)| OperationReport {
                    operation: operation.clone(),
                    scope: self.engine.scope(handle.scope).0.to_string(),
                })
                .collect(),
            engine: self.engine.report(top_n),
        }
    }

    /// The shared engine underneath.
    pub fn engine(&self) -> &TokenBucketEngine<C> {
        &self.engine
    }

    fn scope_of(&self, operation: Option<OperationHandle>) -> ScopeId {
        operation.unwrap_or(self.global).scope
    }
}

impl<C: Clock> Sweep for PolicyLimiter<C> {
    fn sweep(&self, max_evictions: usize) -> SweepOutcome {
        PolicyLimiter::sweep(self, max_evictions)
    }
}

/// Per-connection cache of resolved keys, like the seed's `connection.RateLimitCache`: the
/// first check of an operation on a connection resolves its key, every later check reuses
/// it. Keep one per connection; it is tied to the limiter that created it.
#[derive(Debug, Clone)]
pub struct ConnectionScopes {
    ip: IpAddr,
    engine_id: u64,
    /// Indexed by scope id; operations sharing a policy id share an entry.
    keys: Vec<Option<BucketKey>>,
}

impl ConnectionScopes {
    /// The client address of this connection.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Checks one request of `operation` (`None` = global) on this connection.
    pub fn check<C: Clock>(
        &mut self,
        limiter: &PolicyLimiter<C>,
        operation: Option<OperationHandle>,
    ) -> Decision {
        if self.engine_id != limiter.engine.id {
            // Used with another limiter: its scope ids mean something else here.
            self.keys.clear();
            self.engine_id = limiter.engine.id;
        }
        let index = limiter.scope_of(operation).index();
        if self.keys.len() <= index {
            self.keys.resize(index + 1, None);
        }
        let ip = self.ip;
        let key = self.keys[index].get_or_insert_with(|| limiter.key(operation, ip));
        limiter.engine.check(key)
    }
}
