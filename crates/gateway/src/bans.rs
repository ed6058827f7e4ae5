//! Ban-aware routing: cooldowns per (proxy, registrable domain) on this gateway.
//!
//! A proxy that a site banned is kept off that site's domain, and only that one
//! (`proxypool_core::cooldown`). Three sources feed the same per-proxy table
//! ([`DomainCooldowns`], on the proxy's slot, so it outlives views): bans this gateway saw
//! (an origin answering a ban status to a plain-HTTP request), the cluster's cooldowns the
//! controller ships in every snapshot, and client feedback on this gateway's sticky
//! sessions. What this gateway learns itself goes into the [`BanLedger`] and leaves with
//! the next runtime report, so the store merges it and every other gateway's next
//! snapshot carries it.
//!
//! On the hot path a pick asks each candidate "cooling for this domain?": one atomic load
//! when the proxy has no cooldown still running, a short lock of its few entries otherwise.

use crate::metrics::GatewayMetrics;
use crate::snapshot::{SnapshotView, ViewProxy};
use crate::sticky::StickyTable;
use proxypool_core::cooldown::{MAX_COOLDOWN_CHANGES, merge_cooldowns};
use proxypool_core::{
    CooldownChange, Domain, DomainCooldown, LockExt, SessionFeedback, UnixMillis,
};
use proxypool_proto::TargetAddr;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A request's target domain, found only when something needs it (a pick that meets a
/// proxy with a cooldown running, or a ban): most requests never pay for the public
/// suffix look-up.
#[derive(Debug)]
pub(crate) struct TargetDomain<'t> {
    target: &'t TargetAddr,
    domain: OnceLock<Option<Domain>>,
}

impl<'t> TargetDomain<'t> {
    pub(crate) fn new(target: &'t TargetAddr) -> Self {
        Self {
            target,
            domain: OnceLock::new(),
        }
    }

    /// The registrable domain; `None` for a host that is not a valid name.
    pub(crate) fn get(&self) -> Option<&Domain> {
        self.domain
            .get_or_init(|| match self.target {
                TargetAddr::Ip(addr) => Some(Domain::of_ip(addr.ip())),
                TargetAddr::Domain(host, _) => Domain::of_host(host),
            })
            .as_ref()
    }
}

/// Origin statuses that mean a ban, as a set of the 4xx and 5xx codes (a copy per request
/// costs nothing, a look-up one shift).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BanStatuses([u64; 4]);

impl BanStatuses {
    pub(crate) fn of(statuses: &[u16]) -> Self {
        let mut bits = [0u64; 4];
        for status in statuses.iter().filter(|s| (400..600).contains(*s)) {
            let i = usize::from(status - 400);
            bits[i / 64] |= 1 << (i % 64);
        }
        BanStatuses(bits)
    }

    pub(crate) fn contains(&self, status: u16) -> bool {
        (400..600).contains(&status) && {
            let i = usize::from(status - 400);
            self.0[i / 64] & (1 << (i % 64)) != 0
        }
    }
}

/// One proxy's cooldowns, by domain.
#[derive(Debug, Default)]
pub(crate) struct DomainCooldowns {
    /// The latest `until_ms` of the entries: at or after it nothing is cooling, and a pick
    /// needs no lock.
    cooling_until: AtomicU64,
    entries: Mutex<Vec<DomainCooldown>>,
}

impl DomainCooldowns {
    /// Whether the proxy must not be used for the target's domain at `now_ms`.
    pub(crate) fn is_cooling(&self, target: &TargetDomain<'_>, now_ms: UnixMillis) -> bool {
        if now_ms >= self.cooling_until.load(Ordering::Acquire) {
            return false;
        }
        let Some(domain) = target.get() else {
            return false;
        };
        self.entries
            .lock_or_recover()
            .iter()
            .any(|e| &e.domain == domain && e.is_cooling(now_ms))
    }

    /// The remembered entry for `domain`, if any.
    pub(crate) fn get(&self, domain: &Domain, now_ms: UnixMillis) -> Option<DomainCooldown> {
        self.entries
            .lock_or_recover()
            .iter()
            .find(|e| &e.domain == domain && e.forget_at_ms > now_ms)
            .cloned()
    }

    /// Merges `changes` by the store's rule (so every gateway and the store agree).
    pub(crate) fn apply(&self, changes: &[&CooldownChange], now_ms: UnixMillis) {
        let mut entries = self.entries.lock_or_recover();
        merge_cooldowns(&mut entries, changes, now_ms);
        let latest = entries.iter().map(|e| e.until_ms).max().unwrap_or(0);
        self.cooling_until.store(latest, Ordering::Release);
    }

    /// Entries still cooling at `now_ms` (for `/status` and tests).
    pub(crate) fn cooling(&self, now_ms: UnixMillis) -> Vec<DomainCooldown> {
        self.entries
            .lock_or_recover()
            .iter()
            .filter(|e| e.is_cooling(now_ms))
            .cloned()
            .collect()
    }
}

/// Cooldown changes this gateway made since the store last took them, oldest first.
///
/// Bounded: beyond [`MAX_COOLDOWN_CHANGES`] (what one report may carry) the oldest are
/// dropped and counted; the local table still has them, only other gateways learn less.
#[derive(Debug, Default)]
pub(crate) struct BanLedger {
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    changes: VecDeque<(u64, CooldownChange)>,
    next_seq: u64,
}

/// What one report takes from the ledger.
#[derive(Debug, Default)]
pub(crate) struct LedgerBatch {
    pub changes: Vec<CooldownChange>,
    /// Confirming it removes every change up to this one.
    upto: Option<u64>,
}

impl BanLedger {
    /// Queues a change; returns whether an old one had to be dropped for it.
    fn push(&self, change: CooldownChange) -> bool {
        let mut pending = self.pending.lock_or_recover();
        let seq = pending.next_seq;
        pending.next_seq += 1;
        pending.changes.push_back((seq, change));
        if pending.changes.len() > MAX_COOLDOWN_CHANGES {
            pending.changes.pop_front();
            return true;
        }
        false
    }

    /// The changes to send in the next report (all of them: the ledger never holds more
    /// than one report carries).
    pub(crate) fn batch(&self) -> LedgerBatch {
        let pending = self.pending.lock_or_recover();
        LedgerBatch {
            changes: pending.changes.iter().map(|(_, c)| c.clone()).collect(),
            upto: pending.changes.back().map(|(seq, _)| *seq),
        }
    }

    /// The store took `batch`: forget what it carried (changes queued since stay).
    pub(crate) fn confirm(&self, batch: &LedgerBatch) {
        let Some(upto) = batch.upto else { return };
        let mut pending = self.pending.lock_or_recover();
        while pending.changes.front().is_some_and(|(seq, _)| *seq <= upto) {
            pending.changes.pop_front();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.lock_or_recover().changes.len()
    }
}

/// The gateway's ban state besides the per-proxy tables: the ledger for the reports and
/// the session feedback already applied.
#[derive(Debug, Default)]
pub(crate) struct Bans {
    pub(crate) ledger: BanLedger,
    /// Ids of session feedback applied, pruned to those the latest snapshot still lists.
    applied_feedback: Mutex<HashSet<String>>,
}

impl Bans {
    /// The origin banned `proxy` for `domain`: cool it down locally at once (strikes grow
    /// from what is known of it) and queue the entry for the store.
    pub(crate) fn ban(
        &self,
        view: &SnapshotView,
        proxy: &ViewProxy,
        domain: &Domain,
        now_ms: UnixMillis,
        metrics: &GatewayMetrics,
    ) -> DomainCooldown {
        let previous = proxy.slot.domains.get(domain, now_ms);
        let entry = view.cooldown_policy.ban(
            proxy.id.clone(),
            domain.clone(),
            previous.as_ref(),
            None,
            now_ms,
        );
        metrics.bans.increment(1);
        self.record(proxy, CooldownChange::Set(entry.clone()), now_ms, metrics);
        entry
    }

    fn record(
        &self,
        proxy: &ViewProxy,
        change: CooldownChange,
        now_ms: UnixMillis,
        metrics: &GatewayMetrics,
    ) {
        proxy.slot.domains.apply(&[&change], now_ms);
        if self.ledger.push(change) {
            metrics.cooldown_changes_dropped.increment(1);
        }
    }

    /// Applies the feedback on sessions this gateway holds that it has not applied yet:
    /// the verdict becomes a change on the session's pinned proxy (sent on in the next
    /// report). A banned session then moves off the proxy on its next request to that
    /// domain, because the pinned proxy is no longer eligible for it.
    pub(crate) fn apply_session_feedback(
        &self,
        view: &SnapshotView,
        sticky: &StickyTable,
        now_ms: UnixMillis,
        metrics: &GatewayMetrics,
    ) {
        let mut applied = self.applied_feedback.lock_or_recover();
        applied.retain(|id| view.session_feedback.iter().any(|f| &f.id == id));
        for feedback in &view.session_feedback {
            if feedback.expires_at_ms <= now_ms || applied.contains(&feedback.id) {
                continue;
            }
            applied.insert(feedback.id.clone());
            if let Some(proxy) = pinned_proxy(view, sticky, feedback, now_ms) {
                let previous = proxy.slot.domains.get(&feedback.domain, now_ms);
                let change = feedback.verdict.change(
                    &view.cooldown_policy,
                    proxy.id.clone(),
                    feedback.domain.clone(),
                    previous.as_ref(),
                    feedback.ttl_ms,
                    now_ms,
                );
                metrics.session_feedback_applied.increment(1);
                self.record(proxy, change, now_ms, metrics);
            }
        }
    }
}

fn pinned_proxy<'v>(
    view: &'v SnapshotView,
    sticky: &StickyTable,
    feedback: &SessionFeedback,
    now_ms: UnixMillis,
) -> Option<&'v ViewProxy> {
    let pin = sticky.get(feedback.client.as_str(), &feedback.session, now_ms)?;
    let index = view.index_of(&pin.proxy)?;
    view.proxies.get(index as usize)
}

/// Merges the cluster's cooldowns from a snapshot into the slots of the proxies it names.
pub(crate) fn merge_shipped(
    cooldowns: &[DomainCooldown],
    slot_of: impl Fn(&proxypool_core::ProxyId) -> Option<std::sync::Arc<crate::capacity::ProxySlot>>,
    now_ms: UnixMillis,
) {
    let mut start = 0;
    // Entries come sorted by proxy: one lock per proxy.
    while start < cooldowns.len() {
        let proxy = &cooldowns[start].proxy_id;
        let end = start
            + cooldowns[start..]
                .iter()
                .take_while(|e| &e.proxy_id == proxy)
                .count();
        if let Some(slot) = slot_of(proxy) {
            let changes: Vec<CooldownChange> = cooldowns[start..end]
                .iter()
                .cloned()
                .map(CooldownChange::Set)
                .collect();
            let refs: Vec<&CooldownChange> = changes.iter().collect();
            slot.domains.apply(&refs, now_ms);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::ProxyId;

    fn entry(domain: &str, until_ms: u64) -> DomainCooldown {
        DomainCooldown {
            proxy_id: ProxyId::new("0123456789abcdef0123456789abcdef").unwrap(),
            domain: Domain::new(domain).unwrap(),
            until_ms,
            strikes: 1,
            forget_at_ms: until_ms + 1_000,
        }
    }

    #[test]
    fn a_cooldown_holds_for_its_domain_only_and_until_its_end() {
        let table = DomainCooldowns::default();
        let a = Domain::new("a.test").unwrap();
        let (target_a, target_b) = (
            TargetAddr::domain("www.a.test", 80).unwrap(),
            TargetAddr::domain("b.test", 80).unwrap(),
        );
        let (on_a, on_b) = (TargetDomain::new(&target_a), TargetDomain::new(&target_b));
        assert!(!table.is_cooling(&on_a, 0));
        table.apply(&[&CooldownChange::Set(entry("a.test", 500))], 0);
        assert!(table.is_cooling(&on_a, 499));
        assert!(!table.is_cooling(&on_b, 499));
        assert!(!table.is_cooling(&on_a, 500));
        // Remembered past the end (strikes), forgotten after.
        assert!(table.get(&a, 1_000).is_some());
        assert!(table.get(&a, 1_500).is_none());
    }

    #[test]
    fn ban_statuses_are_a_set_of_error_codes() {
        let statuses = BanStatuses::of(&[403, 429, 599, 200, 600]);
        let cases = [
            (403, true),
            (429, true),
            (599, true),
            (404, false),
            (200, false),
            (600, false),
        ];
        for (status, banned) in cases {
            assert_eq!(statuses.contains(status), banned, "{status}");
        }
        assert!(!BanStatuses::of(&[]).contains(403));
    }

    #[test]
    fn the_ledger_keeps_what_was_queued_after_a_batch_was_taken() {
        let ledger = BanLedger::default();
        ledger.push(CooldownChange::Set(entry("a.test", 1)));
        let batch = ledger.batch();
        ledger.push(CooldownChange::Set(entry("b.test", 1)));
        ledger.confirm(&batch);
        let rest = ledger.batch();
        assert_eq!(rest.changes.len(), 1);
        assert_eq!(rest.changes[0].proxy_id().as_str().len(), 32);
        ledger.confirm(&rest);
        assert_eq!(ledger.len(), 0);
        // Confirming an empty batch changes nothing.
        ledger.confirm(&LedgerBatch::default());
        for i in 0..=MAX_COOLDOWN_CHANGES {
            ledger.push(CooldownChange::Set(entry("c.test", i as u64)));
        }
        assert_eq!(ledger.len(), MAX_COOLDOWN_CHANGES);
    }
}
