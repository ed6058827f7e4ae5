//! [`TokenBucketEngine`]: the sharded map from key to bucket state, and the check path.
//!
//! Keys are spread over a power-of-two number of shards, each a `Mutex<HashMap>`. A check
//! reads the clock, hashes the key once to pick the shard, locks only that shard, and runs
//! the pure state machine in [`crate::bucket`]. Counters live inside each shard and are
//! updated under the lock the check already holds: no shared atomic is touched on the hot
//! path, so threads checking different keys do not bounce cache lines. The only global
//! atomics change when a key is created or evicted (the tracked count for the cap).

mod inspect;
mod sweep;

pub use sweep::SweepOutcome;

use crate::address::ClientAddr;
use crate::bucket::BucketState;
use crate::clock::{Clock, MonotonicClock};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::hasher::KeyHasherBuilder;
use crate::key::{BucketKey, PreparedKey, ScopeId, ScopeName};
use crate::limits::BucketLimits;
use crate::options::EngineOptions;
use crate::policy::Policy;
use crate::report::Counters;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One scope to configure: its name and its policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeSpec {
    /// The scope's name.
    pub name: ScopeName,
    /// Its limits.
    pub policy: Policy,
}

struct Scope {
    name: ScopeName,
    limits: BucketLimits,
}

/// Aligned to 128 bytes so two shards' locks never share a cache line (or the adjacent line
/// that x86 prefetches in pairs): contention on one shard stays in that shard.
#[repr(align(128))]
struct Shard {
    state: Mutex<ShardState>,
}

struct ShardState {
    buckets: HashMap<BucketKey, BucketState, KeyHasherBuilder>,
    counters: Counters,
}

impl Shard {
    fn lock(&self) -> MutexGuard<'_, ShardState> {
        // Nothing inside the lock can panic halfway through an update (no user code, no
        // allocation failure recovery), so a poisoned lock still guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Gives each engine a distinct id so a [`PreparedKey`] is only trusted by its own engine.
static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// Largest number of scopes one engine holds.
const MAX_SCOPES: usize = u32::MAX as usize;

/// The shared token-bucket engine: every scope's buckets, for every client, in one bounded
/// sharded map.
pub struct TokenBucketEngine<C: Clock = MonotonicClock> {
    pub(crate) id: u64,
    options: EngineOptions,
    soft_violation_window_ns: u64,
    stale_after_ns: u64,
    cap_retry_after_ms: u64,
    scopes: Box<[Scope]>,
    shards: Box<[Shard]>,
    shard_mask: u64,
    hasher: KeyHasherBuilder,
    tracked: AtomicUsize,
    peak_tracked: AtomicUsize,
    /// Where the next sweep starts, so successive bounded sweeps visit every shard in turn.
    sweep_cursor: AtomicUsize,
    clock: C,
}

impl<C: Clock> fmt::Debug for TokenBucketEngine<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucketEngine")
            .field("options", &self.options)
            .field("scopes", &self.scopes.len())
            .field("tracked", &self.tracked_keys())
            .finish_non_exhaustive()
    }
}

impl TokenBucketEngine<MonotonicClock> {
    /// An engine on the system's monotonic clock.
    pub fn new(options: EngineOptions, scopes: Vec<ScopeSpec>) -> Result<Self, ConfigError> {
        Self::with_clock(options, scopes, MonotonicClock::new())
    }
}

impl<C: Clock> TokenBucketEngine<C> {
    /// An engine on `clock`. Validates the options and every scope's policy.
    pub fn with_clock(
        options: EngineOptions,
        scopes: Vec<ScopeSpec>,
        clock: C,
    ) -> Result<Self, ConfigError> {
        options.validate()?;
        if scopes.len() > MAX_SCOPES {
            return Err(ConfigError::TooManyScopes {
                value: scopes.len(),
                max: MAX_SCOPES,
            });
        }
        let mut validated: Vec<Scope> = Vec::with_capacity(scopes.len());
        for spec in scopes {
            if validated.iter().any(|scope| scope.name == spec.name) {
                return Err(ConfigError::DuplicateScope(spec.name.to_string()));
            }
            let label = format!("\"{}\"", spec.name);
            let limits = BucketLimits::from_policy(&label, &spec.policy, &options)?;
            validated.push(Scope {
                name: spec.name,
                limits,
            });
        }
        let hasher = KeyHasherBuilder::random();
        let shards = (0..options.shard_count)
            .map(|_| Shard {
                state: Mutex::new(ShardState {
                    buckets: HashMap::with_hasher(hasher.clone()),
                    counters: Counters::default(),
                }),
            })
            .collect();
        Ok(Self {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            soft_violation_window_ns: options.soft_violation_window_ns(),
            stale_after_ns: options.stale_after_ns(),
            cap_retry_after_ms: options.cap_retry_after_ms(),
            shard_mask: (options.shard_count - 1) as u64,
            options,
            scopes: validated.into_boxed_slice(),
            shards,
            hasher,
            tracked: AtomicUsize::new(0),
            peak_tracked: AtomicUsize::new(0),
            sweep_cursor: AtomicUsize::new(0),
            clock,
        })
    }

    /// The id of the scope called `name`, if configured.
    pub fn scope_id(&self, name: &ScopeName) -> Option<ScopeId> {
        self.scopes
            .iter()
            .position(|scope| &scope.name == name)
            .map(|index| ScopeId(index as u32))
    }

    /// The name and validated limits of a scope.
    ///
    /// # Panics
    /// If `scope` was issued by another engine with fewer scopes.
    pub fn scope(&self, scope: ScopeId) -> (&ScopeName, &BucketLimits) {
        let scope = self.scope_entry(scope);
        (&scope.name, &scope.limits)
    }

    /// The key for `ip` (port excluded by type) in `scope`, with the configured aggregation.
    pub fn key(&self, scope: ScopeId, ip: IpAddr) -> BucketKey {
        BucketKey {
            scope,
            client: ClientAddr::from_ip(ip, self.options.aggregation),
        }
    }

    /// `key` with its hash computed once, for repeated checks.
    pub fn prepare(&self, key: BucketKey) -> PreparedKey {
        PreparedKey {
            key,
            hash: self.hasher.hash_one(key),
            engine_id: self.id,
        }
    }

    /// Checks one request for `ip` in `scope`.
    ///
    /// # Panics
    /// If `scope` was issued by another engine with fewer scopes.
    pub fn check_ip(&self, scope: ScopeId, ip: IpAddr) -> Decision {
        self.check(&self.key(scope, ip))
    }

    /// Checks one request for `key`.
    ///
    /// # Panics
    /// If `key.scope` was issued by another engine with fewer scopes.
    pub fn check(&self, key: &BucketKey) -> Decision {
        self.check_hashed(key, self.hasher.hash_one(key))
    }

    /// Checks one request for a prepared key: one shard lookup.
    ///
    /// # Panics
    /// If the key's scope was issued by another engine with fewer scopes.
    pub fn check_prepared(&self, prepared: &PreparedKey) -> Decision {
        if prepared.engine_id == self.id {
            self.check_hashed(&prepared.key, prepared.hash)
        } else {
            // Prepared by another engine: its hash would pick the wrong shard here.
            self.check(&prepared.key)
        }
    }

    fn check_hashed(&self, key: &BucketKey, hash: u64) -> Decision {
        let limits = &self.scope_entry(key.scope).limits;
        // Read the clock outside the lock to keep the critical section short; the state
        // machine tolerates a `now` that is slightly older than one already recorded.
        let now_ns = self.clock.now_ns();
        let mut guard = self.shard_for(hash).lock();
        let ShardState { buckets, counters } = &mut *guard;
        counters.checks += 1;
        let decision = if let Some(state) = buckets.get_mut(key) {
            state.decide(limits, self.soft_violation_window_ns, now_ns)
        } else if self.reserve_slot() {
            let mut state = BucketState::new(limits, now_ns);
            let decision = state.decide(limits, self.soft_violation_window_ns, now_ns);
            buckets.insert(*key, state);
            decision
        } else {
            // Fail closed: tracking one more key would break the memory bound. Keys already
            // tracked keep working; a sweep makes room.
            counters.rejected_at_cap += 1;
            return Decision::hard_lockout(self.cap_retry_after_ms, 0);
        };
        match decision.reason {
            crate::Reason::None => counters.allowed += 1,
            crate::Reason::SoftThrottle => counters.soft_throttled += 1,
            crate::Reason::HardLockout => counters.hard_locked += 1,
        }
        decision
    }

    /// Counts a new key against `max_tracked`; false when the engine is full.
    fn reserve_slot(&self) -> bool {
        let max = self.options.max_tracked;
        match self
            .tracked
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            }) {
            Ok(previous) => {
                self.peak_tracked.fetch_max(previous + 1, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    fn release_slots(&self, count: usize) {
        if count > 0 {
            self.tracked.fetch_sub(count, Ordering::AcqRel);
        }
    }

    fn shard_for(&self, hash: u64) -> &Shard {
        // Bits 40.. pick the shard: the map inside uses the low bits for its bucket index
        // and the top 7 bits as tags, so shard choice must not reuse either.
        &self.shards[((hash >> 40) & self.shard_mask) as usize]
    }

    fn scope_entry(&self, scope: ScopeId) -> &Scope {
        self.scopes
            .get(scope.index())
            .expect("ScopeId was issued by a different TokenBucketEngine")
    }

    /// Whether `key` currently has state (diagnostics and tests).
    pub fn is_tracked(&self, key: &BucketKey) -> bool {
        self.shard_for(self.hasher.hash_one(key))
            .lock()
            .buckets
            .contains_key(key)
    }

    /// Keys tracked now.
    pub fn tracked_keys(&self) -> usize {
        self.tracked.load(Ordering::Acquire)
    }

    /// Most keys tracked at once so far.
    pub fn peak_tracked(&self) -> usize {
        self.peak_tracked.load(Ordering::Relaxed)
    }

    /// The options the engine was built with.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The engine's clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Counters summed over all shards.
    pub fn counters(&self) -> Counters {
        let mut total = Counters::default();
        for shard in self.shards.iter() {
            total.add(&shard.lock().counters);
        }
        total
    }

    /// Bytes of state per tracked key inside the map (key plus bucket state), excluding the
    /// map's own overhead (one control byte per slot and unused capacity).
    pub const fn state_bytes_per_key() -> usize {
        size_of::<BucketKey>() + size_of::<BucketState>()
    }

    /// Bytes the maps have allocated for entries right now (slots × (entry + control byte)),
    /// an estimate of the limiter's memory that includes spare capacity.
    pub fn allocated_bytes(&self) -> usize {
        let slot = Self::state_bytes_per_key() + 1;
        self.shards
            .iter()
            .map(|shard| shard.lock().buckets.capacity() * slot)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    #[test]
    fn key_and_state_fit_the_budget() {
        assert_eq!(size_of::<BucketKey>(), 24);
        assert_eq!(size_of::<BucketState>(), 32);
        assert!(TokenBucketEngine::<MonotonicClock>::state_bytes_per_key() <= 64);
    }

    #[test]
    fn prepared_keys_from_another_engine_still_land_in_the_right_bucket() {
        let build = || {
            TokenBucketEngine::with_clock(
                EngineOptions::default(),
                vec![ScopeSpec {
                    name: ScopeName::Global,
                    policy: Policy::new(1.0, 1.0),
                }],
                Arc::new(ManualClock::new()),
            )
            .unwrap()
        };
        let (mine, other) = (build(), build());
        let scope = mine.scope_id(&ScopeName::Global).unwrap();
        let key = mine.key(scope, "192.0.2.1".parse().unwrap());
        assert!(mine.check(&key).allowed);
        let foreign = other.prepare(key);
        assert!(!mine.check_prepared(&foreign).allowed);
        assert_eq!(mine.tracked_keys(), 1);
    }

    #[test]
    fn duplicate_scopes_are_rejected() {
        let spec = ScopeSpec {
            name: ScopeName::Operation("x".into()),
            policy: Policy::new(1.0, 1.0),
        };
        let err =
            TokenBucketEngine::new(EngineOptions::default(), vec![spec.clone(), spec]).unwrap_err();
        assert_eq!(err, ConfigError::DuplicateScope("op:x".into()));
    }
}
