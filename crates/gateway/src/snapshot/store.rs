//! [`SnapshotStore`]: the current [`SnapshotView`], swapped atomically, and the staleness
//! rule that makes the gateway fail closed when the controller has been gone too long.
//!
//! Requests call [`SnapshotStore::current`] (one atomic load and a clock read). The control
//! loop's applier (`proxypool_snapshot::Applier`) decides how each update applies and
//! calls the store through [`Applying`], its `ApplyTarget`; the loop also calls
//! [`SnapshotStore::mark_fresh`]. A snapshot is the
//! authority for the cooldowns of the proxies it lists: a cooldown the store cleared or
//! shortened leaves this gateway with the next snapshot, while what the gateway saw itself
//! and the snapshot may not show yet is kept (the report ledger's overlay, handed in). Freshness is
//! the last time the controller answered (a snapshot, a "nothing new" long-poll or an
//! accepted report), not the snapshot's age: an unchanged snapshot from a reachable
//! controller is current.

use super::view::{Skipped, SnapshotView, ViewParts};
use crate::policy::limits::{ClientCounters, ClientLimiter, LimiterClock};
use crate::proxies::capacity::{CapacityRegistry, ProxySlot, RegistryFull};
use crate::refusal::Refusal;
use arc_swap::ArcSwapOption;
use proxypool_core::control::{GatewayClient, WorkerSnapshot};
use proxypool_core::{
    CooldownChange, DomainCooldown, LockExt, ProxyId, SharedClock, SnapshotRef, UnixMillis,
};
use proxypool_snapshot::{ApplyTarget, SnapshotContent, SnapshotDelta};
use proxypool_throttle::EngineOptions;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Why the store could not take a snapshot the applier accepted (the old view stays).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplyError {
    #[error(transparent)]
    RegistryFull(#[from] RegistryFull),
    #[error("client policies: {0}")]
    Limiter(String),
    #[error("there is no view to apply the delta to")]
    NoView,
}

/// The current view, its freshness and the counters that outlive views.
#[derive(Debug)]
pub(crate) struct SnapshotStore {
    view: ArcSwapOption<SnapshotView>,
    registry: CapacityRegistry,
    clients: ClientCounters,
    limiter: Mutex<Option<Arc<ClientLimiter>>>,
    limiter_options: EngineOptions,
    limiter_clock: LimiterClock,
    /// Monotonic: staleness is a local duration that must not jump with the wall clock.
    clock: SharedClock,
    /// `clock`'s monotonic milliseconds at the last controller answer, plus one (0 = never).
    fresh_at: AtomicU64,
    generation: AtomicU64,
    /// Bumped after every view swap, for waiters that react to a new snapshot (tunnels of
    /// a removed client).
    swaps: watch::Sender<u64>,
    /// The end of the worker's session as the controller last granted it
    /// ([`crate::proxies::cutoff::UNBOUNDED`] before the first): no lease outlives it here.
    session_end: AtomicU64,
}

impl SnapshotStore {
    pub(crate) fn new(
        max_tracked_proxies: usize,
        limiter_options: EngineOptions,
        limiter_clock: LimiterClock,
        clock: SharedClock,
    ) -> Self {
        Self {
            view: ArcSwapOption::empty(),
            registry: CapacityRegistry::new(max_tracked_proxies),
            clients: ClientCounters::default(),
            limiter: Mutex::new(None),
            limiter_options,
            limiter_clock,
            clock,
            fresh_at: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            swaps: watch::channel(0).0,
            session_end: AtomicU64::new(crate::proxies::cutoff::UNBOUNDED),
        }
    }

    /// The view to serve a new request from, or [`Refusal::Stale`] when there is none or
    /// the controller has not answered within the snapshot's `max_staleness_ms`.
    pub(crate) fn current(&self) -> Result<Arc<SnapshotView>, Refusal> {
        let view = self.view.load_full().ok_or(Refusal::Stale)?;
        match self.since_fresh_ms() {
            Some(age) if age <= view.max_staleness_ms => Ok(view),
            _ => Err(Refusal::Stale),
        }
    }

    /// The applied view regardless of staleness (admin and reports).
    /// Changes after every new snapshot view.
    pub(crate) fn swaps(&self) -> watch::Receiver<u64> {
        self.swaps.subscribe()
    }

    pub(crate) fn view(&self) -> Option<Arc<SnapshotView>> {
        self.view.load_full()
    }

    /// Milliseconds since the controller last answered; `None` before the first answer.
    pub(crate) fn since_fresh_ms(&self) -> Option<u64> {
        match self.fresh_at.load(Ordering::Acquire) {
            0 => None,
            at => Some(self.clock.monotonic_ms().saturating_sub(at - 1)),
        }
    }

    /// The controller answered: the current view is fresh again.
    pub(crate) fn mark_fresh(&self) {
        let now = self.clock.monotonic_ms().min(u64::MAX - 1);
        self.fresh_at.store(now + 1, Ordering::Release);
    }

    pub(crate) fn registry(&self) -> &CapacityRegistry {
        &self.registry
    }

    /// The session and reference of the view served now.
    fn serving(&self) -> Option<(String, SnapshotRef)> {
        self.view
            .load()
            .as_ref()
            .map(|view| (view.session_id.clone(), view.reference().as_ref().clone()))
    }

    /// Applies a delta that `content` already holds applied as a new view that keeps
    /// every unchanged proxy of the current one ([`SnapshotView::with_delta`]); the
    /// applier calls it only when the current view is the delta's base.
    fn change(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
        local_cooldowns: impl FnOnce() -> Vec<CooldownChange>,
    ) -> Result<SnapshotRef, ApplyError> {
        let current = self.view.load_full().ok_or(ApplyError::NoView)?;
        let limiter = self.limiter_for(content.clients())?;
        let added: Vec<&ProxyId> = delta.upsert.iter().map(|p| &p.id).collect();
        let removed: Vec<&ProxyId> = delta.remove.iter().collect();
        let slots = self
            .registry
            .prepare_changes(&added, &removed, content.proxy_count())?;
        // Nothing fails from here on (see `install`).
        let session_end = self.session_end();
        for (proxy, slot) in delta.upsert.iter().zip(&slots) {
            slot.cutoff.set_session_end(session_end);
            slot.cutoff
                .set_lease_end(proxy.lease_until_ms.min(proxy.usable_until_ms));
            slot.tickets.set_lease_epoch(proxy.epoch);
        }
        self.set_lease_ends(delta, content);
        // An added proxy's table is the content's entries (a slot kept from an earlier
        // listing may remember others), like every changed one's.
        let mut refreshed: Vec<&ProxyId> = delta.cooldowns.iter().map(|g| &g.proxy_id).collect();
        refreshed.extend(added.iter().copied());
        self.replace_cooldowns(&refreshed, content, local_cooldowns);
        let client_ids: Vec<_> = content.clients().iter().map(|c| &c.id).collect();
        let connections = self.clients.prepare(&client_ids);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (view, skipped) = current.with_delta(
            delta,
            content,
            ViewParts {
                slots,
                connections,
                limiter,
                generation,
            },
        );
        self.swap_in(view, &skipped);
        Ok(delta.reference.clone())
    }

    /// A delta's new lease ends of listed proxies and of draining ones, into their slots.
    fn set_lease_ends(&self, delta: &SnapshotDelta, content: &SnapshotContent) {
        for lease in &delta.leases {
            if let Some(slot) = self.registry.slot(&lease.id)
                && let Some(proxy) = content.proxy(&lease.id)
            {
                slot.cutoff
                    .set_lease_end(lease.lease_until_ms.min(proxy.usable_until_ms));
                // A lease taken anew (released, then leased to this gateway again) keeps
                // the view's entry but has a new epoch, which tickets must name.
                slot.tickets.set_lease_epoch(lease.epoch);
            }
        }
        for held in &delta.held {
            if content.proxy(&held.id).is_none()
                && let Some(slot) = self.registry.slot(&held.id)
            {
                slot.cutoff.set_lease_end(held.lease_until_ms);
            }
        }
    }

    /// Replaces the cooldown tables of `proxies` with the content's entries, the local
    /// changes laid over them.
    fn replace_cooldowns(
        &self,
        proxies: &[&ProxyId],
        content: &SnapshotContent,
        local_cooldowns: impl FnOnce() -> Vec<CooldownChange>,
    ) {
        if proxies.is_empty() {
            return;
        }
        let shipped: Vec<DomainCooldown> = proxies
            .iter()
            .flat_map(|id| content.cooldowns(id).iter().cloned())
            .collect();
        let slots: Vec<(&ProxyId, Arc<ProxySlot>)> = proxies
            .iter()
            .filter_map(|id| self.registry.slot(id).map(|slot| (*id, slot)))
            .collect();
        replace_shipped(
            &shipped,
            slots.iter().map(|(id, slot)| (*id, slot)),
            &local_cooldowns(),
            self.clock.now(),
        );
    }

    /// Applies a delta that moves only lease ends, draining leases and cooldowns of proxies
    /// the current view lists, to their slots, without a new view; the view then names
    /// the delta's version. The applier calls it only when the current view is the
    /// delta's base.
    fn patch(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
        local_cooldowns: impl FnOnce() -> Vec<CooldownChange>,
    ) -> SnapshotRef {
        self.set_lease_ends(delta, content);
        let changed: Vec<&ProxyId> = delta.cooldowns.iter().map(|g| &g.proxy_id).collect();
        self.replace_cooldowns(&changed, content, local_cooldowns);
        if let Some(view) = self.view.load().as_ref() {
            view.set_reference(delta.reference.clone());
            view.refresh_leases();
        }
        self.mark_fresh();
        delta.reference.clone()
    }

    /// Indexes and swaps in a snapshot whose content was checked (the applier checks it
    /// and that it is not older than the view served).
    pub(crate) fn install(
        &self,
        snapshot: WorkerSnapshot,
        local_cooldowns: impl FnOnce() -> Vec<CooldownChange>,
    ) -> Result<SnapshotRef, ApplyError> {
        let seen: HashSet<&ProxyId> = snapshot.proxies.iter().map(|p| &p.id).collect();
        let limiter = self.limiter_for(&snapshot.clients)?;
        let ids: Vec<&ProxyId> = snapshot.proxies.iter().map(|p| &p.id).collect();
        let slots = self.registry.prepare(&ids)?;
        // Nothing fails from here on. The new lease ends go into the slots before the view
        // swaps: the snapshot is the controller's word, also for the old view's requests.
        let session_end = self.session_end();
        for (proxy, slot) in snapshot.proxies.iter().zip(&slots) {
            slot.cutoff.set_session_end(session_end);
            slot.cutoff
                .set_lease_end(proxy.lease_until_ms.min(proxy.usable_until_ms));
            slot.tickets.set_lease_epoch(proxy.epoch);
        }
        // A draining proxy is not listed (nothing new may go through it), but its renewed
        // lease end is: what is still open through it may go on until then.
        for held in &snapshot.held {
            if !seen.contains(&held.id)
                && let Some(slot) = self.registry.slot(&held.id)
            {
                slot.cutoff.set_lease_end(held.lease_until_ms);
            }
        }
        // The snapshot decides the cooldowns of the proxies it lists (clears and shortenings
        // in the store included); what this gateway made and the store may not show yet is
        // laid over it.
        replace_shipped(
            &snapshot.advisories.cooldowns,
            snapshot.proxies.iter().map(|p| &p.id).zip(&slots),
            &local_cooldowns(),
            self.clock.now(),
        );
        let client_ids: Vec<_> = snapshot.clients.iter().map(|c| &c.id).collect();
        let connections = self.clients.prepare(&client_ids);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let reference = snapshot.reference.clone();
        let (view, skipped) = SnapshotView::build(
            snapshot,
            ViewParts {
                slots,
                connections,
                limiter,
                generation,
            },
        );
        self.swap_in(view, &skipped);
        Ok(reference)
    }

    /// Makes `view` the current one and tells the waiters of view swaps.
    fn swap_in(&self, view: SnapshotView, skipped: &Skipped) {
        for (id, why) in &skipped.proxies {
            tracing::warn!(proxy = %id, %why, "snapshot proxy cannot be dialed; skipped");
        }
        self.view.store(Some(Arc::new(view)));
        self.swaps
            .send_modify(|swaps| *swaps = swaps.wrapping_add(1));
        self.mark_fresh();
    }

    /// The client limiter for this snapshot's policies: the current one when unchanged
    /// (so buckets and lockouts survive), else a new one.
    fn limiter_for(&self, clients: &[GatewayClient]) -> Result<Arc<ClientLimiter>, ApplyError> {
        let mut specs: Vec<_> = clients
            .iter()
            .filter_map(|c| c.rate_limit.clone().map(|spec| (c.id.clone(), spec)))
            .collect();
        specs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut cached = self.limiter.lock_or_recover();
        if let Some(limiter) = cached.as_ref()
            && limiter.built_from(&specs)
        {
            return Ok(Arc::clone(limiter));
        }
        let limiter = ClientLimiter::build(
            specs,
            &self.limiter_options,
            Arc::clone(&self.limiter_clock),
        )
        .map_err(|error| ApplyError::Limiter(error.to_string()))?;
        for (client, why) in limiter.invalid() {
            tracing::warn!(%client, %why, "client rate-limit policy rejected; refusing the client");
        }
        let limiter = Arc::new(limiter);
        *cached = Some(Arc::clone(&limiter));
        Ok(limiter)
    }

    /// The controller granted (or renewed) the worker's session until `end_ms`: every
    /// proxy's cutoff is bounded by it from now on.
    pub(crate) fn bound_by_session(&self, end_ms: UnixMillis) {
        if self.session_end.swap(end_ms, Ordering::AcqRel) == end_ms {
            return;
        }
        for (_, slot) in self.registry.slots() {
            slot.cutoff.set_session_end(end_ms);
        }
        if let Some(view) = self.view.load().as_ref() {
            view.refresh_leases();
        }
    }

    /// See [`bound_by_session`](Self::bound_by_session).
    pub(crate) fn session_end(&self) -> UnixMillis {
        self.session_end.load(Ordering::Acquire)
    }

    /// The store answered that the worker no longer owns these proxies: closes what is open
    /// through each at once and keeps it out of picks until a snapshot renews its lease.
    /// Returns the ones that were still open (each revoked once).
    pub(crate) fn revoke(&self, proxies: &[ProxyId]) -> Vec<(ProxyId, Arc<ProxySlot>)> {
        let revoked: Vec<_> = proxies
            .iter()
            .filter_map(|id| self.registry.slot(id).map(|slot| (id.clone(), slot)))
            .filter(|(_, slot)| slot.revoke())
            .collect();
        if !revoked.is_empty()
            && let Some(view) = self.view.load().as_ref()
        {
            view.refresh_leases();
        }
        revoked
    }

    /// Sweeps the client limiter's idle keys (bounded).
    pub(crate) fn sweep_limiter(&self, max_evictions: usize) {
        let limiter = self.limiter.lock_or_recover().clone();
        if let Some(limiter) = limiter {
            limiter.sweep(max_evictions);
        }
    }
}

/// The store as the applier's target, with the cooldown changes this gateway made that a
/// snapshot may not show yet (the report ledger's overlay), asked only once a snapshot is
/// sure to be applied.
pub(crate) struct Applying<'a, F> {
    pub(crate) store: &'a SnapshotStore,
    pub(crate) local_cooldowns: F,
}

impl<F: Fn() -> Vec<CooldownChange>> ApplyTarget for Applying<'_, F> {
    type Error = ApplyError;

    fn serving(&self) -> Option<(String, SnapshotRef)> {
        self.store.serving()
    }

    fn install(&self, snapshot: WorkerSnapshot) -> Result<SnapshotRef, ApplyError> {
        self.store.install(snapshot, &self.local_cooldowns)
    }

    fn patch(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
    ) -> Result<SnapshotRef, ApplyError> {
        Ok(self.store.patch(delta, content, &self.local_cooldowns))
    }

    fn change(
        &self,
        delta: &SnapshotDelta,
        content: &SnapshotContent,
    ) -> Result<SnapshotRef, ApplyError> {
        self.store.change(delta, content, &self.local_cooldowns)
    }
}

impl<F> std::fmt::Debug for Applying<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applying").finish_non_exhaustive()
    }
}

/// Replaces the cooldown table of every listed proxy with the snapshot's entries for it
/// followed by the `local` changes on it (oldest first). A listed proxy the snapshot ships
/// no entry for ends up with the local ones only: the store has none.
pub(crate) fn replace_shipped<'a>(
    shipped: &[DomainCooldown],
    listed: impl Iterator<Item = (&'a ProxyId, &'a Arc<ProxySlot>)>,
    local: &[CooldownChange],
    now_ms: UnixMillis,
) {
    let mut changes: HashMap<&ProxyId, Vec<CooldownChange>> = HashMap::new();
    for entry in shipped {
        changes
            .entry(&entry.proxy_id)
            .or_default()
            .push(CooldownChange::Set(entry.clone()));
    }
    for change in local {
        changes
            .entry(change.proxy_id())
            .or_default()
            .push(change.clone());
    }
    for (id, slot) in listed {
        let refs: Vec<&CooldownChange> = changes.get(id).into_iter().flatten().collect();
        slot.domains.replace(&refs, now_ms);
    }
}
