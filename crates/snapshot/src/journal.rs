//! The snapshot change journal of one worker: which proxies its snapshot counter moved for,
//! so a snapshot build can re-read only those (`WorkerRuntimeStore::snapshot_changes`).
//!
//! Each proxy is kept once, at the counter value of its latest change, so the journal holds
//! at most one entry per distinct proxy; past the cap the oldest go and the floor rises to
//! the highest counter value that went, below which the journal can no longer answer.
//!
//! These are the rules of every store: the memory pool keeps one [`Journal`] per worker,
//! and the Redis adapter keeps the same map as a sorted set per worker with the same cap,
//! order and floor (`crates/redis/src/lua/lib/counters.lua`, `snapshot_changes.lua`); the
//! pool's contract suite holds both to them.

use proxypool_core::ProxyId;
use std::collections::{BTreeSet, HashMap};

/// One worker's change journal (see the module doc).
#[derive(Debug, Default)]
pub struct Journal {
    /// Proxy -> the counter value of its latest change.
    latest: HashMap<ProxyId, u64>,
    /// (counter value, proxy) of every entry of `latest`: the order to read from and to trim
    /// in (ties, several proxies named by one value, by id, as a Redis sorted set keeps them).
    order: BTreeSet<(u64, ProxyId)>,
    /// The highest counter value trimmed away (0 while nothing was).
    floor: u64,
}

impl Journal {
    /// Records that the counter moved to `counter` for `proxy`, keeping at most `cap`
    /// distinct proxies.
    pub fn record(&mut self, proxy: &ProxyId, counter: u64, cap: usize) {
        if let Some(old) = self.latest.insert(proxy.clone(), counter) {
            self.order.remove(&(old, proxy.clone()));
        }
        self.order.insert((counter, proxy.clone()));
        while self.latest.len() > cap {
            let Some((value, oldest)) = self.order.pop_first() else {
                break;
            };
            self.latest.remove(&oldest);
            self.floor = self.floor.max(value);
        }
    }

    /// The proxies changed after the counter was at `after`, latest change first; `None`
    /// when changes that far back were trimmed away.
    pub fn changed_after(&self, after: u64) -> Option<impl Iterator<Item = &ProxyId>> {
        if after < self.floor {
            return None;
        }
        Some(
            self.order
                .iter()
                .rev()
                .take_while(move |(value, _)| *value > after)
                .map(|(_, id)| id),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ProxyId {
        ProxyId::new(format!("{n:032x}")).unwrap()
    }

    /// Oldest change first.
    fn after(journal: &Journal, value: u64) -> Option<Vec<ProxyId>> {
        journal.changed_after(value).map(|ids| {
            let mut ids: Vec<ProxyId> = ids.cloned().collect();
            ids.reverse();
            ids
        })
    }

    #[test]
    fn a_proxy_is_kept_once_at_its_latest_change() {
        let mut journal = Journal::default();
        journal.record(&id(1), 1, 3);
        journal.record(&id(2), 2, 3);
        journal.record(&id(1), 3, 3);
        assert_eq!(after(&journal, 0), Some(vec![id(2), id(1)]));
        assert_eq!(after(&journal, 2), Some(vec![id(1)]));
        assert_eq!(after(&journal, 3), Some(vec![]));
        assert_eq!(
            after(&journal, 9),
            Some(vec![]),
            "a version from the future"
        );
    }

    #[test]
    fn past_the_cap_the_oldest_go_and_the_floor_rises_to_the_last_that_went() {
        let mut journal = Journal::default();
        for (n, value) in [(1, 1), (2, 2), (3, 3)] {
            journal.record(&id(n), value, 3);
        }
        // A repeat of a kept proxy adds no entry: nothing is trimmed.
        journal.record(&id(1), 4, 3);
        assert_eq!(after(&journal, 0), Some(vec![id(2), id(3), id(1)]));
        // A fourth distinct proxy pushes out the oldest change (id 2, at 2).
        journal.record(&id(4), 5, 3);
        assert_eq!(after(&journal, 1), None, "the change at 2 is forgotten");
        assert_eq!(after(&journal, 2), Some(vec![id(3), id(1), id(4)]));
        journal.record(&id(5), 6, 3);
        journal.record(&id(6), 7, 3);
        assert_eq!(after(&journal, 3), None);
        assert_eq!(after(&journal, 4), Some(vec![id(4), id(5), id(6)]));
    }

    #[test]
    fn several_proxies_at_one_value_are_ordered_and_trimmed_by_id() {
        let mut journal = Journal::default();
        journal.record(&id(2), 1, 2);
        journal.record(&id(1), 1, 2);
        assert_eq!(after(&journal, 0), Some(vec![id(1), id(2)]));
        journal.record(&id(3), 2, 2);
        // (1, id 1) went first; (1, id 2) is still there but not after 1.
        assert_eq!(after(&journal, 0), None);
        assert_eq!(after(&journal, 1), Some(vec![id(3)]));
    }
}
