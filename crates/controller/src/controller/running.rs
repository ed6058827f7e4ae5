//! Starting a controller ([`Controller::start`]) and the [`RunningController`]: its
//! control API server and loops, a configuration reload, shutdown and abort.

use super::assembly::Controller;
use super::error::ControllerError;
use super::gateway_clients::gateway_clients;
use super::listener::{serve_limits, server_tls};
use super::loops::Loops;
use crate::config::Config;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

impl Controller {
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
        // First: until the guard established the store, every store call is refused.
        // Without a guard nothing is checked, and nothing waits for it.
        let guard = match self.guard.clone() {
            Some(guard) => Some(tokio::spawn(guard.run(shutdown_rx.clone()))),
            None => {
                self.pool.expect(None);
                None
            }
        };
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
            guard,
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
    /// The store guard's task, when the store is guarded.
    guard: Option<JoinHandle<()>>,
    /// The control API's TLS, re-read on reload (the files are polled as well).
    tls: Option<proxypool_edge::ServerTls>,
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
        if let Some(guard) = &controller.guard {
            guard.set_hold(crate::store::recovery_hold_ms(&config));
        }
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
        if let Some(guard) = self.guard {
            let _ = guard.await;
        }
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
        if let Some(guard) = self.guard {
            guard.abort();
        }
        self.server.abort();
        tracing::warn!("controller aborted");
    }
}
