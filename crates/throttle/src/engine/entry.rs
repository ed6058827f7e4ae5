//! [`Entry`]: how one key and its bucket state are stored in a shard.

use crate::bucket::BucketState;
use crate::key::{BucketKey, ScopeId};
use std::borrow::Borrow;
use std::cell::Cell;
use std::hash::{Hash, Hasher};

/// A key (with its stored hash, 32 bytes) and its state (24 bytes), aligned to one 64-byte
/// cache line so a lookup touches exactly one line of entries. (At 48 bytes, packed, half
/// the entries straddled two lines.)
///
/// The map looks entries up by [`BucketKey`] through `Borrow`; `Hash` and `Eq` look at the
/// key alone. The state sits in a `Cell` because a `HashSet` only lends shared references
/// to its elements; changing it can never move an entry within the set, and the shard's
/// mutex serializes all access.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Entry {
    key: BucketKey,
    state: Cell<BucketState>,
}

impl Entry {
    pub(super) fn new(key: &BucketKey, state: BucketState) -> Self {
        Self {
            key: *key,
            state: Cell::new(state),
        }
    }

    pub(super) fn key(&self) -> BucketKey {
        self.key
    }

    pub(super) fn scope(&self) -> ScopeId {
        self.key.scope()
    }

    pub(super) fn state(&self) -> BucketState {
        self.state.get()
    }

    pub(super) fn set_state(&self, state: BucketState) {
        self.state.set(state);
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
        // Must match `BucketKey`'s `Hash` for `Borrow` lookups: both write the stored hash.
        self.key.hash(state);
    }
}
