//! Sticky sessions: (client, session id) → the proxy it is pinned to, until the session's
//! `sesstime` runs out. Sharded mutexes held only for a map operation (never across an
//! `.await`); bounded, with expired pins swept on a timer and when a shard is full.

use proxypool_core::{LockExt, ProxyId};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

const SHARDS: usize = 32;

/// A pin: the proxy and when the session ends (wall-clock ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pin {
    pub proxy: ProxyId,
    pub expires_at_ms: u64,
}

/// The table is full of live sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFull;

/// All sticky sessions of one gateway.
#[derive(Debug)]
pub(crate) struct StickyTable {
    shards: Vec<Mutex<HashMap<String, Pin>>>,
    per_shard: usize,
}

impl StickyTable {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn key(client: &str, session: &str) -> String {
        // '\0' cannot appear in either part, so the pair maps to one key.
        let mut key = String::with_capacity(client.len() + session.len() + 1);
        key.push_str(client);
        key.push('\0');
        key.push_str(session);
        key
    }

    fn shard(&self, key: &str) -> &Mutex<HashMap<String, Pin>> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        &self.shards[(hasher.finish() as usize) % SHARDS]
    }

    /// The live pin of the session, if any.
    pub(crate) fn get(&self, client: &str, session: &str, now_ms: u64) -> Option<Pin> {
        let key = Self::key(client, session);
        let mut shard = self.shard(&key).lock_or_recover();
        match shard.get(&key) {
            Some(pin) if pin.expires_at_ms > now_ms => Some(pin.clone()),
            Some(_) => {
                shard.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Pins (or re-pins) the session.
    pub(crate) fn put(
        &self,
        client: &str,
        session: &str,
        pin: Pin,
        now_ms: u64,
    ) -> Result<(), TableFull> {
        let key = Self::key(client, session);
        let mut shard = self.shard(&key).lock_or_recover();
        if !shard.contains_key(&key) && shard.len() >= self.per_shard {
            shard.retain(|_, pin| pin.expires_at_ms > now_ms);
            if shard.len() >= self.per_shard {
                return Err(TableFull);
            }
        }
        shard.insert(key, pin);
        Ok(())
    }

    /// Drops expired pins; returns how many remain.
    pub(crate) fn sweep(&self, now_ms: u64) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let mut shard = shard.lock_or_recover();
                shard.retain(|_, pin| pin.expires_at_ms > now_ms);
                shard.len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(n: u8, expires_at_ms: u64) -> Pin {
        Pin {
            proxy: ProxyId::new(format!("{n:032x}")).unwrap(),
            expires_at_ms,
        }
    }

    #[test]
    fn pins_until_expiry() {
        let table = StickyTable::new(100);
        table.put("alice", "s1", pin(1, 1_000), 0).unwrap();
        assert_eq!(table.get("alice", "s1", 999), Some(pin(1, 1_000)));
        assert_eq!(table.get("bob", "s1", 999), None, "per client");
        assert_eq!(table.get("alice", "s1", 1_000), None, "expired");
        assert_eq!(table.sweep(0), 0);
    }

    #[test]
    fn bounded_with_expired_entries_reclaimed() {
        let table = StickyTable::new(SHARDS); // one per shard
        let mut full = 0;
        for n in 0..200u32 {
            if table.put("c", &n.to_string(), pin(1, 10), 0).is_err() {
                full += 1;
            }
        }
        assert!(full > 0, "capacity is enforced");
        assert!(table.sweep(0) <= SHARDS);
        // Once the pins expired, new sessions fit again.
        for n in 0..200u32 {
            let _ = table.put("c", &format!("new{n}"), pin(2, 100), 50);
        }
        assert!(table.sweep(50) <= SHARDS);
    }
}
