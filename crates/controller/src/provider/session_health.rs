//! What the checker tells a backconnect upstream's keeper: consecutive failed checks per
//! session proxy. A session whose exit fails its checks is retired at the next round and a
//! new session id (a new exit) takes its place, instead of waiting for its lifetime to end.
//!
//! Both sides run on the leading controller; the map holds only sessions that failed
//! their last check, and the keeper forgets every session it retires or sees end.

use proxypool_core::{LockExt, ProxyId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Consecutive failed checks of backconnect sessions, by proxy id.
#[derive(Debug, Default)]
pub struct SessionHealth {
    failing: Mutex<HashMap<ProxyId, u32>>,
}

impl SessionHealth {
    /// Records one check of a session: a success clears it, a failure counts.
    pub fn observe(&self, id: &ProxyId, ok: bool) {
        let mut failing = self.failing.lock_or_recover();
        if ok {
            failing.remove(id);
        } else {
            *failing.entry(id.clone()).or_default() += 1;
        }
    }

    /// Consecutive failed checks of `id` so far.
    pub fn failures(&self, id: &ProxyId) -> u32 {
        self.failing.lock_or_recover().get(id).copied().unwrap_or(0)
    }

    /// Drops what is known of `id` (a session retired or ended).
    pub fn forget(&self, id: &ProxyId) {
        self.failing.lock_or_recover().remove(id);
    }
}
