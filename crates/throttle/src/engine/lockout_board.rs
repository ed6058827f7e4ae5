//! A lock-free shortcut for keys under a hard lockout.
//!
//! A client hammering the limiter after being locked out is the flood case: every one of its
//! checks has a foregone answer. Each shard keeps one [`LockoutSlot`] naming a locked key
//! and when its lockout ends; a check that finds its own key there, locked beyond any doubt,
//! answers without taking the shard lock, so a flood costs a few loads and no atomic
//! read-modify-write, and two threads flooding one key do not bounce the lock's cache line.
//! (The shard keeps a copy of the slot's key hash next to its lock, so checks of other keys
//! do not even read the slot.)
//!
//! The slot is a sequence lock built only from atomics (safe Rust): the writer, always
//! holding the shard lock, makes the version odd, stores the fields, and makes it even again;
//! a reader that sees the same even version before and after its loads has a consistent
//! copy. The slot is only a cache: the map stays the truth, and anything but a certain,
//! still-running lockout falls through to the locked path.

use crate::key::BucketKey;
use std::sync::atomic::{AtomicU64, Ordering, fence};

#[repr(align(64))]
#[derive(Debug, Default)]
pub(super) struct LockoutSlot {
    version: AtomicU64,
    hash: AtomicU64,
    client_high: AtomicU64,
    client_low: AtomicU64,
    scope: AtomicU64,
    until_ns: AtomicU64,
    retry_at_ns: AtomicU64,
}

impl LockoutSlot {
    /// If `key` is in the slot and locked until after `horizon_ns`, the instant its retry
    /// hint points to.
    #[inline]
    pub(super) fn locked_beyond(&self, key: &BucketKey, horizon_ns: u64) -> Option<u64> {
        let before = self.version.load(Ordering::Acquire);
        // Cheap rejection first: almost every check is for a key that is not in the slot.
        if before & 1 == 1 || self.hash.load(Ordering::Relaxed) != key.stored_hash() {
            return None;
        }
        let client = key.client();
        let same_key = self.client_high.load(Ordering::Relaxed) == client.high()
            && self.client_low.load(Ordering::Relaxed) == client.low()
            && self.scope.load(Ordering::Relaxed) == u64::from(key.scope().0);
        let until_ns = self.until_ns.load(Ordering::Relaxed);
        let retry_at_ns = self.retry_at_ns.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let consistent = self.version.load(Ordering::Relaxed) == before;
        (consistent && same_key && horizon_ns < until_ns).then_some(retry_at_ns)
    }

    /// Offers a lockout to the slot. Callers hold the shard lock (one writer at a time).
    ///
    /// The slot keeps the lockout that ends last, so keys locked at the same moment do not
    /// evict each other on every check, and each lockout is written once when it starts.
    /// `retry_at_ns` is only computed when the slot is actually written. Returns whether it
    /// was.
    pub(super) fn offer(
        &self,
        key: &BucketKey,
        until_ns: u64,
        now_ns: u64,
        retry_at_ns: impl FnOnce() -> u64,
    ) -> bool {
        let current_until = self.until_ns.load(Ordering::Relaxed);
        let holds_this =
            self.hash.load(Ordering::Relaxed) == key.stored_hash() && current_until == until_ns;
        if holds_this || (current_until > now_ns && current_until >= until_ns) {
            return false;
        }
        let client = key.client();
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.hash.store(key.stored_hash(), Ordering::Relaxed);
        self.client_high.store(client.high(), Ordering::Relaxed);
        self.client_low.store(client.low(), Ordering::Relaxed);
        self.scope
            .store(u64::from(key.scope().0), Ordering::Relaxed);
        self.until_ns.store(until_ns, Ordering::Relaxed);
        self.retry_at_ns.store(retry_at_ns(), Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::{AddressAggregation, ClientAddr};
    use crate::key::ScopeId;

    fn key(ip: &str, scope: u32) -> BucketKey {
        BucketKey::new(
            ScopeId(scope),
            ClientAddr::from_ip(ip.parse().unwrap(), AddressAggregation::default()),
        )
    }

    #[test]
    fn answers_only_for_its_key_and_only_while_certainly_locked() {
        let slot = LockoutSlot::default();
        let locked = key("192.0.2.1", 0);
        assert_eq!(slot.locked_beyond(&locked, 0), None, "empty slot");
        slot.offer(&locked, 1_000, 10, || 1_500);
        assert_eq!(slot.locked_beyond(&locked, 999), Some(1_500));
        assert_eq!(
            slot.locked_beyond(&locked, 1_000),
            None,
            "lock over at its end"
        );
        assert_eq!(
            slot.locked_beyond(&key("192.0.2.2", 0), 0),
            None,
            "other client"
        );
        assert_eq!(
            slot.locked_beyond(&key("192.0.2.1", 1), 0),
            None,
            "other scope"
        );
    }

    #[test]
    fn keeps_the_lockout_that_ends_last() {
        let slot = LockoutSlot::default();
        let (first, second) = (key("192.0.2.1", 0), key("192.0.2.2", 0));
        slot.offer(&first, 2_000, 10, || 2_000);
        slot.offer(&second, 1_000, 20, || 1_000);
        assert!(
            slot.locked_beyond(&first, 100).is_some(),
            "shorter lock did not replace"
        );
        slot.offer(&second, 3_000, 30, || 3_000);
        assert!(slot.locked_beyond(&second, 100).is_some());
        assert!(slot.locked_beyond(&first, 100).is_none());
        // Once the occupant's lock is over, any new lock takes the slot.
        slot.offer(&first, 5_000, 3_000, || 5_000);
        assert!(slot.locked_beyond(&first, 3_001).is_some());
    }
}
