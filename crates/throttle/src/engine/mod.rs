//! [`TokenBucketEngine`]: the sharded map from key to bucket state, and the check path.
//!
//! Keys are spread over a power-of-two number of shards, each a `Mutex<HashSet<Entry>>`. A
//! check reads the clock's cheap reading, picks the shard from the hash stored in the key,
//! locks only that shard, and runs the pure state machine in [`crate::bucket`]. An entry is
//! key and state in exactly one 64-byte cache line, so a lookup in a large map costs one
//! miss for the control bytes and one for the entry. Counters live inside each shard and are
//! updated under the lock the check already holds: no shared atomic is touched on the hot
//! path, so threads checking different keys do not bounce cache lines. The only global
//! atomics change when a key is created or evicted (the tracked count for the cap).

mod inspect;
mod sweep;

pub use sweep::SweepOutcome;

use crate::address::{ClientAddr, PrefixMasks};
use crate::bucket::BucketState;
use crate::clock::{Clock, CoarseClock};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::hasher::StoredHash;
use crate::key::{BucketKey, ScopeId, ScopeName};
use crate::limits::BucketLimits;
use crate::options::EngineOptions;
use crate::policy::Policy;
use crate::report::Counters;
use std::borrow::Borrow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
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
    entries: HashSet<Entry, StoredHash>,
    counters: Counters,
}

/// A key and its state, aligned so each entry fills exactly one cache line.
///
/// The state sits in a `Cell` because a `HashSet` only lends shared references to its
/// elements; `Hash` and `Eq` look at the key alone, so changing the state can never move an
/// entry within the set. The shard's mutex serializes all access.
#[repr(align(64))]
struct Entry {
    key: BucketKey,
    state: Cell<BucketState>,
}

impl Entry {
    fn state(&self) -> BucketState {
        self.state.get()
    }
}

impl Borrow<BucketKey> for Entry {
    fn borrow(&self) -> &BucketKey {
        &self.key
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Entry {}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl Shard {
    #[inline]
    fn lock(&self) -> MutexGuard<'_, ShardState> {
        // Nothing inside the lock can panic halfway through an update (no user code, no
        // allocation failure recovery), so a poisoned lock still guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Gives each engine a distinct id, so a per-connection cache can tell whose scopes it holds.
static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// Largest number of scopes one engine holds.
const MAX_SCOPES: usize = u32::MAX as usize;

/// The shared token-bucket engine: every scope's buckets, for every client, in one bounded
/// sharded map.
pub struct TokenBucketEngine<C: Clock = CoarseClock> {
    pub(crate) id: u64,
    options: EngineOptions,
    soft_violation_window_ns: u64,
    stale_after_ns: u64,
    cap_retry_after_ms: u64,
    scopes: Box<[Scope]>,
    shards: Box<[Shard]>,
    shard_mask: u64,
    prefix_masks: PrefixMasks,
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

impl TokenBucketEngine<CoarseClock> {
    /// An engine on a [`CoarseClock`] (the production default).
    pub fn new(options: EngineOptions, scopes: Vec<ScopeSpec>) -> Result<Self, ConfigError> {
        let clock =
            CoarseClock::new().map_err(|error| ConfigError::ClockThread(error.to_string()))?;
        Self::with_clock(options, scopes, clock)
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
        let shards = (0..options.shard_count)
            .map(|_| Shard {
                state: Mutex::new(ShardState {
                    entries: HashSet::with_hasher(StoredHash),
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
            prefix_masks: PrefixMasks::new(options.aggregation),
            options,
            scopes: validated.into_boxed_slice(),
            shards,
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
    /// Keys are `Copy` and carry their hash: cache one per connection and scope.
    pub fn key(&self, scope: ScopeId, ip: IpAddr) -> BucketKey {
        BucketKey::new(scope, ClientAddr::from_ip_masked(ip, self.prefix_masks))
    }

    /// Checks one request for `ip` in `scope`.
    ///
    /// # Panics
    /// If `scope` was issued by another engine with fewer scopes.
    pub fn check_ip(&self, scope: ScopeId, ip: IpAddr) -> Decision {
        self.check(&self.key(scope, ip))
    }

    /// Checks one request for `key`: one lookup in one shard, no hashing.
    ///
    /// # Panics
    /// If `key`'s scope was issued by another engine with fewer scopes.
    pub fn check(&self, key: &BucketKey) -> Decision {
        let limits = &self.scope_entry(key.scope()).limits;
        // The cheap reading is taken outside the lock to keep the critical section short;
        // the state machine tolerates a `now` slightly older than one already recorded.
        let recent_ns = self.clock.recent_ns();
        let lag_ns = self.clock.recent_lag_ns();
        let precise_now = || self.clock.now_ns();
        let window_ns = self.soft_violation_window_ns;
        let mut guard = self.shard_for(key.stored_hash()).lock();
        let ShardState { entries, counters } = &mut *guard;
        counters.checks += 1;
        let decision = if let Some(entry) = entries.get(key) {
            let mut state = entry.state();
            let decision = state.decide(limits, window_ns, recent_ns, lag_ns, precise_now);
            entry.state.set(state);
            decision
        } else if self.reserve_slot() {
            let mut state = BucketState::new(limits, recent_ns);
            let decision = state.decide(limits, window_ns, recent_ns, lag_ns, precise_now);
            entries.insert(Entry {
                key: *key,
                state: Cell::new(state),
            });
            decision
        } else {
            // Fail closed: tracking one more key would break the memory bound. Keys already
            // tracked keep working; a sweep makes room.
            counters.rejected_at_cap += 1;
            return Decision::hard_lockout(self.cap_retry_after_ms);
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
        self.shard_for(key.stored_hash())
            .lock()
            .entries
            .contains(key)
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

    /// Bytes per tracked key inside the map: one entry (key, state, alignment padding),
    /// excluding the map's own overhead (one control byte per slot and spare capacity).
    pub const fn entry_bytes() -> usize {
        size_of::<Entry>()
    }

    /// Bytes of the per-key bucket state alone (without the key).
    pub const fn state_bytes() -> usize {
        size_of::<BucketState>()
    }

    /// Bytes the maps have allocated right now (slots × (entry + control byte)): the
    /// limiter's memory including spare capacity.
    pub fn allocated_bytes(&self) -> usize {
        let slot = Self::entry_bytes() + 1;
        self.shards
            .iter()
            .map(|shard| shard.lock().entries.capacity() * slot)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    #[test]
    fn an_entry_is_one_cache_line() {
        assert_eq!(size_of::<BucketKey>(), 32);
        assert_eq!(size_of::<BucketState>(), 32);
        assert_eq!(size_of::<Entry>(), 64);
        assert_eq!(align_of::<Entry>(), 64);
    }

    fn engine() -> TokenBucketEngine<Arc<ManualClock>> {
        TokenBucketEngine::with_clock(
            EngineOptions::default(),
            vec![ScopeSpec {
                name: ScopeName::Global,
                policy: Policy::new(1.0, 1.0),
            }],
            Arc::new(ManualClock::new()),
        )
        .unwrap()
    }

    #[test]
    fn keys_are_portable_between_engines_of_one_process() {
        let (mine, other) = (engine(), engine());
        let scope = mine.scope_id(&ScopeName::Global).unwrap();
        let ip = "192.0.2.1".parse().unwrap();
        assert!(mine.check(&mine.key(scope, ip)).allowed);
        assert!(!mine.check(&other.key(scope, ip)).allowed);
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
