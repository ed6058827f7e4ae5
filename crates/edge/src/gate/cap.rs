//! [`ConnectionCap`]: the connections a listener holds open in total, and what happens when
//! they reach the cap: the oldest connection that has sent nothing yet, else the one idle
//! longest between complete requests, is closed to admit the new one.
//!
//! Why: a cap that only refuses lets idle sockets from a handful of addresses (each under
//! its per-address cap) lock out every client that would send a request. Closing a
//! connection that has sent nothing costs its peer nothing it was promised; an idle
//! kept-alive connection may be closed by an HTTP server at any time. A connection that
//! has begun to speak is never chosen: a TLS or SOCKS5 handshake in progress, a request
//! head half read (the first or a kept-alive connection's next), a request in flight or a
//! tunnel. Otherwise a few addresses opening connections in a loop would reset every
//! legitimate client whose handshake is slower than their loop; a slow speaker is bounded
//! by the listener's head deadline instead.
//!
//! The choice is cheap where it happens most: connections that have sent nothing wait in
//! accept order in a queue whose stale entries are dropped as they are met (and compacted
//! when they outnumber the live ones), so finding the oldest costs O(1) amortised; only
//! when none is left are the idle ones scanned.
//!
//! A connection's state moves by compare-and-swap, and being chosen is a state of its own:
//! a connection whose first byte arrives at the moment the cap looks at it is either seen
//! speaking (and passed over) or was chosen first (and hears it), never both.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::Notify;

/// Has sent nothing yet: may be closed for a newcomer, the oldest first.
const FRESH: u8 = 0;
/// Has begun to speak (a handshake or a head under way), has a request in flight or a
/// tunnel open: never closed for a newcomer.
const BUSY: u8 = 1;
/// Between complete requests on a kept-alive connection, no byte of the next head read:
/// may be closed once no fresh one is left.
const IDLE: u8 = 2;
/// Chosen to be closed for a newcomer; final.
const CHOSEN: u8 = 3;

/// One open connection as the cap sees it: whether it may be closed for a newcomer, and the
/// signal that it was.
#[derive(Debug)]
pub struct ConnectionMark {
    id: u64,
    state: AtomicU8,
    /// When it last went idle, in milliseconds since the cap was made.
    idle_since_ms: AtomicU64,
    notify: Notify,
    epoch: Instant,
}

impl ConnectionMark {
    /// Bytes arrived (a handshake's or a head's), a request started or a tunnel opened: the
    /// connection is not closed for a newcomer until [`idle`](Self::idle). Cheap when it
    /// is busy already (one load), so a connection's reads may call it for every chunk.
    pub fn busy(&self) {
        let mut state = self.state.load(Ordering::Acquire);
        while state == FRESH || state == IDLE {
            match self
                .state
                .compare_exchange_weak(state, BUSY, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// The connection finished its requests and waits for the next one, no byte of it read.
    pub fn idle(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.idle_since_ms.store(now, Ordering::Relaxed);
        // Only from busy: a chosen connection stays chosen.
        let _ = self
            .state
            .compare_exchange(BUSY, IDLE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Whether the cap chose this connection to close.
    pub fn is_evicted(&self) -> bool {
        self.state() == CHOSEN
    }

    /// Completes once the cap chose this connection to close (at once if it already did).
    pub async fn evicted(&self) {
        while !self.is_evicted() {
            self.notify.notified().await;
        }
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Chooses it, unless it left `from` meanwhile (began to speak, say) or was chosen.
    fn evict(&self, from: u8) -> bool {
        if self
            .state
            .compare_exchange(from, CHOSEN, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        self.notify.notify_one();
        true
    }
}

/// The open connections, for choosing one to close.
#[derive(Debug, Default)]
struct Registry {
    open: HashMap<u64, Arc<ConnectionMark>>,
    /// Ids in accept order; an id whose connection closed or began to speak is stale.
    fresh: VecDeque<u64>,
}

impl Registry {
    fn oldest_fresh(&mut self) -> Option<Arc<ConnectionMark>> {
        while let Some(id) = self.fresh.pop_front() {
            if let Some(mark) = self.open.get(&id)
                && mark.state() == FRESH
            {
                return Some(Arc::clone(mark));
            }
        }
        None
    }

    fn longest_idle(&self) -> Option<Arc<ConnectionMark>> {
        self.open
            .values()
            .filter(|mark| mark.state() == IDLE)
            .min_by_key(|mark| mark.idle_since_ms.load(Ordering::Relaxed))
            .cloned()
    }

    fn compact(&mut self) {
        if self.fresh.len() > 2 * self.open.len() + 64 {
            let open = &self.open;
            self.fresh
                .retain(|id| open.get(id).is_some_and(|mark| mark.state() == FRESH));
        }
    }
}

/// The listener's cap on open connections, which closes an unused connection to admit a
/// new one rather than refuse it.
#[derive(Debug)]
pub struct ConnectionCap {
    cap: AtomicUsize,
    open: AtomicUsize,
    next_id: AtomicU64,
    registry: Mutex<Registry>,
    epoch: Instant,
    /// Woken when the last open connection closes.
    emptied: Notify,
}

impl ConnectionCap {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(ConnectionCap {
            cap: AtomicUsize::new(cap),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            registry: Mutex::new(Registry::default()),
            epoch: Instant::now(),
            emptied: Notify::new(),
        })
    }

    /// A new cap applies to the next accept; open connections are never cut for it.
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Open connections (a closed-for-a-newcomer one counts until it is gone).
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Admits one more connection: under the cap at once, at the cap by closing the oldest
    /// connection that has sent nothing (else the longest idle); `None` when every open
    /// connection is busy.
    pub fn admit(self: &Arc<Self>) -> Option<OpenConnection> {
        let cap = self.cap();
        let under = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < cap).then_some(open + 1)
            })
            .is_ok();
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut made_room = false;
        if !under {
            let fresh = loop {
                match registry.oldest_fresh() {
                    Some(mark) if mark.evict(FRESH) => break Some(mark),
                    // It began to speak since it was queued: try the next.
                    Some(_) => continue,
                    None => break None,
                }
            };
            let victim = fresh.or_else(|| registry.longest_idle().filter(|mark| mark.evict(IDLE)));
            victim.as_ref()?;
            made_room = true;
            // The chosen one still counts until its task closes it, a moment from now.
            self.open.fetch_add(1, Ordering::AcqRel);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mark = Arc::new(ConnectionMark {
            id,
            state: AtomicU8::new(FRESH),
            idle_since_ms: AtomicU64::new(0),
            notify: Notify::new(),
            epoch: self.epoch,
        });
        registry.open.insert(id, Arc::clone(&mark));
        registry.fresh.push_back(id);
        registry.compact();
        drop(registry);
        Some(OpenConnection {
            cap: Arc::clone(self),
            mark,
            made_room,
        })
    }

    /// Completes once no connection is open (for a drain).
    pub async fn all_closed(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            // Registered before the check, so a close in between is not missed.
            emptied.as_mut().enable();
            if self.open() == 0 {
                return;
            }
            emptied.await;
        }
    }

    fn close(&self, id: u64) {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .remove(&id);
        if self.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.emptied.notify_waiters();
        }
    }
}

/// One connection counted against the cap; dropping it gives the slot back.
#[derive(Debug)]
pub struct OpenConnection {
    cap: Arc<ConnectionCap>,
    mark: Arc<ConnectionMark>,
    made_room: bool,
}

impl OpenConnection {
    /// Whether another connection was closed to admit this one.
    pub fn made_room(&self) -> bool {
        self.made_room
    }

    /// What the connection's tasks tell the cap (busy, idle) and hear from it (evicted).
    pub fn mark(&self) -> &Arc<ConnectionMark> {
        &self.mark
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.cap.close(self.mark.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn at_the_cap_the_oldest_connection_without_a_request_makes_room() {
        let cap = ConnectionCap::new(3);
        let first = cap.admit().unwrap();
        let second = cap.admit().unwrap();
        let third = cap.admit().unwrap();
        second.mark().busy();
        let fourth = cap.admit().expect("the oldest fresh one makes room");
        assert!(first.mark().is_evicted());
        assert!(!second.mark().is_evicted() && !third.mark().is_evicted());
        assert_eq!(cap.open(), 4, "the chosen one counts until it closes");
        assert!(!first.made_room(), "admitted under the cap");
        drop(first);
        let fifth = cap.admit().expect("the next oldest fresh one makes room");
        assert!(third.mark().is_evicted());
        assert!(!fourth.mark().is_evicted());
        assert!(fourth.made_room() && fifth.made_room());
        assert!(!second.made_room() && !third.made_room());
    }

    #[test]
    fn busy_connections_are_never_closed_and_idle_ones_only_after_fresh_ones() {
        let cap = ConnectionCap::new(2);
        let a = cap.admit().unwrap();
        let b = cap.admit().unwrap();
        a.mark().busy();
        b.mark().busy();
        assert!(cap.admit().is_none(), "every connection is busy: refused");
        assert_eq!(cap.open(), 2);
        b.mark().idle();
        std::thread::sleep(Duration::from_millis(2));
        a.mark().idle();
        let c = cap.admit().expect("an idle one makes room");
        assert!(b.mark().is_evicted(), "the one idle longest goes first");
        assert!(!a.mark().is_evicted());
        drop(b);
        let _d = cap
            .admit()
            .expect("the fresh newcomer goes before the idle one");
        assert!(c.mark().is_evicted());
        assert!(!a.mark().is_evicted());
    }

    #[test]
    fn a_connection_that_started_a_request_is_not_chosen_late() {
        let cap = ConnectionCap::new(1);
        let a = cap.admit().unwrap();
        a.mark().busy();
        a.mark().idle();
        a.mark().busy();
        assert!(cap.admit().is_none());
        assert!(!a.mark().is_evicted());
    }

    #[test]
    fn a_connection_that_began_to_speak_is_never_chosen() {
        let cap = ConnectionCap::new(2);
        let speaking = cap.admit().unwrap();
        let silent = cap.admit().unwrap();
        // The first bytes of its handshake arrived; no request yet.
        speaking.mark().busy();
        let third = cap.admit().expect("the silent one makes room");
        assert!(silent.mark().is_evicted());
        assert!(
            !speaking.mark().is_evicted(),
            "a handshake under way is cut"
        );
        drop(silent);
        third.mark().busy();
        assert!(cap.admit().is_none(), "both speak: the newcomer is refused");
        assert!(!speaking.mark().is_evicted() && !third.mark().is_evicted());
    }

    #[test]
    fn a_kept_alive_connection_reading_its_next_head_is_not_chosen() {
        let cap = ConnectionCap::new(1);
        let kept = cap.admit().unwrap();
        kept.mark().busy();
        kept.mark().idle();
        // The first bytes of its next request's head.
        kept.mark().busy();
        assert!(cap.admit().is_none());
        assert!(!kept.mark().is_evicted());
        kept.mark().idle();
        let _newcomer = cap
            .admit()
            .expect("idle again with no byte of a head read: it makes room");
        assert!(kept.mark().is_evicted());
    }

    #[test]
    fn a_chosen_connection_stays_chosen() {
        let cap = ConnectionCap::new(1);
        let chosen = cap.admit().unwrap();
        let _newcomer = cap.admit().unwrap();
        assert!(chosen.mark().is_evicted());
        // Its first byte came a moment too late: it still closes.
        chosen.mark().busy();
        chosen.mark().idle();
        assert!(chosen.mark().is_evicted());
    }

    #[test]
    fn stale_queue_entries_do_not_pile_up() {
        let cap = ConnectionCap::new(10_000);
        for _ in 0..10_000 {
            let connection = cap.admit().unwrap();
            connection.mark().busy();
        }
        let registry = cap.registry.lock().unwrap();
        assert!(registry.fresh.len() <= 2 * registry.open.len() + 65);
        assert!(registry.open.is_empty());
    }

    #[tokio::test]
    async fn a_drain_completes_when_the_last_connection_closes() {
        let cap = ConnectionCap::new(4);
        let a = cap.admit().unwrap();
        let b = cap.admit().unwrap();
        let waiting = {
            let cap = Arc::clone(&cap);
            tokio::spawn(async move { cap.all_closed().await })
        };
        drop(a);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one is still open");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("drained")
            .unwrap();
    }

    #[tokio::test]
    async fn the_chosen_connection_hears_it() {
        let cap = ConnectionCap::new(1);
        let a = cap.admit().unwrap();
        let mark = Arc::clone(a.mark());
        let waiter = tokio::spawn(async move { mark.evicted().await });
        tokio::task::yield_now().await;
        let _b = cap.admit().unwrap();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the evicted connection is told")
            .unwrap();
    }
}
