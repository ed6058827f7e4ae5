//! Live reload of the configuration file: SIGHUP re-reads the file of `serve`,
//! `controller` and a split `gateway`; so does an admin client's `POST /v1/admin/reload`
//! where a client API runs.
//!
//! A file with any error is refused whole: the running configuration stays, the error is
//! logged with file, line and key, and the refusal is counted
//! (`proxypool_config_reloads_total{result="refused"}`) and shown by
//! `GET /v1/admin/reload`. A good file is compared with the running one
//! ([`ReloadPlan`]): changed keys that need a restart are reported and not applied; the
//! rest (clients, policies, upstreams, worker tokens, checker, ownership, maintenance,
//! extraction settings, the gateway's limits, rotation, sessions, dialing, shield) is
//! applied by the [`ApplyConfig`] target without dropping a connection or a request.
//!
//! Reloads run one at a time on the command's own task (it owns the running stack), so
//! nothing is locked across an await: the API's route sends a request over a channel and
//! waits for the report.

use crate::failure::Failure;
use crate::gateway_section::{Placement, gateway_config};
use crate::settings;
use crate::signal::Shutdown;
use crate::stack::Stack;
use async_trait::async_trait;
use proxypool_api::ConfigReloader;
use proxypool_config::{Config, ReloadPlan, Role, WorkerTokenConfig, with_restart_keys};
use proxypool_core::LockExt;
use proxypool_gateway::GatewayReload;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

/// What a reload is applied to: the running stack, or a split gateway.
pub(crate) trait ApplyConfig {
    /// Applies `config`, which differs from the running one only in keys that apply live.
    async fn apply(&mut self, config: Config) -> Result<(), Failure>;
    /// Shows the reload's report where this process shows its state.
    fn show(&self, _report: &Value) {}
    /// Reopens the log files a reload always reopens (the gateway's access log), for a
    /// reload that changed nothing: logrotate's SIGHUP.
    fn reopen_logs(&self) {}
}

impl ApplyConfig for Stack {
    async fn apply(&mut self, config: Config) -> Result<(), Failure> {
        Stack::apply(self, config).await
    }

    fn show(&self, report: &Value) {
        self.show_reload(report);
    }

    fn reopen_logs(&self) {
        self.reopen_access_log();
    }
}

/// A split gateway: its settings from the reloaded `[gateway]`, its identity kept.
#[derive(Debug)]
pub(crate) struct SplitGateway {
    pub reload: GatewayReload,
}

impl ApplyConfig for SplitGateway {
    async fn apply(&mut self, config: Config) -> Result<(), Failure> {
        let settings = gateway_config(&config, &Placement::Remote)?;
        self.reload
            .apply(&settings)
            .map_err(|e| Failure::config(format!("gateway: {}", e.0)))
    }

    fn show(&self, report: &Value) {
        self.reload.set_report(report.clone());
    }

    fn reopen_logs(&self) {
        self.reload.reopen_access_log();
    }
}

/// The API's side: asks the command's task for a reload and reads the last report.
#[derive(Debug)]
pub(crate) struct ReloadRequests {
    requests: mpsc::Sender<oneshot::Sender<Value>>,
    last: Arc<Mutex<Value>>,
}

#[async_trait]
impl ConfigReloader for ReloadRequests {
    async fn reload(&self) -> Value {
        let (reply, report) = oneshot::channel();
        if self.requests.send(reply).await.is_err() {
            return json!({"result": "refused", "error": "the process is shutting down"});
        }
        report.await.unwrap_or_else(
            |_| json!({"result": "refused", "error": "the process is shutting down"}),
        )
    }

    fn last(&self) -> Value {
        self.last.lock_or_recover().clone()
    }
}

/// The command's side: owns the running file's configuration and applies reloads.
#[derive(Debug)]
pub(crate) struct Reloader {
    path: PathBuf,
    role: Role,
    /// The configuration in force, as loaded from the file.
    running: Config,
    /// Tokens this process added for itself (the in-process gateway's), kept on reload.
    own_tokens: Vec<WorkerTokenConfig>,
    requests: mpsc::Receiver<oneshot::Sender<Value>>,
    last: Arc<Mutex<Value>>,
    applied: u64,
    refused: u64,
}

impl Reloader {
    /// A reloader for the file at `path`, whose loaded form is `running`.
    pub(crate) fn new(path: PathBuf, role: Role, running: Config) -> (Reloader, ReloadRequests) {
        let (tx, rx) = mpsc::channel(4);
        let last = Arc::new(Mutex::new(json!({"result": "none"})));
        let requests = ReloadRequests {
            requests: tx,
            last: last.clone(),
        };
        let reloader = Reloader {
            path,
            role,
            running,
            own_tokens: Vec::new(),
            requests: rx,
            last,
            applied: 0,
            refused: 0,
        };
        (reloader, requests)
    }

    /// Worker tokens the process made up for itself; every applied reload keeps them.
    pub(crate) fn keep_tokens(&mut self, tokens: Vec<WorkerTokenConfig>) {
        self.own_tokens = tokens;
    }

    /// The next reload asked for over the API.
    pub(crate) async fn request(&mut self) -> Option<oneshot::Sender<Value>> {
        self.requests.recv().await
    }

    /// Re-reads the file and applies what may change live; the report says what happened.
    pub(crate) async fn reload(&mut self, target: &mut impl ApplyConfig) -> Value {
        let (path, role) = (self.path.clone(), self.role);
        let loaded = tokio::task::spawn_blocking(move || settings::load(&path, role))
            .await
            .unwrap_or_else(|e| Err(Failure::runtime(e.to_string())));
        let report = match loaded {
            Err(failure) => self.refuse(failure.message),
            Ok(loaded) => {
                let plan = ReloadPlan::between(&self.running, &loaded);
                if !plan.restart.is_empty() {
                    tracing::warn!(keys = ?plan.restart, "changed keys need a restart and were not applied");
                }
                if plan.live.is_empty() {
                    // Applying reopens the logs; without a change they are reopened alone.
                    target.reopen_logs();
                    self.report("unchanged", &plan, None)
                } else {
                    // What is in force after it: the live keys of the file, the rest as running.
                    let next = with_restart_keys(&self.running, &loaded);
                    let mut applied = next.clone();
                    applied
                        .worker_tokens
                        .extend(self.own_tokens.iter().cloned());
                    match target.apply(applied).await {
                        Ok(()) => {
                            self.applied += 1;
                            self.running = next;
                            metrics::counter!("proxypool_config_reloads_total", "result" => "applied")
                                .increment(1);
                            tracing::info!(live = ?plan.live, restart_required = ?plan.restart, "configuration reloaded");
                            self.report("applied", &plan, None)
                        }
                        Err(failure) => self.refuse(failure.message),
                    }
                }
            }
        };
        *self.last.lock_or_recover() = report.clone();
        target.show(&report);
        report
    }

    fn refuse(&mut self, error: String) -> Value {
        self.refused += 1;
        metrics::counter!("proxypool_config_reloads_total", "result" => "refused").increment(1);
        tracing::error!("configuration reload refused, the running configuration stays:\n{error}");
        self.report("refused", &ReloadPlan::default(), Some(error))
    }

    fn report(&self, result: &str, plan: &ReloadPlan, error: Option<String>) -> Value {
        let mut report = json!({
            "result": result,
            "at_ms": proxypool_core::now_millis(),
            "file": self.path.display().to_string(),
            "live": plan.live,
            "restart_required": plan.restart,
            "reloads_applied": self.applied,
            "reloads_refused": self.refused,
        });
        if let Some(error) = error {
            report["error"] = json!(error);
        }
        report
    }
}

/// Runs until a shutdown is requested, reloading on SIGHUP and on API requests.
pub(crate) async fn serve_until_shutdown(
    shutdown: &Shutdown,
    reloader: &mut Reloader,
    stack: &mut Stack,
) -> Result<(), Failure> {
    let mut hangups =
        signal(SignalKind::hangup()).map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = hangups.recv() => {
                tracing::info!("SIGHUP: reloading the configuration");
                reloader.reload(stack).await;
            }
            Some(reply) = reloader.request() => {
                let report = reloader.reload(stack).await;
                let _ = reply.send(report);
            }
        }
    }
}

/// Runs a split gateway until `run` ends (its shutdown), reloading on SIGHUP.
pub(crate) async fn gateway_until_shutdown(
    run: impl Future<Output = ()>,
    reloader: &mut Reloader,
    gateway: &mut SplitGateway,
) -> Result<(), Failure> {
    let mut hangups =
        signal(SignalKind::hangup()).map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    tokio::pin!(run);
    loop {
        tokio::select! {
            () = &mut run => return Ok(()),
            _ = hangups.recv() => {
                tracing::info!("SIGHUP: reloading the configuration");
                reloader.reload(gateway).await;
            }
        }
    }
}
