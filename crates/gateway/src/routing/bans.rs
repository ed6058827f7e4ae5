//! Ban-aware routing: cooldowns per (proxy, registrable domain) on this gateway.
//!
//! A proxy that a site banned is kept off that site's domain, and only that one
//! (`proxypool_core::cooldown`). Three sources feed the same per-proxy table
//! (`DomainCooldowns` in [`crate::proxies::cooldowns`], on the proxy's slot, so it outlives views): bans this gateway saw
//! (an origin answering a ban status to a plain-HTTP request), the cluster's cooldowns the
//! controller ships in every snapshot, and client feedback on this gateway's sticky
//! sessions. What this gateway learns itself goes into the [`BanLedger`] and leaves with
//! the next runtime report, so the store merges it and every other gateway's next
//! snapshot carries it.
//!
//! This module is the gateway-wide side: recording a ban seen on an answer, applying
//! session feedback to the session's pinned proxy, and the ledger for the reports.

use crate::metrics::GatewayMetrics;
use crate::routing::sticky::StickyTable;
use crate::snapshot::{SnapshotView, ViewProxy};
use proxypool_core::cooldown::MAX_COOLDOWN_CHANGES;
use proxypool_core::{
    CooldownChange, CooldownKey, Domain, DomainCooldown, LockExt, SessionFeedback, UnixMillis,
};
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Cooldown changes this gateway made since the store last took them, oldest first, and
/// the ones the store took that a snapshot may not show yet.
///
/// A snapshot is the authority for the cooldowns of the proxies it lists (a clear in the
/// store must leave every gateway), so what this gateway made itself is laid over each
/// shipped table ([`BanLedger::overlay`]) until a snapshot can be trusted to show it: while
/// it waits for a report, and after the report was taken for one more snapshot (the one
/// the controller may have been building while the report landed). The snapshot after that
/// was built from a store that had the change, and from then on it alone decides, clears
/// included.
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
    /// Changes the store took, with whether a snapshot was applied since; dropped at the
    /// second snapshot after their report.
    taken: Vec<(bool, CooldownChange)>,
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
            if let Some((_, change)) = pending.changes.pop_front() {
                pending.taken.push((false, change));
            }
        }
        // Bounded like the queue: the oldest taken ones are the likeliest in a snapshot.
        let excess = pending.taken.len().saturating_sub(MAX_COOLDOWN_CHANGES);
        pending.taken.drain(..excess);
    }

    /// A snapshot is being applied: the changes to lay over its cooldowns, oldest first
    /// (taken ones, then the queue). Taken changes that already outlived one snapshot are
    /// forgotten first: this snapshot shows them, or shows that they were cleared since.
    pub(crate) fn overlay(&self) -> Vec<CooldownChange> {
        let mut pending = self.pending.lock_or_recover();
        pending.taken.retain(|(seen, _)| !seen);
        for (seen, _) in &mut pending.taken {
            *seen = true;
        }
        let pending = &*pending;
        pending
            .taken
            .iter()
            .map(|(_, c)| c.clone())
            .chain(pending.changes.iter().map(|(_, c)| c.clone()))
            .collect()
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
    /// from what is known of it) and queue the entry for the store. What the gateway sees
    /// itself is a fact about the proxy, so the entry is shared.
    pub(crate) fn ban(
        &self,
        view: &SnapshotView,
        proxy: &ViewProxy,
        domain: &Domain,
        now_ms: UnixMillis,
        metrics: &GatewayMetrics,
    ) -> DomainCooldown {
        let previous = proxy.slot.domains.get(domain, None, now_ms);
        let key = CooldownKey::shared(proxy.id.clone(), domain.clone());
        let entry = view
            .cooldown_policy
            .ban(key, previous.as_ref(), None, now_ms);
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
        // Into the ledger first: a snapshot applied in between lays it over its table.
        if self.ledger.push(change.clone()) {
            metrics.cooldown_changes_dropped.increment(1);
        }
        proxy.slot.domains.apply(&[&change], now_ms);
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
            for proxy in pinned_proxies(view, sticky, feedback, now_ms) {
                // In the scope the API gave it: the reporting client's project, or shared.
                let scope = feedback.project.as_ref();
                let previous = proxy.slot.domains.get(&feedback.domain, scope, now_ms);
                let key = CooldownKey {
                    proxy_id: proxy.id.clone(),
                    domain: feedback.domain.clone(),
                    project: feedback.project.clone(),
                };
                let change = feedback.verdict.change(
                    &view.cooldown_policy,
                    key,
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

/// The proxies the session is pinned to: one, or one per set of geo selectors it was
/// used with (each such set is a session of its own, under the one id feedback names).
fn pinned_proxies<'v>(
    view: &'v SnapshotView,
    sticky: &StickyTable,
    feedback: &SessionFeedback,
    now_ms: UnixMillis,
) -> Vec<&'v ViewProxy> {
    let mut proxies: Vec<&ViewProxy> = Vec::new();
    for pin in sticky.session_pins(feedback.client.as_str(), &feedback.session, now_ms) {
        let Some(proxy) = view
            .index_of(&pin.proxy)
            .and_then(|i| view.proxies.get(i as usize))
        else {
            continue;
        };
        if !proxies.iter().any(|p| p.id == proxy.id) {
            proxies.push(proxy);
        }
    }
    proxies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxies::cooldowns::tests::entry;

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

    #[test]
    fn a_taken_change_is_laid_over_one_snapshot_and_not_the_next() {
        let ledger = BanLedger::default();
        ledger.push(CooldownChange::Set(entry("a.test", 1)));
        // Not yet reported: over every snapshot.
        assert_eq!(ledger.overlay().len(), 1);
        assert_eq!(ledger.overlay().len(), 1);
        let batch = ledger.batch();
        ledger.confirm(&batch);
        // Taken: over the next snapshot only (it may have been built before the report).
        assert_eq!(ledger.overlay().len(), 1);
        assert!(ledger.overlay().is_empty());
    }
}
