//! Cordoned workers: an operator's "stop giving this worker proxies, take back what it has"
//! (the client API's admin drain). The ownership manager drains a cordoned worker's proxies
//! through the normal drain protocol, so its open connections finish first.
//!
//! Kept in this controller's memory: it lasts until uncordoned or the controller restarts.

use proxypool_core::WorkerId;
use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Cordons {
    workers: Mutex<BTreeSet<WorkerId>>,
}

impl Cordons {
    /// Returns whether the worker was newly cordoned.
    pub fn cordon(&self, worker: &WorkerId) -> bool {
        self.lock().insert(worker.clone())
    }

    /// Returns whether the worker was cordoned.
    pub fn uncordon(&self, worker: &WorkerId) -> bool {
        self.lock().remove(worker)
    }

    pub fn is_cordoned(&self, worker: &WorkerId) -> bool {
        self.lock().contains(worker)
    }

    pub fn list(&self) -> Vec<WorkerId> {
        self.lock().iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<WorkerId>> {
        // A set of ids cannot be left inconsistent by a panic elsewhere.
        self.workers.lock().unwrap_or_else(|e| e.into_inner())
    }
}
