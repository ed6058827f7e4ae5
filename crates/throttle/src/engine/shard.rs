//! [`Shard`]: one independently locked part of the engine's map, with the counters that
//! checks update under its lock.

use super::entry::Entry;
use crate::hasher::StoredHash;
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Exactly one 64-byte cache line: the lock, the map's header and the hot counters sit
/// together (one line to fetch per check), and no two shards share a line, so contention on
/// one shard stays in that shard. Keeping the shard array small keeps it in L1.
#[repr(align(64))]
pub(super) struct Shard {
    state: Mutex<ShardState>,
}

pub(super) struct ShardState {
    pub(super) entries: HashSet<Entry, StoredHash>,
    pub(super) counters: ShardCounters,
}

/// Outcomes counted under the shard lock. Rarer events (rejections at the cap, evictions,
/// lock-free lockout answers) are counted by the engine, off this line.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ShardCounters {
    pub(super) allowed: u64,
    pub(super) soft_throttled: u64,
    pub(super) hard_locked: u64,
}

impl ShardCounters {
    pub(super) fn add(&mut self, other: &ShardCounters) {
        self.allowed += other.allowed;
        self.soft_throttled += other.soft_throttled;
        self.hard_locked += other.hard_locked;
    }
}

impl Shard {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(ShardState {
                entries: HashSet::with_hasher(StoredHash),
                counters: ShardCounters::default(),
            }),
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
    fn a_shard_is_one_cache_line() {
        assert_eq!(size_of::<Shard>(), 64);
    }
}
