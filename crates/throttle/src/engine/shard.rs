//! [`Shard`]: one independently locked part of the engine's map, with the counters that
//! checks update under its lock and the shard's lockout slot.

use super::entry::Entry;
use super::lockout_board::LockoutSlot;
use crate::hasher::StoredHash;
use crate::key::BucketKey;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Two cache lines. The first holds everything an ordinary check touches: the lockout
/// hint, the lock, the map's header and the hot counters. The second holds the lockout
/// slot, read only by checks whose key matches the hint. No two shards share a line, so
/// contention on one shard stays in that shard.
///
/// Why the hint: reading a separate lockout line on every check cost about 4 ns per check
/// in the 10,000-key benchmark; a word in the line the lock needs anyway costs nothing.
#[repr(C, align(64))]
pub(super) struct Shard {
    /// Stored hash of the key in `lockout` (0: none yet). Only a hint: the slot's own
    /// sequence-locked fields are the authority.
    lockout_hint: AtomicU64,
    state: Mutex<ShardState>,
    lockout: LockoutSlot,
}

pub(super) struct ShardState {
    pub(super) entries: HashSet<Entry, StoredHash>,
    pub(super) counters: ShardCounters,
}

/// The two outcomes that dominate traffic, counted under the shard lock. Rarer events
/// (soft throttles, rejections at the cap, evictions, lock-free lockout answers) are counted
/// by the engine, so that this struct fits the shard's first line.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ShardCounters {
    pub(super) allowed: u64,
    pub(super) hard_locked: u64,
}

impl ShardCounters {
    pub(super) fn add(&mut self, other: &ShardCounters) {
        self.allowed += other.allowed;
        self.hard_locked += other.hard_locked;
    }
}

impl Shard {
    pub(super) fn new() -> Self {
        Self {
            lockout_hint: AtomicU64::new(0),
            lockout: LockoutSlot::default(),
            state: Mutex::new(ShardState {
                entries: HashSet::with_hasher(StoredHash),
                counters: ShardCounters::default(),
            }),
        }
    }

    /// If `key` is locked beyond `horizon_ns` according to the lockout slot, the instant its
    /// retry hint points to. Costs one load from the lock's own line when it is not.
    #[inline]
    pub(super) fn lockout_answer(&self, key: &BucketKey, horizon_ns: u64) -> Option<u64> {
        if self.lockout_hint.load(Ordering::Relaxed) != key.stored_hash() {
            return None;
        }
        self.lockout.locked_beyond(key, horizon_ns)
    }

    /// Offers a lockout that just started to the slot (see [`LockoutSlot::offer`]). Callers
    /// hold this shard's lock.
    pub(super) fn offer_lockout(
        &self,
        key: &BucketKey,
        until_ns: u64,
        now_ns: u64,
        retry_at_ns: impl FnOnce() -> u64,
    ) {
        if self.lockout.offer(key, until_ns, now_ns, retry_at_ns) {
            self.lockout_hint
                .store(key.stored_hash(), Ordering::Relaxed);
        }
    }

    #[inline]
    pub(super) fn lock(&self) -> MutexGuard<'_, ShardState> {
        // Nothing inside the lock can panic halfway through an update (no user code, no
        // allocation failure recovery), so a poisoned lock still guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_two_cache_lines_with_the_lock_in_the_first() {
        assert_eq!(size_of::<Shard>(), 128);
        assert!(8 + size_of::<Mutex<ShardState>>() <= 64);
    }
}
