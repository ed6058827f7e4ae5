//! [`LeafCache`]: the minted leaves by host, bounded by count, the least recently used
//! going first. A host's entry is a cell filled once: concurrent first requests for one
//! host wait on the same cell, so the host's leaf is minted once.

use proxypool_core::LockExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// Most recently used leaves, at most `capacity` of them.
#[derive(Debug)]
pub(super) struct LeafCache<V> {
    capacity: usize,
    inner: Mutex<Lru<V>>,
}

#[derive(Debug)]
struct Lru<V> {
    /// Host → its cell and the tick of its last use.
    entries: HashMap<Arc<str>, (Arc<OnceCell<V>>, u64)>,
    /// Tick of last use → host: the first is the least recently used.
    order: BTreeMap<u64, Arc<str>>,
    tick: u64,
}

impl<V> LeafCache<V> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Lru {
                entries: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
            }),
        }
    }

    /// The cell of `host` (filled or being filled, or new and empty), now the most
    /// recently used; a new one may push the least recently used out. The lock is held
    /// for the lookup only, never while a leaf is minted.
    pub(super) fn cell(&self, host: &str) -> Arc<OnceCell<V>> {
        let mut lru = self.inner.lock_or_recover();
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((cell, used)) = lru.entries.get_mut(host) {
            let previous = std::mem::replace(used, tick);
            let cell = Arc::clone(cell);
            if let Some(key) = lru.order.remove(&previous) {
                lru.order.insert(tick, key);
            }
            return cell;
        }
        while lru.entries.len() >= self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.entries.remove(&oldest);
        }
        let key: Arc<str> = Arc::from(host);
        let cell = Arc::new(OnceCell::new());
        lru.entries
            .insert(Arc::clone(&key), (Arc::clone(&cell), tick));
        lru.order.insert(tick, key);
        cell
    }

    /// Hosts held now.
    pub(super) fn len(&self) -> usize {
        self.inner.lock_or_recover().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_goes_first_and_the_bound_holds() {
        let cache: LeafCache<u32> = LeafCache::new(2);
        cache.cell("a").set(1).unwrap();
        cache.cell("b").set(2).unwrap();
        // a is used again: b is now the oldest.
        assert_eq!(cache.cell("a").get(), Some(&1));
        cache.cell("c").set(3).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.cell("a").get(), Some(&1));
        assert_eq!(cache.cell("c").get(), Some(&3));
        // b was pushed out: a new, empty cell.
        assert_eq!(cache.cell("b").get(), None);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn one_host_shares_one_cell() {
        let cache: LeafCache<u32> = LeafCache::new(8);
        let first = cache.cell("a");
        let second = cache.cell("a");
        assert!(Arc::ptr_eq(&first, &second));
    }
}
