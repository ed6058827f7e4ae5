//! [`ControlLoop`]: keeps a controller session and the local snapshot current.
//!
//! Register → (long-poll snapshots ∥ post runtime reports) until the controller says the
//! session is fenced (register again with a new id) or the gateway stops (the caller then
//! ends the session). Unreachable controller: back off and retry; the hot path keeps
//! serving from the last snapshot until the store's staleness rule refuses traffic, each
//! proxy only until its lease ends ([`crate::proxies::cutoff`]). A report's answer naming proxies
//! the store no longer has this worker owning (`stale_proxies`) closes what is open through
//! them at once.
//!
//! With a fleet listener, every report names it (the endpoint peers dial, and the pin),
//! every report's answer replaces the fleet's member list, and a request for a fresh list
//! (`FleetView::refresh_now`) is answered from `GET /control/v1/fleet` at once. A failed
//! list fetch is logged and waited out: the list from the next report's answer serves.

use super::client::{ControlClient, ControlError};
use crate::fleet::Fleet;
use crate::metrics::GatewayMetrics;
use crate::routing::bans::Bans;
use crate::snapshot::SnapshotStore;
use crate::snapshot::store::Applying;
use crate::usage::UsageTable;
use proxypool_core::control::{RegisterSession, SessionGrant, SnapshotAck};
use proxypool_core::fleet::FleetMember;
use proxypool_core::{LockExt, ProxyId, RuntimeReport, SnapshotRef, WorkerId};
use proxypool_snapshot::{Applier, CONTROL_PROTOCOL, UpdateKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Pacing of retries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

/// The control loop of one gateway.
#[derive(Debug)]
pub(crate) struct ControlLoop {
    client: ControlClient,
    store: Arc<SnapshotStore>,
    /// Cooldown changes this gateway made, sent with the reports.
    bans: Arc<Bans>,
    metrics: Arc<GatewayMetrics>,
    /// Usage per (client, upstream), sent cumulatively in every report.
    usage: Arc<UsageTable>,
    worker: WorkerId,
    backoff: Backoff,
    /// Strictly increasing across every session of this process.
    sequence: AtomicU64,
    /// The current session id (for ending it on shutdown).
    session: Mutex<Option<String>>,
    /// The snapshot the current session acknowledged (reports name it).
    acked: Mutex<Option<SnapshotRef>>,
    /// This gateway's fleet membership, when it has a fleet listener.
    fleet: Option<Arc<Fleet>>,
}

enum Ended {
    Fenced,
    Stopped,
}

/// What one runtime report came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reported {
    Accepted,
    Failed,
    Fenced,
    /// No acknowledged snapshot yet: nothing was sent.
    Nothing,
}

impl ControlLoop {
    // Each is a separate handle the gateway's assembly already holds; a struct to carry
    // them would only be unpacked here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: ControlClient,
        store: Arc<SnapshotStore>,
        bans: Arc<Bans>,
        metrics: Arc<GatewayMetrics>,
        usage: Arc<UsageTable>,
        worker: WorkerId,
        backoff: Backoff,
        fleet: Option<Arc<Fleet>>,
    ) -> Self {
        Self {
            client,
            store,
            bans,
            metrics,
            usage,
            worker,
            backoff,
            sequence: AtomicU64::new(0),
            session: Mutex::new(None),
            acked: Mutex::new(None),
            fleet,
        }
    }

    /// The current session id, if registered.
    pub(crate) fn session_id(&self) -> Option<String> {
        self.session.lock_or_recover().clone()
    }

    /// Runs until `stop` turns true; returns the session id to end, if any.
    pub(crate) async fn run(&self, stop: watch::Receiver<bool>) -> Option<String> {
        tokio::select! {
            session = self.run_sessions(stop) => session,
            never = self.serve_fleet_refreshes() => match never {},
        }
    }

    /// Answers each request for a fresh fleet list with one `GET /control/v1/fleet`
    /// (requests are coalesced by the view); never returns. Without a fleet, waits forever.
    async fn serve_fleet_refreshes(&self) -> std::convert::Infallible {
        let Some(fleet) = &self.fleet else {
            return std::future::pending().await;
        };
        loop {
            fleet.view.refresh_wanted().await;
            match self.client.fleet().await {
                Ok(list) => apply_fleet(fleet, list.members),
                // The next report's answer brings the list anyway.
                Err(error) => tracing::debug!(%error, "fetching the fleet's members failed"),
            }
        }
    }

    async fn run_sessions(&self, mut stop: watch::Receiver<bool>) -> Option<String> {
        loop {
            let grant = tokio::select! {
                grant = self.register() => grant,
                _ = stop.wait_for(|s| *s) => return self.session_id(),
            };
            *self.acked.lock_or_recover() = None;
            let ended = tokio::select! {
                ended = self.poll_loop(&grant) => ended,
                ended = self.report_loop(&grant) => ended,
                _ = stop.wait_for(|s| *s) => Ended::Stopped,
            };
            match ended {
                Ended::Stopped => return self.session_id(),
                Ended::Fenced => {
                    tracing::warn!(worker = %self.worker, "control session fenced; registering again");
                    *self.session.lock_or_recover() = None;
                }
            }
        }
    }

    /// Registers with a fresh session id, retrying with backoff until it succeeds.
    async fn register(&self) -> SessionGrant {
        let mut delay = self.backoff.initial;
        loop {
            let request = RegisterSession {
                worker: self.worker.clone(),
                session_id: crate::session_id::new_session_id(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                protocol: CONTROL_PROTOCOL,
            };
            match self.client.register(&request).await {
                Ok(grant) => {
                    tracing::info!(worker = %self.worker, session = %grant.session_id, "control session registered");
                    self.store.bound_by_session(grant.expires_at_ms);
                    *self.session.lock_or_recover() = Some(grant.session_id.clone());
                    return grant;
                }
                Err(error @ ControlError::Protocol(_)) => {
                    tracing::error!(%error, "the controller and this gateway cannot work together");
                    tokio::time::sleep(self.backoff.max).await;
                }
                Err(error) => {
                    tracing::warn!(%error, "registering with the controller failed");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.backoff.max);
                }
            }
        }
    }

    async fn poll_loop(&self, grant: &SessionGrant) -> Ended {
        let wait = Duration::from_millis(grant.snapshot_wait_ms.max(1));
        let mut delay = self.backoff.initial;
        // What this session applied: the base of the next delta. Nothing held asks for the
        // whole snapshot (a new session, or an update that did not fit).
        let mut applier = Applier::new(self.worker.clone());
        let target = Applying {
            store: &self.store,
            local_cooldowns: || self.bans.ledger.overlay(),
        };
        loop {
            match self
                .client
                .poll_snapshot(&grant.session_id, applier.after_version(), wait)
                .await
            {
                Ok(Some(update)) => {
                    self.store.mark_fresh();
                    delay = self.backoff.initial;
                    let version = update.reference().version;
                    let outcome = applier.apply(update, &target);
                    if outcome.counted {
                        match outcome.kind {
                            UpdateKind::Whole => self.metrics.snapshot_wholes.increment(1),
                            UpdateKind::Delta => self.metrics.snapshot_deltas.increment(1),
                        }
                    }
                    match outcome.result {
                        Ok(reference) => {
                            self.metrics.snapshot_version.set(version as f64);
                            if let Some(view) = self.store.view() {
                                self.metrics.snapshot_proxies.set(view.proxies.len() as f64);
                            }
                            let ack = SnapshotAck {
                                session_id: grant.session_id.clone(),
                                snapshot: reference.clone(),
                            };
                            match self.client.ack(&ack).await {
                                Ok(()) => *self.acked.lock_or_recover() = Some(reference),
                                Err(ControlError::Fenced) => return Ended::Fenced,
                                Err(error) => {
                                    tracing::warn!(%error, version, "snapshot ack failed")
                                }
                            }
                        }
                        Err(error) if outcome.kind == UpdateKind::Delta => {
                            // A delta that did not fit: the next poll asks for it whole.
                            tracing::warn!(%error, version, "snapshot delta not applied; asking for the whole snapshot");
                        }
                        Err(error) => {
                            tracing::error!(%error, version, "snapshot rejected; keeping the previous one");
                            // The controller would hand the same snapshot straight back.
                            tokio::time::sleep(self.backoff.max).await;
                        }
                    }
                }
                Ok(None) => {
                    self.store.mark_fresh();
                    delay = self.backoff.initial;
                }
                Err(ControlError::Fenced) => return Ended::Fenced,
                // The client gave up a controller that stopped answering: ask the next now.
                Err(ControlError::Moved) => delay = self.backoff.initial,
                Err(error) => {
                    tracing::warn!(%error, "snapshot poll failed");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.backoff.max);
                }
            }
        }
    }

    async fn report_loop(&self, grant: &SessionGrant) -> Ended {
        let every = Duration::from_millis(grant.report_interval_ms.max(100));
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Some(age) = self.store.since_fresh_ms() {
                self.metrics.snapshot_age.set(age as f64 / 1000.0);
            }
            if self.report(&grant.session_id).await == Reported::Fenced {
                return Ended::Fenced;
            }
        }
    }

    /// Sends one runtime report of `session_id` (counts, and the usage totals), if a
    /// snapshot was acknowledged to report against.
    async fn report(&self, session_id: &str) -> Reported {
        let Some(snapshot) = self.acked.lock_or_recover().clone() else {
            return Reported::Nothing;
        };
        let cooldowns = self.bans.ledger.batch();
        let report = RuntimeReport {
            fleet: self.fleet.as_ref().map(|fleet| fleet.endpoint()),
            cooldowns: cooldowns.changes.clone(),
            worker: self.worker.clone(),
            session_id: session_id.to_owned(),
            sequence: self.sequence.fetch_add(1, Ordering::Relaxed) + 1,
            snapshot,
            entries: self.store.registry().runtime_entries(),
            usage: Some(self.usage.report()),
        };
        match self.client.report(&report).await {
            Ok(ack) => {
                self.metrics.reports_accepted.increment(1);
                self.bans.ledger.confirm(&cooldowns);
                self.store.mark_fresh();
                self.store.bound_by_session(ack.session_expires_at_ms);
                self.revoke(&ack.stale_proxies);
                if let Some(fleet) = &self.fleet {
                    apply_fleet(fleet, ack.fleet);
                }
                Reported::Accepted
            }
            Err(ControlError::Fenced) => {
                self.metrics.reports_failed.increment(1);
                Reported::Fenced
            }
            Err(error) => {
                self.metrics.reports_failed.increment(1);
                tracing::warn!(%error, sequence = report.sequence, "runtime report failed");
                Reported::Failed
            }
        }
    }

    /// Stops relaying through the proxies the store says this worker no longer owns (their
    /// lease lapsed there, or they moved on), logging each once.
    fn revoke(&self, stale: &[ProxyId]) {
        if stale.is_empty() {
            return;
        }
        for (proxy, slot) in self.store.revoke(stale) {
            tracing::warn!(
                %proxy,
                active = slot.load().active,
                "the store no longer has this worker owning the proxy; closing what is open through it"
            );
        }
    }

    /// The last report before a clean stop (after in-flight work finished), so the usage
    /// counted since the previous report reaches the store before the session ends.
    pub(crate) async fn final_report(&self, session_id: &str) {
        let reported = self.report(session_id).await;
        tracing::debug!(?reported, "final runtime report");
    }
}

/// Makes `members` the fleet's current list, and says when this gateway joins or leaves it
/// (it relays keys only while the list has it with its current pin).
fn apply_fleet(fleet: &Fleet, members: Vec<FleetMember>) {
    let was = fleet.view.includes_me();
    fleet.view.replace(members);
    match (was, fleet.view.includes_me()) {
        (false, true) => tracing::info!(
            members = fleet.view.current().list.len(),
            "the fleet's member list now has this gateway"
        ),
        (true, false) => tracing::warn!("the fleet's member list no longer has this gateway"),
        _ => {}
    }
}
