//! Local capacity: per-proxy counters of reserved (dialing) and active (request or tunnel
//! alive) uses, consecutive failures, and the registry that keeps them across snapshots.
//!
//! Active and reserved live packed in one `AtomicU64` (active in the high half), so a
//! reservation checks `active + reserved < max_sessions` and takes a slot in one CAS, and a
//! runtime report reads both at the same instant, as the seed's packed read does. Counters
//! outlive the snapshot that listed the proxy: a proxy removed while busy stays in the
//! registry and is reported as draining until both counts are zero. Each slot also carries
//! the proxy's [`Cutoff`]: when the gateway must stop relaying through it.
//!
//! Every slot of one registry shares a [`FreedSignal`]: giving a slot back wakes the
//! requests waiting for capacity (`limits.capacity_wait`), and costs one atomic read when
//! nobody waits.

use crate::proxies::cutoff::Cutoff;
use crate::proxies::idle_pool::IdlePool;
use proxypool_core::{LockExt, ProxyId, ProxyRuntime};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const ACTIVE_ONE: u64 = 1 << 32;
const RESERVED_MASK: u64 = u32::MAX as u64;

/// A removed, idle proxy is forgotten only after this long, so a request that picked it
/// from the previous view just before the swap is still counted (and reported) somewhere.
const REMOVAL_GRACE: Duration = Duration::from_secs(5);

/// The local counters of one upstream proxy.
#[derive(Debug, Default)]
pub(crate) struct ProxySlot {
    load: AtomicU64,
    consecutive_failures: AtomicU32,
    /// Monotonic milliseconds (gateway clock) of the last failure.
    last_failure_ms: AtomicU64,
    /// Kept-alive upstream connections for plain HTTP.
    pub(crate) idle: IdlePool,
    /// The end of the lease this gateway holds on the proxy, and the signal that closes
    /// its tunnels and upstream connections when the lease goes.
    pub(crate) cutoff: Cutoff,
    /// Cooldowns of the proxy per target domain (`crate::routing::bans`).
    pub(crate) domains: crate::proxies::cooldowns::DomainCooldowns,
    /// Shared by every slot of the registry: rung when this slot gives a use back.
    freed: Arc<FreedSignal>,
    /// Recent requests, for the least-used rotation.
    pub(crate) recent: crate::proxies::recent_use::RecentUse,
    /// The lease epoch feedback tickets are bound to, and the last ticket issued.
    pub(crate) tickets: crate::proxies::tickets::ProxyTickets,
}

/// Wakes the requests waiting for a free slot on any proxy of the registry.
///
/// One signal for all proxies rather than one per proxy, because a waiter may be able to
/// use any of several proxies; `notify_waiters` wakes them all and each retries its pick
/// (a compare-and-swap, so only as many win as slots freed). The number of waiters is
/// bounded (`limits.max_capacity_waiters`), so the wake-up herd is too.
#[derive(Debug, Default)]
pub(crate) struct FreedSignal {
    /// Requests between registering and giving up; the hot path reads only this.
    waiting: AtomicUsize,
    notify: Notify,
}

impl FreedSignal {
    /// A slot was given back. Called after the count's SeqCst decrement, so either this
    /// read sees a waiter registered before it, or that waiter's pick (after its own SeqCst
    /// fence) sees the freed slot: a wake-up is never lost.
    fn freed(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Counts a waiter in (until [`Self::leave`]).
    pub(crate) fn join(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn leave(&self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// A future resolved by the next [`Self::freed`] once it is enabled.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

/// Active and reserved at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Load {
    pub active: u32,
    pub reserved: u32,
}

impl Load {
    pub(crate) fn total(&self) -> u64 {
        u64::from(self.active) + u64::from(self.reserved)
    }
}

impl ProxySlot {
    fn with_signal(freed: Arc<FreedSignal>, pool_shards: usize) -> Self {
        Self {
            freed,
            idle: IdlePool::with_shards(pool_shards),
            ..Self::default()
        }
    }

    /// Both counts from one atomic read.
    /// What least-used minimizes: open uses (active and reserved) plus recent requests.
    pub(crate) fn usage_score(&self, mono_ms: u64) -> u64 {
        self.load().total() * crate::proxies::recent_use::ONE + self.recent.score(mono_ms)
    }

    pub(crate) fn load(&self) -> Load {
        unpack(self.load.load(Ordering::Acquire))
    }

    /// Takes a reserved slot if `active + reserved < max_sessions`.
    pub(crate) fn try_reserve(self: &Arc<Self>, max_sessions: u32) -> Option<Reservation> {
        let mut current = self.load.load(Ordering::Relaxed);
        loop {
            if unpack(current).total() >= u64::from(max_sessions) {
                return None;
            }
            match self.load.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Reservation {
                        slot: Some(Arc::clone(self)),
                    });
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// Whether the proxy failed `threshold` times in a row within the last `cooldown`.
    pub(crate) fn is_cooling_down(&self, threshold: u32, cooldown_ms: u64, now_ms: u64) -> bool {
        self.consecutive_failures.load(Ordering::Relaxed) >= threshold
            && now_ms.saturating_sub(self.last_failure_ms.load(Ordering::Relaxed)) < cooldown_ms
    }

    pub(crate) fn record_failure(&self, now_ms: u64) {
        self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
        self.last_failure_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Whether anything is open through the proxy: an active or reserved use, or an upstream
    /// connection (idle or busy) waiting on the cutoff.
    pub(crate) fn in_use(&self) -> bool {
        self.load().total() > 0 || self.cutoff.watched()
    }

    /// The lease lapsed (the lease keeper): cuts once and drops the idle connections.
    /// Returns whether this call cut.
    pub(crate) fn lapse_if_due(&self, now_ms: u64) -> bool {
        let cut = self.cutoff.lapse_if_due(now_ms);
        if cut {
            self.idle.clear();
        }
        cut
    }

    /// The store disowned the proxy: cuts at once and drops the idle connections. Returns
    /// whether it was still open.
    pub(crate) fn revoke(&self) -> bool {
        let cut = self.cutoff.revoke();
        if cut {
            self.idle.clear();
        }
        cut
    }

    pub(crate) fn record_success(&self) {
        // Skip the store when already zero: this runs per request and the line is shared.
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }
}

fn unpack(value: u64) -> Load {
    Load {
        active: (value >> 32) as u32,
        reserved: (value & RESERVED_MASK) as u32,
    }
}

/// A reserved slot while dialing; dropping it gives the slot back.
#[derive(Debug)]
pub(crate) struct Reservation {
    slot: Option<Arc<ProxySlot>>,
}

impl Reservation {
    /// The dial succeeded: reserved becomes active in one atomic step.
    pub(crate) fn activate(mut self) -> Lease {
        let slot = self.slot.take().expect("a reservation is activated once");
        slot.load.fetch_add(ACTIVE_ONE - 1, Ordering::AcqRel);
        Lease { slot }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.load.fetch_sub(1, Ordering::SeqCst);
            slot.freed.freed();
        }
    }
}

/// An active use (a request in flight or a tunnel open); dropping it ends the use.
#[derive(Debug)]
pub(crate) struct Lease {
    slot: Arc<ProxySlot>,
}

impl Lease {
    pub(crate) fn slot(&self) -> &Arc<ProxySlot> {
        &self.slot
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.slot.load.fetch_sub(ACTIVE_ONE, Ordering::SeqCst);
        self.slot.freed.freed();
    }
}

/// The registry tracked proxies live in (current snapshot + draining). Only the control
/// loop touches it; the hot path holds `Arc<ProxySlot>`s from the view.
#[derive(Debug)]
pub(crate) struct CapacityRegistry {
    tracked: Mutex<HashMap<ProxyId, Tracked>>,
    cap: usize,
    freed: Arc<FreedSignal>,
    /// Shards of each new slot's upstream pool: one per I/O thread.
    pool_shards: AtomicUsize,
}

#[derive(Debug)]
struct Tracked {
    slot: Arc<ProxySlot>,
    /// `None` while the current snapshot lists the proxy.
    removed_at: Option<Instant>,
}

/// Applying the snapshot would track more proxies than allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("tracking {needed} proxies would exceed the cap of {cap}")]
pub(crate) struct RegistryFull {
    pub needed: usize,
    pub cap: usize,
}

impl CapacityRegistry {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            tracked: Mutex::new(HashMap::new()),
            cap,
            freed: Arc::default(),
            pool_shards: AtomicUsize::new(1),
        }
    }

    /// Gives every slot made from now on `shards` upstream pool shards (set at bind, before
    /// the first snapshot).
    pub(crate) fn set_pool_shards(&self, shards: usize) {
        self.pool_shards.store(shards.max(1), Ordering::Relaxed);
    }

    /// The signal every slot of this registry rings when it frees a use.
    pub(crate) fn freed(&self) -> Arc<FreedSignal> {
        Arc::clone(&self.freed)
    }

    /// What [`prepare`](Self::prepare) does for a delta: the slots of the proxies it adds
    /// (existing counters kept), the ones it removes marked as removed, the cap checked for
    /// `listed` proxies in all. Nothing changes when the cap would be exceeded. Costs one
    /// pass over the tracked entries (no copy of the listing).
    pub(crate) fn prepare_changes(
        &self,
        added: &[&ProxyId],
        removed: &[&ProxyId],
        listed: usize,
    ) -> Result<Vec<Arc<ProxySlot>>, RegistryFull> {
        let now = Instant::now();
        let mut tracked = self.tracked.lock_or_recover();
        prune(&mut tracked, now);
        let going: std::collections::HashSet<&ProxyId> = removed.iter().copied().collect();
        let coming: std::collections::HashSet<&ProxyId> = added.iter().copied().collect();
        let busy_removed = tracked
            .iter()
            .filter(|(id, entry)| {
                !coming.contains(id)
                    && (entry.removed_at.is_some() || going.contains(id))
                    && entry.slot.load().total() > 0
            })
            .count();
        let needed = listed + busy_removed;
        if needed > self.cap {
            return Err(RegistryFull {
                needed,
                cap: self.cap,
            });
        }
        for id in removed {
            if let Some(entry) = tracked.get_mut(*id)
                && entry.removed_at.is_none()
            {
                entry.removed_at = Some(now);
            }
        }
        if tracked.len() + added.len() > self.cap {
            // Idle removed proxies go before their grace ends rather than break the cap.
            tracked.retain(|id, entry| {
                entry.removed_at.is_none() || coming.contains(id) || entry.slot.load().total() > 0
            });
        }
        let pool_shards = self.pool_shards.load(Ordering::Relaxed);
        Ok(added
            .iter()
            .map(|id| {
                let entry = tracked.entry((*id).clone()).or_insert_with(|| Tracked {
                    slot: Arc::new(ProxySlot::with_signal(Arc::clone(&self.freed), pool_shards)),
                    removed_at: None,
                });
                entry.removed_at = None;
                Arc::clone(&entry.slot)
            })
            .collect())
    }

    /// The slots for a new snapshot's proxies (existing counters kept), marking proxies
    /// no longer listed as removed. Nothing changes when the cap would be exceeded.
    pub(crate) fn prepare(&self, ids: &[&ProxyId]) -> Result<Vec<Arc<ProxySlot>>, RegistryFull> {
        let now = Instant::now();
        let mut tracked = self.tracked.lock_or_recover();
        prune(&mut tracked, now);
        let listed: std::collections::HashSet<&ProxyId> = ids.iter().copied().collect();
        let busy_removed = tracked
            .iter()
            .filter(|(id, entry)| !listed.contains(id) && entry.slot.load().total() > 0)
            .count();
        let needed = listed.len() + busy_removed;
        if needed > self.cap {
            return Err(RegistryFull {
                needed,
                cap: self.cap,
            });
        }
        for (id, entry) in tracked.iter_mut() {
            if listed.contains(id) {
                entry.removed_at = None;
            } else if entry.removed_at.is_none() {
                entry.removed_at = Some(now);
            }
        }
        if tracked.len() + listed.len() > self.cap {
            // Idle removed proxies go before their grace ends rather than break the cap.
            tracked.retain(|id, entry| listed.contains(id) || entry.slot.load().total() > 0);
        }
        let pool_shards = self.pool_shards.load(Ordering::Relaxed);
        Ok(ids
            .iter()
            .map(|id| {
                let entry = tracked.entry((*id).clone()).or_insert_with(|| Tracked {
                    slot: Arc::new(ProxySlot::with_signal(Arc::clone(&self.freed), pool_shards)),
                    removed_at: None,
                });
                entry.removed_at = None;
                Arc::clone(&entry.slot)
            })
            .collect())
    }

    /// The sparse runtime entries: every tracked proxy with a non-zero count; removed ones
    /// are flagged draining. Also forgets removed proxies that are idle past the grace.
    pub(crate) fn runtime_entries(&self) -> Vec<ProxyRuntime> {
        let mut tracked = self.tracked.lock_or_recover();
        prune(&mut tracked, Instant::now());
        let mut entries: Vec<ProxyRuntime> = tracked
            .iter()
            .filter_map(|(id, entry)| {
                let load = entry.slot.load();
                (load.total() > 0).then(|| ProxyRuntime {
                    proxy_id: id.clone(),
                    active: load.active,
                    reserved: load.reserved,
                    draining: entry.removed_at.is_some(),
                })
            })
            .collect();
        entries.sort_by(|a, b| a.proxy_id.cmp(&b.proxy_id));
        entries
    }

    /// Every tracked proxy's slot (current and draining), copied out of the lock.
    pub(crate) fn slots(&self) -> Vec<(ProxyId, Arc<ProxySlot>)> {
        self.tracked
            .lock_or_recover()
            .iter()
            .map(|(id, entry)| (id.clone(), Arc::clone(&entry.slot)))
            .collect()
    }

    /// The slot of a tracked proxy.
    pub(crate) fn slot(&self, id: &ProxyId) -> Option<Arc<ProxySlot>> {
        self.tracked
            .lock_or_recover()
            .get(id)
            .map(|entry| Arc::clone(&entry.slot))
    }

    /// How many proxies are tracked (current + draining).
    pub(crate) fn len(&self) -> usize {
        self.tracked.lock_or_recover().len()
    }
}

fn prune(tracked: &mut HashMap<ProxyId, Tracked>, now: Instant) {
    tracked.retain(|_, entry| match entry.removed_at {
        None => true,
        Some(at) => entry.slot.load().total() > 0 || now.duration_since(at) < REMOVAL_GRACE,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ProxyId {
        ProxyId::new(format!("{n:032x}")).unwrap()
    }

    #[test]
    fn reserve_activate_release_is_exact() {
        let slot = Arc::new(ProxySlot::default());
        let first = slot.try_reserve(2).unwrap();
        let second = slot.try_reserve(2).unwrap();
        assert!(slot.try_reserve(2).is_none(), "full at max_sessions");
        assert_eq!(
            slot.load(),
            Load {
                active: 0,
                reserved: 2
            }
        );
        let lease = first.activate();
        assert_eq!(
            slot.load(),
            Load {
                active: 1,
                reserved: 1
            }
        );
        drop(second);
        drop(lease);
        assert_eq!(slot.load().total(), 0);
    }

    #[test]
    fn failures_cool_down_and_reset() {
        let slot = ProxySlot::default();
        slot.record_failure(1_000);
        slot.record_failure(1_000);
        assert!(!slot.is_cooling_down(3, 500, 1_100));
        slot.record_failure(1_000);
        assert!(slot.is_cooling_down(3, 500, 1_100));
        assert!(!slot.is_cooling_down(3, 500, 1_600), "cooldown over");
        slot.record_success();
        assert!(!slot.is_cooling_down(3, 500, 1_100));
    }

    #[test]
    fn registry_keeps_counters_and_reports_draining() {
        let registry = CapacityRegistry::new(10);
        let (a, b) = (id(1), id(2));
        let slots = registry.prepare(&[&a, &b]).unwrap();
        let lease = slots[0].try_reserve(5).unwrap().activate();
        let again = registry.prepare(&[&a]).unwrap();
        assert!(
            Arc::ptr_eq(&again[0], &slots[0]),
            "same counters across snapshots"
        );
        assert_eq!(
            registry.runtime_entries(),
            vec![ProxyRuntime {
                proxy_id: a.clone(),
                active: 1,
                reserved: 0,
                draining: false
            }]
        );
        registry.prepare(&[&b]).unwrap();
        let entries = registry.runtime_entries();
        assert_eq!(entries.len(), 1);
        assert!(entries[0].draining, "removed while busy: draining");
        drop(lease);
        assert!(registry.runtime_entries().is_empty());
    }

    #[test]
    fn a_delta_keeps_counters_marks_removals_and_counts_busy_removed_against_the_cap() {
        let registry = CapacityRegistry::new(3);
        let (a, b, c, d) = (id(1), id(2), id(3), id(4));
        let slots = registry.prepare(&[&a, &b]).unwrap();
        let busy = slots[1].try_reserve(5).unwrap().activate();
        // b goes while busy: it drains, and still takes a place under the cap.
        let added = registry.prepare_changes(&[&c], &[&b], 2).unwrap();
        assert_eq!(added.len(), 1);
        let entries = registry.runtime_entries();
        assert!(entries.iter().any(|e| e.proxy_id == b && e.draining));
        assert!(
            registry.prepare_changes(&[&d], &[], 3).is_err(),
            "3 listed + 1 draining is past the cap of 3"
        );
        assert!(
            registry.slot(&d).is_none(),
            "a refused delta changed nothing"
        );
        drop(busy);
        let again = registry.prepare_changes(&[&d], &[], 3).unwrap();
        assert_eq!(again.len(), 1);
        // a was never touched: the same counters.
        assert!(Arc::ptr_eq(&registry.slot(&a).unwrap(), &slots[0]));
    }

    #[test]
    fn registry_refuses_past_its_cap_without_change() {
        let registry = CapacityRegistry::new(2);
        let ids: Vec<ProxyId> = (1..=3).map(id).collect();
        let refs: Vec<&ProxyId> = ids.iter().collect();
        assert!(registry.prepare(&refs).is_err());
        assert_eq!(registry.len(), 0);
        let slots = registry.prepare(&refs[..2]).unwrap();
        let _busy = slots[0].try_reserve(1).unwrap();
        // ids[0] is busy and would be draining: 2 listed + 1 draining > 2.
        assert!(registry.prepare(&refs[1..]).is_err());
    }
}
