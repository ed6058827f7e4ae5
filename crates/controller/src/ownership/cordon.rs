//! Cordoned workers: an operator's "stop giving this worker proxies, take back what it has"
//! (the client API's admin drain). The ownership manager drains a cordoned worker's proxies
//! through the normal drain protocol, so its open connections finish first.
//!
//! Kept in this controller's memory: it lasts until uncordoned or the controller restarts.

use proxypool_core::{LockExt, WorkerId};
use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Cordons {
    workers: Mutex<BTreeSet<WorkerId>>,
}

impl Cordons {
    /// Returns whether the worker was newly cordoned.
    pub fn cordon(&self, worker: &WorkerId) -> bool {
        self.workers.lock_or_recover().insert(worker.clone())
    }

    /// Returns whether the worker was cordoned.
    pub fn uncordon(&self, worker: &WorkerId) -> bool {
        self.workers.lock_or_recover().remove(worker)
    }

    pub fn is_cordoned(&self, worker: &WorkerId) -> bool {
        self.workers.lock_or_recover().contains(worker)
    }

    pub fn list(&self) -> Vec<WorkerId> {
        self.workers.lock_or_recover().iter().cloned().collect()
    }
}
