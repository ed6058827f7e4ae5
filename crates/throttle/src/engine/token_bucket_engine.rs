//! [`TokenBucketEngine`]: the engine's state (the shards, the scopes, the tracked-key
//! count) and the check path; `sweep` and `inspect` add their methods to it.

use super::entry::Entry;
use super::shard::{Shard, ShardCounters, ShardState};
use super::striped_counter::StripedCounter;
use crate::address::{ClientAddr, PrefixMasks};
use crate::bucket::BucketState;
use crate::clock::{Clock, CoarseClock};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::key::{BucketKey, ScopeId, ScopeName};
use crate::limits::BucketLimits;
use crate::limits::ceil_ms;
use crate::options::EngineOptions;
use crate::policy::Policy;
use crate::report::Counters;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One scope to configure: its name and its policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeSpec {
    /// The scope's name.
    pub name: ScopeName,
    /// Its limits.
    pub policy: Policy,
}

/// A configured scope: its name and validated limits.
pub(super) struct Scope {
    pub(super) name: ScopeName,
    pub(super) limits: BucketLimits,
}

/// Gives each engine a distinct id, so a per-connection cache can tell whose scopes it holds.
static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// Largest number of scopes one engine holds.
const MAX_SCOPES: usize = u32::MAX as usize;

/// The shared token-bucket engine: every scope's buckets, for every client, in one bounded
/// sharded map.
pub struct TokenBucketEngine<C: Clock = CoarseClock> {
    pub(crate) id: u64,
    pub(super) options: EngineOptions,
    soft_violation_window_ns: u64,
    pub(super) stale_after_ns: u64,
    cap_retry_after_ms: u64,
    pub(super) scopes: Box<[Scope]>,
    pub(super) shards: Box<[Shard]>,
    shard_mask: u64,
    prefix_masks: PrefixMasks,
    tracked: AtomicUsize,
    peak_tracked: AtomicUsize,
    /// Where the next sweep starts, so successive bounded sweeps visit every shard in turn.
    pub(super) sweep_cursor: AtomicUsize,
    /// Checks answered by a lockout slot, counted per thread stripe (no shared hot line).
    slot_denials: StripedCounter,
    /// Soft throttles (at most `max_soft_violations` in a row per key, so off the shard line).
    soft_throttled: StripedCounter,
    /// New keys denied at `max_tracked` (striped: a flood of new addresses hits this).
    rejected_at_cap: StripedCounter,
    pub(super) evicted_stale: AtomicU64,
    pub(super) evicted_lru: AtomicU64,
    pub(super) clock: C,
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
        let shards = (0..options.shard_count).map(|_| Shard::new()).collect();
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
            slot_denials: StripedCounter::default(),
            soft_throttled: StripedCounter::default(),
            rejected_at_cap: StripedCounter::default(),
            evicted_stale: AtomicU64::new(0),
            evicted_lru: AtomicU64::new(0),
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
        // The cheap reading is taken outside the lock to keep the critical section short;
        // the state machine tolerates a `now` slightly older than one already recorded.
        let recent_ns = self.clock.recent_ns();
        let lag_ns = self.clock.recent_lag_ns();
        let shard_index = self.shard_index(key.stored_hash());
        let shard = &self.shards[shard_index];
        if let Some(retry_at_ns) = shard.lockout_answer(key, recent_ns.saturating_add(lag_ns)) {
            // Locked beyond doubt: answer without the lock. The hint is measured from the
            // cheap reading, so at worst it is a little long, never short.
            self.slot_denials.increment();
            return Decision::hard_lockout(ceil_ms(retry_at_ns.saturating_sub(recent_ns)));
        }
        let limits = &self.scope_entry(key.scope()).limits;
        let precise_now = || self.clock.now_ns();
        let window_ns = self.soft_violation_window_ns;
        let mut guard = shard.lock();
        let ShardState { entries, counters } = &mut *guard;
        let (decision, state, was_locked) = if let Some(entry) = entries.get(key) {
            let mut state = entry.state();
            let was_locked = state.locked;
            let decision = state.decide(limits, window_ns, recent_ns, lag_ns, precise_now);
            // Storing unconditionally measured faster than comparing first.
            entry.set_state(state);
            (decision, state, was_locked)
        } else if self.reserve_tracking() {
            let mut state = BucketState::new(limits, recent_ns);
            let decision = state.decide(limits, window_ns, recent_ns, lag_ns, precise_now);
            entries.insert(Entry::new(key, state));
            (decision, state, false)
        } else {
            // Fail closed: tracking one more key would break the memory bound. Keys already
            // tracked keep working; a sweep makes room.
            drop(guard);
            self.rejected_at_cap.increment();
            return Decision::hard_lockout(self.cap_retry_after_ms);
        };
        match decision.reason {
            crate::Reason::None => counters.allowed += 1,
            crate::Reason::SoftThrottle => self.soft_throttled.increment(),
            crate::Reason::HardLockout => {
                counters.hard_locked += 1;
                if state.locked && !was_locked {
                    // A lockout starts: publish it once, so the key's next checks can be
                    // answered without the lock. Later checks of a locked key do not
                    // touch the board, which keeps them as cheap as any other.
                    let until_ns = state.lock_end_ns(limits);
                    shard.offer_lockout(key, until_ns, state.last_seen_ns(), || {
                        state.lockout_retry_at_ns(limits)
                    });
                }
            }
        }
        decision
    }

    /// Counts a new key against `max_tracked`; false when the engine is full.
    fn reserve_tracking(&self) -> bool {
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

    pub(super) fn release_tracking(&self, count: usize) {
        if count > 0 {
            self.tracked.fetch_sub(count, Ordering::AcqRel);
        }
    }

    fn shard_index(&self, hash: u64) -> usize {
        // Bits 40.. pick the shard: the map inside uses the low bits for its bucket index
        // and the top 7 bits as tags, so shard choice must not reuse either.
        ((hash >> 40) & self.shard_mask) as usize
    }

    fn shard_for(&self, hash: u64) -> &Shard {
        &self.shards[self.shard_index(hash)]
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

    /// Counters since creation, summed over all shards.
    pub fn counters(&self) -> Counters {
        let mut shard_counters = ShardCounters::default();
        for shard in self.shards.iter() {
            shard_counters.add(&shard.lock().counters);
        }
        self.total_counters(&shard_counters)
    }

    /// Adds the engine-level counters to the shards' sums.
    pub(super) fn total_counters(&self, shards: &ShardCounters) -> Counters {
        let slot_denials = self.slot_denials.sum();
        let rejected_at_cap = self.rejected_at_cap.sum();
        let soft_throttled = self.soft_throttled.sum();
        let hard_locked = shards.hard_locked + slot_denials;
        Counters {
            checks: shards.allowed + soft_throttled + hard_locked + rejected_at_cap,
            allowed: shards.allowed,
            soft_throttled,
            hard_locked,
            rejected_at_cap,
            evicted_stale: self.evicted_stale.load(Ordering::Relaxed),
            evicted_lru: self.evicted_lru.load(Ordering::Relaxed),
        }
    }

    /// Bytes per tracked key inside the map: one entry (key with its hash, and state),
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
        assert_eq!(size_of::<BucketState>(), 24);
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
