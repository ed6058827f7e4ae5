//! [`Gateway`]: builds a gateway worker from a [`GatewayConfig`], binds its listeners,
//! and runs it until a shutdown signal, then shuts down gracefully: stop accepting,
//! let in-flight requests and tunnels finish within `shutdown_grace_ms`, close the rest,
//! and end the controller session.

use crate::admin::listener as admin;
use crate::config::ControllerAddr;
use crate::config::{ConfigError, GatewayConfig};
use crate::context::{GatewayContext, Phase};
use crate::control::keeper;
use crate::control::{ControlClient, ControlLoop, runner::Backoff};
use crate::inbound::fleet_accept::{self, BoundFleet};
use crate::inbound::io_threads::{IoThreads, ThreadListeners};
use crate::inbound::{http as http_listener, socks, tls_accept};
use crate::metrics::GatewayMetrics;
use crate::policy::limits::LimiterClock;
use crate::proxy_addresses::{self, ProxyAddresses, ProxyResolution};
use crate::reload::{GatewayReload, build_origin_tls, build_shield, load_authority};
use crate::routing::route::{RouteSettings, Router};
use crate::routing::select::Picker;
use crate::routing::sticky::StickyTable;
use crate::routing::wait::CapacityWaiters;
use crate::snapshot::SnapshotStore;
use crate::snapshot::readiness;
use crate::state::Shared;
use crate::usage::UsageTable;
use arc_swap::{ArcSwap, ArcSwapOption};
use proxypool_core::{SharedClock, SystemClock};
use proxypool_metrics::MetricsHandle;
use proxypool_throttle::MonotonicClock;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot bind the {listener} listener on {addr}: {source}")]
    Bind {
        listener: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the I/O threads: {0}")]
    IoThreads(std::io::Error),
    #[error("cannot start the access log: {0}")]
    AccessLog(String),
    #[error("cannot start the fleet listener: {0}")]
    Fleet(String),
}

/// A gateway worker with its listeners bound, ready to [`Gateway::run`].
#[derive(Debug)]
pub struct Gateway {
    shared: Arc<Shared>,
    phase: watch::Sender<Phase>,
    control: Arc<ControlLoop>,
    control_client: ControlClient,
    metrics_handle: Option<MetricsHandle>,
    http_addr: Option<SocketAddr>,
    https_addr: Option<SocketAddr>,
    socks5_addr: Option<SocketAddr>,
    clients: ClientListeners,
    admin: Option<TcpListener>,
    /// The fleet listener (`[gateway.fleet]`).
    fleet: Option<BoundFleet>,
}

/// Where the client listeners' connections are served.
#[derive(Debug)]
enum ClientListeners {
    /// On the runtime that runs the gateway (`io_threads = 0`).
    Ambient {
        http: Option<TcpListener>,
        https: Option<TcpListener>,
        socks5: Option<TcpListener>,
    },
    /// On per-core threads, each with its own runtime.
    Threads(IoThreads),
}

impl Gateway {
    /// Validates the config and binds every configured listener (port 0 picks a free
    /// port; read it back with [`Gateway::http_addr`] and friends), on the system clock.
    pub async fn bind(config: GatewayConfig) -> Result<Self, GatewayError> {
        Self::bind_with_clock(config, SystemClock::shared()).await
    }

    /// [`Gateway::bind`] on `clock`: leases, `usable_until` and sticky sessions read its
    /// wall time; failure cooldowns, idle timers and snapshot staleness its monotonic time.
    /// Tests pass a [`proxypool_core::ManualClock`] to move time without sleeping. (The
    /// rate limiters keep their own nanosecond clock; see [`proxypool_core::clock`].)
    pub async fn bind_with_clock(
        config: GatewayConfig,
        clock: SharedClock,
    ) -> Result<Self, GatewayError> {
        Self::bind_with(config, clock, ProxyResolution::default()).await
    }

    /// [`Gateway::bind_with_clock`], resolving the proxies' host names as `resolution`
    /// says (tests answer with a resolver of their own).
    pub async fn bind_with(
        config: GatewayConfig,
        clock: SharedClock,
        resolution: ProxyResolution,
    ) -> Result<Self, GatewayError> {
        config.validate()?;
        // Install the process's recorder before any metric handle is created (handles made
        // before it would record nowhere). In `serve`/`dev` another role may have
        // installed it already: the same registry comes back.
        let metrics_handle = match proxypool_metrics::install() {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::warn!(%error, "admin /metrics is off");
                None
            }
        };
        let metrics = Arc::new(GatewayMetrics::new());
        // The precise clock, read by each check (about 25 ns, two or three checks a
        // request): a ticking thread's thousand wake-ups a second cost the hot path more
        // than they save it, and an idle gateway nothing.
        let limiter_clock: LimiterClock = Arc::new(MonotonicClock::new());
        let shield = build_shield(&config, &limiter_clock)?;
        let store = Arc::new(SnapshotStore::new(
            config.limits.max_tracked_proxies,
            config.limiter.clone(),
            Arc::clone(&limiter_clock),
            Arc::clone(&clock),
        ));
        let router = Router::new(
            Picker::new(config.rotation, seed()),
            StickyTable::new(config.limits.max_sticky_sessions),
            RouteSettings::of(&config),
            Arc::clone(&metrics),
            Arc::clone(&clock),
            CapacityWaiters::new(store.registry().freed()),
        );
        let addrs = ControllerAddr::all_of(&config)?;
        let admin_tls = match &config.admin_tls {
            Some(t) => Some(
                proxypool_edge::ServerTls::load_polling(
                    proxypool_edge::ServerTlsFiles {
                        cert: t.cert.clone(),
                        key: t.key.clone(),
                        client_ca: t.client_ca.clone(),
                    },
                    t.poll_interval.as_duration(),
                )
                .map_err(|e| ConfigError(format!("admin_tls: {e}")))?,
            ),
            None => None,
        };
        let client_tls = tls_accept::load(&config)?;
        let control_client = ControlClient::new(
            addrs,
            config.worker_token.clone(),
            config.worker_id.clone(),
            config.control.request_timeout.as_duration(),
        );
        let usage = Arc::new(UsageTable::new(
            metrics.bytes_up.clone(),
            metrics.bytes_down.clone(),
        ));
        let bans = Arc::new(crate::routing::bans::Bans::default());
        let (fleet, fleet_listener) = fleet_accept::start(&config)
            .await
            .map_err(GatewayError::Fleet)?
            .unzip();
        let control = Arc::new(ControlLoop::new(
            control_client.clone(),
            Arc::clone(&store),
            Arc::clone(&bans),
            Arc::clone(&metrics),
            Arc::clone(&usage),
            config.worker_id.clone(),
            Backoff {
                initial: config.control.initial_backoff.as_duration(),
                max: config.control.max_backoff.as_duration(),
            },
            fleet.clone(),
        ));
        let http = bind("http", config.listeners.http).await?;
        let https = bind("https", config.listeners.https).await?;
        let socks5 = bind("socks5", config.listeners.socks5).await?;
        let admin = bind("admin", config.listeners.admin).await?;
        let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
        let https_addr = https.as_ref().and_then(|l| l.local_addr().ok());
        let socks5_addr = socks5.as_ref().and_then(|l| l.local_addr().ok());
        let io_threads = config.io_threads;
        if io_threads > 0 {
            // One pool shard per thread: a pooled connection stays with its thread.
            store.registry().set_pool_shards(io_threads);
        }
        let access = crate::access::AccessLog::start(&config.access_log)
            .map_err(|error| GatewayError::AccessLog(error.to_string()))?;
        let (phase, phase_rx) = watch::channel(Phase::Running);
        let limits = &config.limits;
        let connections = proxypool_edge::ConnectionCap::new(limits.max_connections);
        let per_ip =
            proxypool_edge::PerIpLimit::new(limits.max_connections_per_ip, limits.ipv6_prefix);
        let origin_tls = build_origin_tls(&config)?;
        let inspection = load_authority(&config)?.map(Arc::new);
        let shared = Arc::new(Shared {
            context: GatewayContext {
                settings: ArcSwap::from_pointee(config),
                store,
                router,
                bans,
                metrics,
                usage,
                access,
                phase: phase_rx,
                clock,
                addresses: Arc::new(ProxyAddresses::new(resolution)),
                origin_tls: ArcSwap::from_pointee(origin_tls),
            },
            connections,
            per_ip,
            shield: ArcSwapOption::new(shield.map(Arc::new)),
            last_reload: ArcSwapOption::empty(),
            limiter_clock,
            admin_tls,
            client_tls,
            inspection: ArcSwapOption::new(inspection),
            control: control_client.clone(),
            fleet,
        });
        let clients = if io_threads == 0 {
            ClientListeners::Ambient {
                http,
                https,
                socks5,
            }
        } else {
            let to_std =
                |listener: Option<TcpListener>| listener.map(TcpListener::into_std).transpose();
            let sets = ThreadListeners::split(
                to_std(http).map_err(GatewayError::IoThreads)?,
                to_std(https).map_err(GatewayError::IoThreads)?,
                to_std(socks5).map_err(GatewayError::IoThreads)?,
                io_threads,
            )
            .map_err(GatewayError::IoThreads)?;
            let threads = IoThreads::start(sets, &shared)
                .await
                .map_err(GatewayError::IoThreads)?;
            ClientListeners::Threads(threads)
        };
        Ok(Self {
            shared,
            phase,
            control,
            control_client,
            metrics_handle,
            http_addr,
            https_addr,
            socks5_addr,
            clients,
            admin,
            fleet: fleet_listener,
        })
    }

    /// The fleet listener's address (`[gateway.fleet] listen`), when this gateway is a
    /// fleet member.
    pub fn fleet_addr(&self) -> Option<SocketAddr> {
        self.fleet.as_ref().map(BoundFleet::addr)
    }

    /// What this gateway reports to the controller as its fleet endpoint: the address
    /// peers dial and the pin of its hop certificate.
    pub fn fleet_endpoint(&self) -> Option<proxypool_core::fleet::FleetEndpoint> {
        self.shared.fleet.as_ref().map(|fleet| fleet.endpoint())
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The TLS client listener's address (`listeners.https`).
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https_addr
    }

    pub fn socks5_addr(&self) -> Option<SocketAddr> {
        self.socks5_addr
    }

    /// How many I/O threads serve the client listeners (`0`: the runtime running the
    /// gateway does).
    pub fn io_threads(&self) -> usize {
        match &self.clients {
            ClientListeners::Ambient { .. } => 0,
            ClientListeners::Threads(threads) => threads.len(),
        }
    }

    /// A handle that applies reloaded settings while the gateway runs.
    pub fn reloader(&self) -> GatewayReload {
        GatewayReload::new(Arc::clone(&self.shared))
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` completes, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let Gateway {
            shared,
            phase,
            control,
            control_client,
            metrics_handle,
            http_addr: _,
            https_addr: _,
            socks5_addr: _,
            clients,
            admin,
            fleet,
        } = self;
        let mut tasks = tokio::task::JoinSet::new();
        let io_threads = match clients {
            ClientListeners::Ambient {
                http,
                https,
                socks5,
            } => {
                if let Some(listener) = http {
                    tasks.spawn(http_listener::serve(listener, Arc::clone(&shared)));
                }
                if let Some(listener) = https {
                    tasks.spawn(tls_accept::serve(listener, Arc::clone(&shared)));
                }
                if let Some(listener) = socks5 {
                    tasks.spawn(socks::serve(listener, Arc::clone(&shared)));
                }
                None
            }
            ClientListeners::Threads(mut threads) => {
                threads.serve();
                Some(threads)
            }
        };
        if let Some(listener) = admin {
            tasks.spawn(admin::serve(listener, Arc::clone(&shared), metrics_handle));
        }
        let fleet = fleet.map(|bound| bound.serve(&mut tasks, &shared));
        tasks.spawn(maintenance(Arc::clone(&shared)));
        tasks.spawn(tls_accept::watch_files(Arc::clone(&shared)));
        tasks.spawn(follow_session_feedback(Arc::clone(&shared)));
        tasks.spawn(keeper::run(Arc::clone(&shared)));
        tasks.spawn(proxy_addresses::keep_fresh(
            Arc::clone(&shared.addresses),
            Arc::clone(&shared.store),
        ));
        let (stop_control, stop_rx) = watch::channel(false);
        let control_task = {
            let control = Arc::clone(&control);
            tokio::spawn(async move { control.run(stop_rx).await })
        };

        shutdown.await;
        tracing::info!("gateway draining: no new connections");
        let _ = phase.send(Phase::Draining);
        let grace = shared.config().shutdown_grace;
        // Every open connection (and tunnel) holds a slot: none left = nothing in flight.
        let closed = fleet_accept::all_closed(&shared, fleet.as_deref());
        let drained = tokio::time::timeout(grace, closed).await;
        if drained.is_err() {
            tracing::warn!("shutdown grace elapsed; closing remaining connections");
        }
        let _ = phase.send(Phase::Stopped);
        let _ = stop_control.send(true);
        let session = control_task.await.ok().flatten();
        if let Some(session) = session {
            control.final_report(&session).await;
            match control_client.end_session(&session).await {
                Ok(()) => tracing::info!(%session, "control session ended"),
                Err(error) => tracing::warn!(%error, "ending the control session failed"),
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        if let Some(threads) = io_threads {
            threads.join().await;
        }
        // Last: every request served is accounted by now; its line reaches the disk.
        let access = Arc::clone(&shared.access);
        let _ = tokio::task::spawn_blocking(move || access.close()).await;
    }
}

async fn bind(
    listener: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<TcpListener>, GatewayError> {
    match addr {
        None => Ok(None),
        Some(addr) => {
            TcpListener::bind(addr)
                .await
                .map(Some)
                .map_err(|source| GatewayError::Bind {
                    listener,
                    addr,
                    source,
                })
        }
    }
}

/// Applies client feedback on sticky sessions as each new snapshot brings it.
async fn follow_session_feedback(shared: Arc<Shared>) {
    let mut swaps = shared.store.swaps();
    while swaps.changed().await.is_ok() {
        if let Some(view) = shared.store.view()
            && !view.session_feedback.is_empty()
        {
            shared.bans.apply_session_feedback(
                &view,
                shared.router.sticky(),
                shared.clock.now(),
                &shared.metrics,
            );
        }
    }
}

/// Periodic bounded cleanups: sticky sessions, limiter keys, gauges (also for a `/metrics`
/// rendered by another role of the process, which does not refresh the gateway's).
async fn maintenance(shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(10));
    loop {
        ticker.tick().await;
        shared.router.sticky().sweep(shared.clock.now());
        if let Some(shield) = shared.shield.load_full() {
            shield.sweep(10_000);
        }
        shared.store.sweep_limiter(10_000);
        if let Some(age) = shared.store.since_fresh_ms() {
            shared.metrics.snapshot_age.set(age as f64 / 1000.0);
        }
        readiness::publish(&shared.store, &shared.metrics, shared.clock.now());
    }
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    // Entropy only, not a decision: the process clock whatever the gateway's clock is.
    hasher.write_u64(proxypool_core::clock::monotonic_ms());
    hasher.finish()
}

/// Completes on Ctrl-C or SIGTERM: the usual `shutdown` for [`Gateway::run`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
