//! Bounds on the requests waiting for capacity (`limits.capacity_wait`): how many wait at
//! once per client and overall. A waiter that does not fit is refused at once, so a queue
//! of waiting requests cannot be used to hold the gateway's memory.

use crate::proxies::capacity::FreedSignal;
use proxypool_core::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Who waits now. The lock is taken only when a request starts or stops waiting (the slow
/// path of a full pool), never across an `.await`.
#[derive(Debug)]
pub(crate) struct CapacityWaiters {
    freed: Arc<FreedSignal>,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_client: HashMap<String, usize>,
}

/// One request's place among the waiters; dropping it leaves.
#[derive(Debug)]
pub(crate) struct WaitTicket<'a> {
    waiters: &'a CapacityWaiters,
    client: String,
}

impl CapacityWaiters {
    pub(crate) fn new(freed: Arc<FreedSignal>) -> Self {
        Self {
            freed,
            counts: Mutex::default(),
        }
    }

    /// The signal a waiter listens on.
    pub(crate) fn signal(&self) -> &FreedSignal {
        &self.freed
    }

    /// A place for `client` if fewer than `per_client` of its requests and fewer than
    /// `overall` requests in all wait now.
    pub(crate) fn enter(
        &self,
        client: &str,
        per_client: usize,
        overall: usize,
    ) -> Option<WaitTicket<'_>> {
        let mut counts = self.counts.lock_or_recover();
        if counts.total >= overall {
            return None;
        }
        let mine = counts.per_client.get(client).copied().unwrap_or(0);
        if mine >= per_client {
            return None;
        }
        counts.total += 1;
        counts.per_client.insert(client.to_owned(), mine + 1);
        drop(counts);
        self.freed.join();
        Some(WaitTicket {
            waiters: self,
            client: client.to_owned(),
        })
    }

    /// Requests waiting now (all clients).
    #[cfg(test)]
    fn total(&self) -> usize {
        self.counts.lock_or_recover().total
    }
}

impl Drop for WaitTicket<'_> {
    fn drop(&mut self) {
        self.waiters.freed.leave();
        let mut counts = self.waiters.counts.lock_or_recover();
        counts.total -= 1;
        if let Some(mine) = counts.per_client.get_mut(&self.client) {
            *mine -= 1;
            if *mine == 0 {
                counts.per_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_per_client_and_overall_and_leaves_on_drop() {
        let waiters = CapacityWaiters::new(Arc::default());
        let a1 = waiters.enter("a", 2, 3).unwrap();
        let _a2 = waiters.enter("a", 2, 3).unwrap();
        assert!(waiters.enter("a", 2, 3).is_none(), "a's bound");
        let _b1 = waiters.enter("b", 2, 3).unwrap();
        assert!(waiters.enter("c", 2, 3).is_none(), "the overall bound");
        drop(a1);
        assert_eq!(waiters.total(), 2);
        assert!(waiters.enter("a", 2, 3).is_some(), "a left one place");
    }
}
