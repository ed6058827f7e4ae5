//! [`Entry`]: how one key and its bucket state are stored in a shard.

use crate::address::ClientAddr;
use crate::bucket::BucketState;
use crate::key::{BucketKey, ScopeId};
use std::cell::Cell;
use std::hash::{Hash, Hasher};

/// A key and its state as stored, flat (47 bytes of fields, no padding between a key struct
/// and a state struct) and aligned to one 64-byte cache line: a lookup touches exactly one
/// line of entries. At 48 bytes half the entries straddled two lines, which cost about half
/// an extra L1 miss per check (cachegrind) for a quarter less memory.
///
/// Lookups build a probe entry from a [`BucketKey`] (state zeroed); `Hash` and `Eq` look at
/// the key fields only.
///
/// The state fields are `Cell`s because a `HashSet` only lends shared references to its
/// elements; changing them can never move an entry within the set, and the shard's mutex
/// serializes all access.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Entry {
    hash: u64,
    client: ClientAddr,
    pub(super) scope: ScopeId,
    last_seen_ns: Cell<u64>,
    units: Cell<u32>,
    carry: Cell<u32>,
    soft_violations: Cell<u16>,
    locked: Cell<bool>,
}

impl Entry {
    pub(super) fn new(key: &BucketKey, state: BucketState) -> Self {
        let entry = Self {
            hash: key.stored_hash(),
            client: key.client(),
            scope: key.scope(),
            last_seen_ns: Cell::new(0),
            units: Cell::new(0),
            carry: Cell::new(0),
            soft_violations: Cell::new(0),
            locked: Cell::new(false),
        };
        entry.set_state(state);
        entry
    }

    pub(super) fn probe(key: &BucketKey) -> Self {
        Self::new(key, BucketState::default())
    }

    pub(super) fn key(&self) -> BucketKey {
        BucketKey::from_parts(self.hash, self.client, self.scope)
    }

    pub(super) fn state(&self) -> BucketState {
        BucketState {
            last_seen_ns: self.last_seen_ns.get(),
            units: self.units.get(),
            carry: self.carry.get(),
            soft_violations: self.soft_violations.get(),
            locked: self.locked.get(),
        }
    }

    pub(super) fn set_state(&self, state: BucketState) {
        self.last_seen_ns.set(state.last_seen_ns);
        self.units.set(state.units);
        self.carry.set(state.carry);
        self.soft_violations.set(state.soft_violations);
        self.locked.set(state.locked);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.client == other.client && self.scope == other.scope
    }
}

impl Eq for Entry {}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The maps use `StoredHash`, which passes this value straight through.
        state.write_u64(self.hash);
    }
}
