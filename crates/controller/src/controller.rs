//! Assembling and running a controller: the API the CLI calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), proxypool_controller::ControllerError> {
//! use proxypool_controller::config::Role;
//! use proxypool_controller::{Config, Controller};
//! let config = Config::load("proxypool.toml", Role::Controller)?;
//! let running = Controller::from_config(config).await?.start().await?;
//! println!("control API on {}", running.control_addr());
//! // ... on SIGTERM:
//! running.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! `Controller` holds the shared parts (store, clock, leadership, status board, snapshot
//! publisher), so an embedding process (`proxypool serve`/`dev`) can hand the same store
//! to a client API, or mount the control router on its own listener.

use crate::api::{self, ControlState, WorkerTokens};
use crate::checker::Checker;
use crate::clock::{SharedClock, SystemClock};
use crate::config::ControlLimits;
use crate::config::ProviderKind;
use crate::config::{Config, ConfigError};
use crate::leadership::Leadership;
use crate::leadership::TermStore;
use crate::leadership::job::run_leader_job;
use crate::maintenance::Sweeper;
use crate::metrics::metered::MeteredPool;
use crate::metrics::pool::PoolGauges;
use crate::ownership::OwnershipManager;
use crate::provider::status::UpstreamOverview;
use crate::provider::{Reconciler, StatusBoard, VendorClient};
use crate::snapshot::{ChangeSignal, SnapshotPublisher};
use crate::store::{OpenedStore, StoreOpenError, open_store};
use arc_swap::ArcSwap;
use axum::Router;
use proxypool_core::ActivityPool;
use proxypool_core::control::{GatewayClient, RateLimitSpec};
use proxypool_edge::ServeLimits;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Why a controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreOpenError),
    #[error("control.tls: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A configured controller, not yet running.
#[derive(Debug, Clone)]
pub struct Controller {
    // Swapped whole on a configuration reload ([`RunningController::apply`]).
    config: Arc<ArcSwap<Config>>,
    tokens: Arc<WorkerTokens>,
    pool: Arc<dyn ActivityPool>,
    /// The same pool with every call timed (`crate::metrics::metered`): what the loops,
    /// the publisher and the control API use. [`Controller::pool`] hands out the plain one.
    metered: Arc<dyn ActivityPool>,
    leadership: Arc<dyn Leadership>,
    clock: SharedClock,
    board: Arc<StatusBoard>,
    publisher: Arc<SnapshotPublisher>,
    wake_ownership: Arc<Notify>,
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
        let publisher = Arc::new(SnapshotPublisher::new(
            metered.clone(),
            clock.clone(),
            config.snapshot.clone(),
            gateway_clients(&config),
            config.cooldowns.policy(),
            changes,
        ));
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
        }
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
                    VendorClient::for_upstream(&u.id, u.provider.tls.as_ref()),
                    self.board.clone(),
                )
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
    }

    pub fn ownership_manager(&self) -> OwnershipManager {
        OwnershipManager::new(
            self.metered.clone(),
            self.clock.clone(),
            self.config().ownership.clone(),
            self.publisher.changes().clone(),
            self.wake_ownership.clone(),
        )
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

    /// Spawns the leader-only loops (one reconciler per upstream, the checker, the
    /// ownership manager, the sweeper) with the configuration in force, and the metrics
    /// gauges' reader. Each leader-only loop waits for this controller to lead and drops
    /// its round when the term ends.
    fn spawn_loops(&self) -> Loops {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let terms = TermStore::new(self.metered.clone(), self.leadership.as_ref());
        for reconciler in self.reconcilers() {
            tasks.push(tokio::spawn(run_leader_job(
                reconciler,
                terms.clone(),
                self.leadership.watch(),
                stopped.clone(),
            )));
        }
        tasks.push(tokio::spawn(run_leader_job(
            self.checker(),
            terms.clone(),
            self.leadership.watch(),
            stopped.clone(),
        )));
        tasks.push(tokio::spawn(run_leader_job(
            self.ownership_manager(),
            terms.clone(),
            self.leadership.watch(),
            stopped.clone(),
        )));
        tasks.push(tokio::spawn(run_leader_job(
            self.sweeper(),
            terms.clone(),
            self.leadership.watch(),
            stopped.clone(),
        )));
        // Not leader-only: every controller's `/metrics` shows the pool and its term.
        let gauges = PoolGauges {
            pool: self.metered.clone(),
            clock: self.clock.clone(),
            upstreams: self
                .config()
                .upstreams
                .iter()
                .map(|u| u.id.clone())
                .collect(),
            publisher: self.publisher.clone(),
            leadership: self.leadership.watch(),
        };
        tasks.push(tokio::spawn(gauges.run(stopped)));
        Loops { stop, tasks }
    }

    /// Binds `listen.control` and starts everything.
    pub async fn start(self) -> Result<RunningController, ControllerError> {
        let addr = self.config().listen.control;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ControllerError::Bind { addr, source })?;
        self.start_on(listener)
    }

    /// Starts the background loops and serves the control API on `listener`.
    pub fn start_on(self, listener: TcpListener) -> Result<RunningController, ControllerError> {
        let local = listener
            .local_addr()
            .map_err(|source| ControllerError::Bind {
                addr: self.config().listen.control,
                source,
            })?;
        // Before any loop is spawned, so a bad certificate leaves nothing running.
        let control_tls = match &self.config().control.tls {
            Some(tls) => Some(server_tls(tls).map_err(|e| ControllerError::Tls(e.to_string()))?),
            None => None,
        };
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let loops = self.spawn_loops();

        let router = self.control_router();
        let config = self.config();
        let mut limits = serve_limits(&config.control.limits);
        limits.proxy_protocol_from = crate::config::parse_cidrs(&config.control.trusted_proxies);
        limits.tls = control_tls.clone();
        let mut server_shutdown = shutdown_rx.clone();
        let server = tokio::spawn(async move {
            let graceful = async move {
                let _ = server_shutdown.wait_for(|stop| *stop).await;
            };
            let service = proxypool_edge::TowerToHyperService::new(router);
            if let Err(e) = proxypool_edge::serve(listener, service, limits, graceful).await {
                tracing::error!("control API server failed: {e}");
            }
        });
        tracing::info!(control = %local, upstreams = self.config().upstreams.len(), "controller started");
        Ok(RunningController {
            controller: self,
            control_addr: local,
            shutdown: shutdown_tx,
            loops,
            server,
            tls: control_tls,
        })
    }
}

/// A running controller.
#[derive(Debug)]
pub struct RunningController {
    controller: Controller,
    control_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    loops: Loops,
    server: JoinHandle<()>,
    /// The control API's TLS, re-read on reload (the files are polled as well).
    tls: Option<proxypool_edge::ServerTls>,
}

/// The running leader-only loops and their own stop signal (a reload restarts them
/// without touching the control API server).
#[derive(Debug)]
struct Loops {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Loops {
    /// Lets each loop finish its current round, then waits for all of them.
    async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }

    fn abort(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A listener's TLS from its `[*.tls]` table (the client API's uses it too).
pub fn server_tls(
    tls: &proxypool_config::ServerTlsConfig,
) -> Result<proxypool_edge::ServerTls, proxypool_edge::TlsError> {
    proxypool_edge::ServerTls::load_polling(
        proxypool_edge::ServerTlsFiles {
            cert: tls.cert.clone(),
            key: tls.key.clone(),
            client_ca: tls.client_ca.clone(),
        },
        tls.poll_interval.as_duration(),
    )
}

/// The edge scaffold's settings from `[control.limits]`.
pub fn serve_limits(limits: &ControlLimits) -> ServeLimits {
    ServeLimits {
        max_connections: limits.max_connections,
        max_connections_per_ip: limits.max_connections_per_ip,
        header_read_timeout: limits.header_read_timeout.as_duration(),
        keepalive_idle: limits.keepalive_idle.as_duration(),
        max_header_bytes: limits.max_header_bytes,
        proxy_protocol_from: Vec::new(),
        tls: None,
    }
}

/// How long in-flight control requests (long-polls included) get to finish on shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl RunningController {
    pub fn control_addr(&self) -> SocketAddr {
        self.control_addr
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// Applies a reloaded configuration without dropping a connection or an in-flight
    /// request: worker tokens and the gateway clients (every waiting snapshot long-poll is
    /// woken) at once; upstreams, checker, ownership and maintenance settings by letting
    /// each loop finish its round and starting the loops again with the new settings (the
    /// leadership is kept; loop state lives in the store). The caller decided that
    /// `config` differs only in keys that apply live (see `proxypool_config::ReloadPlan`).
    pub async fn apply(&mut self, config: Config) {
        let controller = &self.controller;
        controller.tokens.replace(config.worker_tokens.clone());
        controller
            .publisher
            .replace_clients(gateway_clients(&config));
        controller
            .publisher
            .replace_cooldown_policy(config.cooldowns.policy());
        controller.config.store(Arc::new(config));
        if let Some(tls) = &self.tls {
            tls.reload_or_keep();
        }
        // The old loops finish their rounds before the new ones start: never two of one
        // loop at once.
        let idle = Loops {
            stop: watch::channel(true).0,
            tasks: Vec::new(),
        };
        std::mem::replace(&mut self.loops, idle).stop().await;
        self.loops = self.controller.spawn_loops();
        self.controller.wake_ownership.notify_one();
        tracing::info!("controller configuration applied");
    }

    /// Stops the loops (each finishes its current round), resigns the leadership (a
    /// standby takes over at once), stops accepting control requests and waits up to
    /// [`SHUTDOWN_GRACE`] for in-flight ones.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.loops.stop().await;
        // Only now: a standby must not start while our last rounds still write.
        self.controller.leadership.resign().await;
        let mut server = self.server;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
        tracing::info!("controller stopped");
    }

    /// Stops everything at once without any clean-up: loops and requests are cut where
    /// they stand and the leadership is abandoned, not resigned, so a standby waits for
    /// the lease to lapse. What a crash looks like to the other controllers (fault tests,
    /// or a last resort when a clean shutdown hangs).
    pub fn abort(self) {
        self.controller.leadership.abandon();
        self.loops.abort();
        self.server.abort();
        tracing::warn!("controller aborted");
    }
}

/// The gateway clients every snapshot carries: clients with a gateway password.
fn gateway_clients(config: &Config) -> Vec<GatewayClient> {
    config
        .clients
        .iter()
        .filter_map(|client| {
            let password_hash = client.gateway_password_hash()?.clone();
            let rate_limit = client.rate_limit.as_ref().and_then(|id| {
                config.policy(id).map(|p| RateLimitSpec {
                    id: p.id.clone(),
                    requests_per_second: p.requests_per_second,
                    burst: p.burst,
                    hard_lockout_ms: p.hard_lockout.map(|m| m.as_ms()),
                    max_soft_violations: p.max_soft_violations,
                })
            });
            Some(GatewayClient {
                id: client.id.clone(),
                project: client.project.clone(),
                password_hash,
                allowed_upstreams: client.allowed_upstreams.clone(),
                allowed_regions: client.allowed_regions.clone(),
                ip_allowlist: client.ip_allowlist.clone(),
                rate_limit,
                max_connections: client.max_connections,
                allowed_ports: client.allowed_ports.clone(),
                ban_statuses: client.ban_statuses.clone(),
                rotation: client.rotation.map(|r| r.to_snapshot()),
            })
        })
        .collect()
}
