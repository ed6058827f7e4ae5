//! Sticky sessions: (client, session id) → the proxy it is pinned to, until the session's
//! `sesstime` runs out (or, with `idle`, until it goes unused that long). Rotation keys
//! (`-rotate-N`, `-rotate-Ts` without a session, see `crate::routing::rotation`) live here too, so
//! they share the same bounds. Sharded by client, mutexes held only for a map operation (never
//! across an `.await`); bounded overall (`max_sticky_sessions`) and per client
//! (`max_sticky_sessions_per_client`, live): a client at its own cap replaces its oldest
//! pin, so one client can never fill the table and push out the others. Expired pins are
//! swept on a timer and when a bound is reached.

use proxypool_core::{LockExt, ProxyId};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const SHARDS: usize = 32;

/// A pin: the proxy and when the session ends (wall-clock ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pin {
    pub proxy: ProxyId,
    pub expires_at_ms: u64,
    /// When this proxy was chosen (wall-clock ms), for rotation by time.
    pub since_ms: u64,
    /// Requests this proxy carried for the key, for rotation by count.
    pub uses: u32,
    /// Non-zero: a sliding expiry, pushed to `now + idle_ms` by every use.
    pub idle_ms: u64,
}

impl Pin {
    /// A pin made now, for its first request, with a fixed end.
    pub(crate) fn new(proxy: ProxyId, expires_at_ms: u64, now_ms: u64) -> Self {
        Pin {
            proxy,
            expires_at_ms,
            since_ms: now_ms,
            uses: 1,
            idle_ms: 0,
        }
    }
}

/// The table is full of live sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFull;

/// A pin and when it was made (a sequence number of its shard).
#[derive(Debug)]
struct Entry {
    pin: Pin,
    seq: u64,
}

/// The pins of one client, with the order they were made in.
#[derive(Debug, Default)]
struct ClientPins {
    pins: HashMap<String, Entry>,
    /// (seq, session) oldest first; an element whose session is gone or was pinned again
    /// later (another seq) is stale and skipped.
    order: VecDeque<(u64, String)>,
}

impl ClientPins {
    /// Drops expired pins and stale order entries; returns how many pins it dropped.
    fn sweep(&mut self, now_ms: u64) -> usize {
        let before = self.pins.len();
        self.pins
            .retain(|_, entry| entry.pin.expires_at_ms > now_ms);
        self.compact();
        before - self.pins.len()
    }

    /// Drops the stale order entries.
    fn compact(&mut self) {
        let pins = &self.pins;
        self.order
            .retain(|(seq, session)| pins.get(session).is_some_and(|e| e.seq == *seq));
    }

    /// Removes the client's oldest pin.
    fn evict_oldest(&mut self) {
        while let Some((seq, session)) = self.order.pop_front() {
            if self.pins.get(&session).is_some_and(|e| e.seq == seq) {
                self.pins.remove(&session);
                return;
            }
        }
    }
}

/// Whether the table key `key` belongs to the session `session`: it is the id, or the id
/// and after a `~` the selectors that make it a session of its own (session ids never
/// contain `~`; `crate::routing::rotation` makes the keys).
pub(crate) fn is_key_of_session(key: &str, session: &str) -> bool {
    key.strip_prefix(session)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('~'))
}

#[derive(Debug, Default)]
struct Shard {
    clients: HashMap<String, ClientPins>,
    next_seq: u64,
}

/// All sticky sessions of one gateway.
#[derive(Debug)]
pub(crate) struct StickyTable {
    shards: Vec<Mutex<Shard>>,
    capacity: usize,
    /// Pins held over all shards.
    len: AtomicUsize,
}

impl StickyTable {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            capacity: capacity.max(1),
            len: AtomicUsize::new(0),
        }
    }

    fn shard(&self, client: &str) -> &Mutex<Shard> {
        let mut hasher = DefaultHasher::new();
        client.hash(&mut hasher);
        &self.shards[(hasher.finish() as usize) % SHARDS]
    }

    fn forget(&self, count: usize) {
        if count > 0 {
            self.len.fetch_sub(count, Ordering::Relaxed);
        }
    }

    /// The live pin under `session`, the exact key, if any (a read that counts no use;
    /// client feedback looks a session up by [`Self::session_pins`] instead).
    #[cfg(test)]
    pub(crate) fn get(&self, client: &str, session: &str, now_ms: u64) -> Option<Pin> {
        let mut shard = self.shard(client).lock_or_recover();
        let pins = shard.clients.get_mut(client)?;
        match pins.pins.get(session) {
            Some(entry) if entry.pin.expires_at_ms > now_ms => Some(entry.pin.clone()),
            Some(_) => {
                pins.pins.remove(session);
                self.forget(1);
                None
            }
            None => None,
        }
    }

    /// Whether a live pin is kept under the exact key `key` (a read that counts no use
    /// and changes nothing): the fleet asks whether a key that leaves this gateway had a
    /// session here.
    pub(crate) fn holds(&self, client: &str, key: &str, now_ms: u64) -> bool {
        let shard = self.shard(client).lock_or_recover();
        shard
            .clients
            .get(client)
            .and_then(|pins| pins.pins.get(key))
            .is_some_and(|entry| entry.pin.expires_at_ms > now_ms)
    }

    /// The live pins of the session `session` under every key it has (its id alone, and
    /// its id with each set of geo selectors it was used with): client feedback names a
    /// session by its id. Scans the client's pins, which its own bound keeps few.
    pub(crate) fn session_pins(&self, client: &str, session: &str, now_ms: u64) -> Vec<Pin> {
        let shard = self.shard(client).lock_or_recover();
        let Some(pins) = shard.clients.get(client) else {
            return Vec::new();
        };
        pins.pins
            .iter()
            .filter(|(key, entry)| {
                entry.pin.expires_at_ms > now_ms && is_key_of_session(key, session)
            })
            .map(|(_, entry)| entry.pin.clone())
            .collect()
    }

    /// Runs `f` on the session's live pin under its shard's lock (a mutation that must
    /// not race another request's, such as counting a use); drops an expired pin first.
    pub(crate) fn update<R>(
        &self,
        client: &str,
        session: &str,
        now_ms: u64,
        f: impl FnOnce(&mut Pin) -> R,
    ) -> Option<R> {
        let mut shard = self.shard(client).lock_or_recover();
        let pins = shard.clients.get_mut(client)?;
        match pins.pins.get_mut(session) {
            Some(entry) if entry.pin.expires_at_ms > now_ms => Some(f(&mut entry.pin)),
            Some(_) => {
                pins.pins.remove(session);
                self.forget(1);
                None
            }
            None => None,
        }
    }

    /// Pins (or re-pins) the session. A new session of a client holding `per_client` pins
    /// replaces that client's oldest; otherwise it needs room in the whole table.
    pub(crate) fn put(
        &self,
        client: &str,
        session: &str,
        pin: Pin,
        now_ms: u64,
        per_client: usize,
    ) -> Result<(), TableFull> {
        let mut guard = self.shard(client).lock_or_recover();
        let shard = &mut *guard;
        let seq = shard.next_seq;
        if let Some(entry) = shard
            .clients
            .get_mut(client)
            .and_then(|pins| pins.pins.get_mut(session))
        {
            entry.pin = pin;
            return Ok(());
        }
        if !shard.clients.contains_key(client) {
            shard
                .clients
                .insert(client.to_owned(), ClientPins::default());
        }
        let pins = shard.clients.get_mut(client).expect("inserted above");
        if pins.pins.len() >= per_client.max(1) {
            self.forget(pins.sweep(now_ms));
        }
        if pins.pins.len() >= per_client.max(1) {
            // At its own cap: the client's oldest pins make room, nobody else's (more
            // than one only after the cap was lowered).
            while pins.pins.len() >= per_client.max(1) {
                pins.evict_oldest();
                self.forget(1);
            }
        } else if self.len.load(Ordering::Relaxed) >= self.capacity {
            let mut freed = 0;
            shard.clients.retain(|_, pins| {
                freed += pins.sweep(now_ms);
                !pins.pins.is_empty()
            });
            self.forget(freed);
            if self.len.load(Ordering::Relaxed) >= self.capacity {
                return Err(TableFull);
            }
        }
        shard.next_seq += 1;
        let pins = shard.clients.entry(client.to_owned()).or_default();
        pins.pins.insert(session.to_owned(), Entry { pin, seq });
        pins.order.push_back((seq, session.to_owned()));
        // Bound the stale order entries that pins removed by `get` leave behind.
        if pins.order.len() > 2 * pins.pins.len() + 16 {
            pins.compact();
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops expired pins; returns how many remain.
    pub(crate) fn sweep(&self, now_ms: u64) -> usize {
        let mut remaining = 0;
        for shard in &self.shards {
            let mut shard = shard.lock_or_recover();
            let mut freed = 0;
            shard.clients.retain(|_, pins| {
                freed += pins.sweep(now_ms);
                remaining += pins.pins.len();
                !pins.pins.is_empty()
            });
            self.forget(freed);
        }
        remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(n: u8, expires_at_ms: u64) -> Pin {
        Pin::new(ProxyId::new(format!("{n:032x}")).unwrap(), expires_at_ms, 0)
    }

    #[test]
    fn update_counts_under_the_lock_and_drops_expired_pins() {
        let table = StickyTable::new(100);
        table.put("alice", "s1", pin(1, 1_000), 0, 100).unwrap();
        let uses = table.update("alice", "s1", 10, |p| {
            p.uses += 1;
            p.expires_at_ms = 2_000;
            p.uses
        });
        assert_eq!(uses, Some(2));
        assert_eq!(table.get("alice", "s1", 1_500).map(|p| p.uses), Some(2));
        assert_eq!(table.update("bob", "s1", 10, |p| p.uses), None);
        assert_eq!(
            table.update("alice", "s1", 2_000, |p| p.uses),
            None,
            "expired"
        );
        assert_eq!(table.sweep(0), 0, "and dropped");
    }

    #[test]
    fn a_session_s_pins_are_found_under_each_of_its_keys() {
        let table = StickyTable::new(100);
        table.put("alice", "s1", pin(1, 1_000), 0, 100).unwrap();
        table
            .put("alice", "s1~city=a~", pin(2, 1_000), 0, 100)
            .unwrap();
        table
            .put("alice", "s1~city=b~", pin(3, 10), 0, 100)
            .unwrap();
        table.put("alice", "s10", pin(4, 1_000), 0, 100).unwrap();
        table.put("alice", "~n5", pin(5, 1_000), 0, 100).unwrap();
        table.put("bob", "s1", pin(6, 1_000), 0, 100).unwrap();
        let mut found = table.session_pins("alice", "s1", 100);
        found.sort_by(|a, b| a.proxy.as_str().cmp(b.proxy.as_str()));
        assert_eq!(
            found,
            vec![pin(1, 1_000), pin(2, 1_000)],
            "live, alice's, s1's"
        );
        assert!(table.session_pins("carol", "s1", 100).is_empty());
    }

    #[test]
    fn pins_until_expiry() {
        let table = StickyTable::new(100);
        table.put("alice", "s1", pin(1, 1_000), 0, 100).unwrap();
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
            if table
                .put(&format!("c{n}"), "s", pin(1, 10), 0, 100)
                .is_err()
            {
                full += 1;
            }
        }
        assert!(full > 0, "capacity is enforced");
        assert!(table.sweep(0) <= SHARDS);
        // Once the pins expired, new sessions fit again.
        for n in 0..200u32 {
            let _ = table.put(&format!("new{n}"), "s", pin(2, 100), 50, 100);
        }
        assert!(table.sweep(50) <= SHARDS);
    }

    #[test]
    fn a_client_at_its_cap_replaces_its_own_oldest_pin_never_another_clients() {
        let table = StickyTable::new(20);
        for n in 0..10u32 {
            table
                .put("bob", &format!("b{n}"), pin(2, 1_000), 0, 10)
                .unwrap();
        }
        // Alice opens far more sessions than her share: each new one past her cap
        // replaces her own oldest.
        for n in 0..50u32 {
            table
                .put("alice", &format!("a{n}"), pin(1, 1_000), 0, 10)
                .unwrap();
        }
        for n in 0..10u32 {
            assert!(
                table.get("bob", &format!("b{n}"), 1).is_some(),
                "bob's b{n} stays"
            );
        }
        for n in 0..40u32 {
            assert!(
                table.get("alice", &format!("a{n}"), 1).is_none(),
                "a{n} replaced"
            );
        }
        for n in 40..50u32 {
            assert!(
                table.get("alice", &format!("a{n}"), 1).is_some(),
                "a{n} kept"
            );
        }
        assert_eq!(table.sweep(1), 20);
        // Re-pinning a session she has is no new session: nothing is replaced.
        table.put("alice", "a40", pin(3, 1_000), 1, 10).unwrap();
        assert_eq!(table.get("alice", "a40", 1), Some(pin(3, 1_000)));
        assert!(table.get("alice", "a41", 1).is_some());
        // The table is full of live pins of others: a third client waits.
        assert_eq!(
            table.put("carol", "c0", pin(4, 1_000), 1, 10),
            Err(TableFull)
        );
        // A lower cap (a reload) applies from the next new session on.
        table.put("alice", "a50", pin(1, 1_000), 1, 5).unwrap();
        assert_eq!(table.sweep(1), 20 - 5);
    }
}
