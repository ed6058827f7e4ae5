//! [`Shard`]: one independently locked part of the engine's map, with its counters.

use super::entry::Entry;
use crate::hasher::StoredHash;
use crate::report::Counters;
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Aligned to 128 bytes so two shards' locks never share a cache line (or the adjacent line
/// that x86 prefetches in pairs): contention on one shard stays in that shard.
#[repr(align(128))]
pub(super) struct Shard {
    state: Mutex<ShardState>,
}

pub(super) struct ShardState {
    pub(super) entries: HashSet<Entry, StoredHash>,
    pub(super) counters: Counters,
}

impl Shard {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(ShardState {
                entries: HashSet::with_hasher(StoredHash),
                counters: Counters::default(),
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
