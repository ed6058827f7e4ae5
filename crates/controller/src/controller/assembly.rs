//! [`Controller`]: the shared parts of a controller (store, clock, leadership, status
//! board, snapshot publisher) and the loops, router and views built from them.

use super::error::ControllerError;
use super::gateway_clients::gateway_clients;
use crate::api::{self, ControlState, WorkerTokens};
use crate::checker::Checker;
use crate::clock::{SharedClock, SystemClock};
use crate::config::{Config, ProviderKind};
use crate::leadership::Leadership;
use crate::maintenance::Sweeper;
use crate::metrics::metered::MeteredPool;
use crate::ownership::{ExtractionView, ExtractionWatch, OwnershipManager};
use crate::provider::status::UpstreamOverview;
use crate::provider::{Reconciler, SessionHealth, StatusBoard, VendorClient};
use crate::snapshot::{ChangeSignal, SnapshotPublisher};
use crate::store::{OpenedStore, StoreGuard, open_store, recovery_hold_ms};
use arc_swap::ArcSwap;
use axum::Router;
use proxypool_core::{ActivityPool, Expectation, StoreLedger, StoreStatus};
use std::sync::Arc;
use tokio::sync::Notify;

/// A configured controller, not yet running.
#[derive(Debug, Clone)]
pub struct Controller {
    // Swapped whole on a configuration reload ([`RunningController::apply`]).
    pub(super) config: Arc<ArcSwap<Config>>,
    pub(super) tokens: Arc<WorkerTokens>,
    pub(super) pool: Arc<dyn ActivityPool>,
    /// The same pool with every call timed (`crate::metrics::metered`): what the loops,
    /// the publisher and the control API use. [`Controller::pool`] hands out the plain one.
    pub(super) metered: Arc<dyn ActivityPool>,
    pub(super) leadership: Arc<dyn Leadership>,
    pub(super) clock: SharedClock,
    pub(super) board: Arc<StatusBoard>,
    pub(super) publisher: Arc<SnapshotPublisher>,
    pub(super) wake_ownership: Arc<Notify>,
    /// What the ownership manager's last round left for extraction.
    pub(super) extraction: Arc<ExtractionWatch>,
    /// Keeps the store the one the durable ledger remembers ([`Controller::guard_store`]).
    pub(super) guard: Option<StoreGuard>,
    /// The checker's failed checks of backconnect sessions, read by their reconcilers.
    pub(super) session_health: Arc<SessionHealth>,
    /// The gateway fleet's members, cached once per process for every control router.
    pub(super) fleet: Arc<crate::api::FleetCache>,
}

impl Controller {
    /// Opens the configured store and assembles the controller with the wall clock.
    pub async fn from_config(config: Config) -> Result<Controller, ControllerError> {
        let store = open_store(&config.store).await?;
        Ok(Controller::with_store(config, store, Arc::new(SystemClock)))
    }

    /// Assembles a controller over an already opened store and a clock (tests, or a
    /// process that shares one store between components).
    pub fn with_store(config: Config, store: OpenedStore, clock: SharedClock) -> Controller {
        // Before anything records: the recorder must be in place, and the help texts in it.
        crate::metrics::install();
        let metered: Arc<dyn ActivityPool> = Arc::new(MeteredPool::new(store.pool.clone()));
        let changes = ChangeSignal::default();
        let publisher = Arc::new(
            SnapshotPublisher::new(
                metered.clone(),
                clock.clone(),
                config.snapshot.clone(),
                gateway_clients(&config),
                config.cooldowns.policy(),
                changes,
            )
            .with_upstream_tls(crate::upstream_tls::shipped(&config.upstreams)),
        );
        Controller {
            tokens: Arc::new(WorkerTokens::new(config.worker_tokens.clone())),
            config: Arc::new(ArcSwap::from_pointee(config)),
            pool: store.pool,
            metered,
            leadership: store.leadership,
            clock,
            board: Arc::new(StatusBoard::default()),
            publisher,
            wake_ownership: Arc::new(Notify::new()),
            extraction: Arc::default(),
            guard: None,
            session_health: Arc::default(),
            fleet: Arc::default(),
        }
    }

    /// Guards the store's identity against `ledger` (`crate::store::guard`): from now on
    /// every store call is refused until the guard, started with the controller, has
    /// established the store against the ledger, and after any loss until the new
    /// incarnation is in place.
    pub fn guard_store(&mut self, ledger: Arc<dyn StoreLedger>) {
        let config = self.config();
        self.pool.expect(Some(Expectation::unestablished()));
        self.guard = Some(StoreGuard::new(
            self.metered.clone(),
            ledger,
            config.store.key_prefix.clone(),
            self.clock.clone(),
            recovery_hold_ms(&config),
        ));
    }

    /// What the guard knows of the store (`Unknown` without one).
    pub fn store_status(&self) -> StoreStatus {
        self.guard
            .as_ref()
            .map_or(StoreStatus::Unknown, StoreGuard::status)
    }

    /// The store guard, if any (tests drive its rounds by hand).
    pub fn store_guard(&self) -> Option<&StoreGuard> {
        self.guard.as_ref()
    }

    /// The configuration in force (the latest applied reload's).
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// The activity pool (for the client API in the same process).
    pub fn pool(&self) -> Arc<dyn ActivityPool> {
        self.pool.clone()
    }

    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// Who runs the singleton loops (watch it to see whether this controller leads).
    pub fn leadership(&self) -> Arc<dyn Leadership> {
        self.leadership.clone()
    }

    /// Per-upstream provider status.
    pub fn status_board(&self) -> Arc<StatusBoard> {
        self.board.clone()
    }

    /// Every configured upstream with its provider status (config order), as the store
    /// holds it: the leader's reconcilers write it after every round, so every controller
    /// answers the same, and an upstream nobody fetched yet has none.
    pub async fn upstream_overviews(&self) -> proxypool_core::PoolResult<Vec<UpstreamOverview>> {
        let mut stored: std::collections::HashMap<_, _> = self
            .metered
            .provider_statuses()
            .await?
            .into_iter()
            .filter_map(|s| Some((s.upstream.clone()?, s)))
            .collect();
        Ok(self
            .config()
            .upstreams
            .iter()
            .map(|u| UpstreamOverview {
                id: u.id.clone(),
                provider: match u.provider.kind {
                    ProviderKind::Http => "http_list",
                    ProviderKind::Static => "static",
                    ProviderKind::Backconnect => "backconnect",
                },
                fetch_interval_ms: u.provider.interval.as_ms(),
                proxy_ttl_ms: u.ttl.as_ms(),
                max_size: u.max_size,
                status: stored.remove(&u.id),
            })
            .collect())
    }

    /// The worker control API routes, to mount on any listener.
    pub fn control_router(&self) -> Router {
        api::router(ControlState {
            pool: self.metered.clone(),
            clock: self.clock.clone(),
            publisher: self.publisher.clone(),
            tokens: self.tokens.clone(),
            snapshot: self.config().snapshot.clone(),
            limits: self.config().control.limits.clone(),
            wake_ownership: self.wake_ownership.clone(),
            config: self.config.clone(),
            fleet: self.fleet.clone(),
        })
    }

    /// One reconciler per upstream (to drive rounds by hand in tests).
    pub fn reconcilers(&self) -> Vec<Reconciler> {
        self.config()
            .upstreams
            .iter()
            .map(|u| {
                Reconciler::new(
                    Arc::new(u.clone()),
                    self.metered.clone(),
                    self.clock.clone(),
                    VendorClient::for_upstream(u),
                    self.board.clone(),
                )
                .with_session_health(self.session_health.clone())
            })
            .collect()
    }

    pub fn checker(&self) -> Checker {
        Checker::new(
            self.metered.clone(),
            self.clock.clone(),
            self.config().checker.clone(),
            &self.config().upstreams,
        )
        .with_session_health(self.session_health.clone())
    }

    pub fn ownership_manager(&self) -> OwnershipManager {
        OwnershipManager::new(
            self.metered.clone(),
            self.clock.clone(),
            self.config().ownership.clone(),
            self.publisher.changes().clone(),
            self.wake_ownership.clone(),
            self.extraction.clone(),
        )
    }

    /// What the ownership manager's last round left for extraction, while it is current:
    /// at most three rounds and five seconds old, so a controller that stopped leading
    /// shows none instead of what it saw when it led.
    pub fn extraction_view(&self) -> Option<ExtractionView> {
        let fresh_for = self.config().ownership.interval.as_ms() * 3 + 5_000;
        self.extraction.current(self.clock.now(), fresh_for)
    }

    /// Runs the ownership manager soon (an operator changed a worker's mode: on the
    /// leader its drains start now; elsewhere the leader picks the mode up from the store
    /// on its next round).
    pub fn wake_ownership(&self) {
        self.wake_ownership.notify_one();
    }

    pub fn sweeper(&self) -> Sweeper {
        Sweeper::new(
            self.metered.clone(),
            self.clock.clone(),
            self.config().maintenance.clone(),
        )
    }
}
