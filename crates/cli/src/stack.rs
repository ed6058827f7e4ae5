//! Assembling the running parts in one process, and stopping them in the right order.
//!
//! `dev`, `serve` and `controller` all run a controller and the client API; `dev` and
//! `serve` add a gateway that talks to that controller over the worker control API on
//! loopback, exactly as a remote gateway would (one code path). Shutdown
//! runs from the edge inwards: the gateway first (it stops accepting, lets in-flight
//! requests and tunnels finish within its grace, and ends its control session while the
//! controller still answers), then the client API (in-flight requests finish), then the
//! controller (loops finish their round, the leadership is resigned), then the quota store.

use crate::adapters::ControllerView;
use crate::failure::Failure;
use crate::gateway_section::{self, Placement};
use crate::quota::{self, OpenedQuota};
use crate::random;
use proxypool_api::{ApiClient, ApiPorts, ApiState, ConfigReloader, FeedbackRate, ShieldSettings};
use proxypool_config::{ApiSection, Config, SecretRef, WorkerTokenConfig};
use proxypool_controller::{Controller, RunningController};
use proxypool_core::{Secret, SecretHash, WorkerId};
use proxypool_gateway::{Gateway, GatewayConfig, GatewayReload};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The credentials an in-process gateway presents to its controller.
#[derive(Debug, Clone)]
pub(crate) struct LoopbackWorker {
    pub worker: WorkerId,
    pub token: Secret,
}

impl LoopbackWorker {
    /// The worker of `config`'s in-process `[gateway]` (its `worker_id`, or `local`) with
    /// a fresh token, let in by a token entry made up for this run and added to `config`
    /// (so no token has to be configured for a gateway in the same process). Returns the
    /// worker and that entry.
    pub(crate) fn authorized_in(
        config: &mut Config,
    ) -> Result<(LoopbackWorker, WorkerTokenConfig), Failure> {
        let section = config
            .gateway
            .as_ref()
            .ok_or_else(|| Failure::config("gateway: missing"))?;
        let worker = LoopbackWorker {
            worker: gateway_section::worker_id(section)?,
            token: Secret::new(random::token(40)),
        };
        let hash = SecretHash::derive(worker.token.expose(), &random::token(16))
            .map_err(|e| Failure::runtime(format!("worker token: {e}")))?;
        let entry = WorkerTokenConfig {
            name: "in-process-gateway".into(),
            token: SecretRef::hash(hash),
            workers: vec![worker.worker.clone()],
        };
        config.worker_tokens.push(entry.clone());
        Ok((worker, entry))
    }

    /// Where the in-process gateway finds this process's controller.
    pub(crate) fn placement(&self, controller_url: String) -> Placement {
        Placement::InProcess {
            controller_url,
            token: self.token.clone(),
        }
    }
}

/// A running controller + client API (+ gateway).
#[derive(Debug)]
pub(crate) struct Stack {
    controller: RunningController,
    api: RunningApi,
    gateway: Option<RunningGateway>,
    quota: OpenedQuota,
    pub api_addr: SocketAddr,
    pub http_addr: Option<SocketAddr>,
    pub https_addr: Option<SocketAddr>,
    pub socks5_addr: Option<SocketAddr>,
}

#[derive(Debug)]
struct RunningApi {
    state: ApiState,
    stop: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
    /// How long in-flight requests may take once the listener stops.
    grace: Duration,
    /// The listener's TLS, re-read on reload (the files are polled as well).
    tls: Option<proxypool_edge::ServerTls>,
}

#[derive(Debug)]
struct RunningGateway {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    reload: GatewayReload,
    /// Its settings as started: identity and controller stay on reload.
    config: GatewayConfig,
}

/// Where the store guard remembers the pool store (`proxypool_controller::StoreGuard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ledger {
    /// In the quota's database, so a store that lost its memory is recognised even after
    /// every controller restarted with it.
    Durable,
    /// For this run only: `dev`, whose store and simulated vendor live and die with the
    /// process, so nothing an earlier run handed out can be handed out again.
    ThisRun,
}

impl Stack {
    /// Starts the controller and the client API; `gateway` (built by the caller once the
    /// control address is known) is then bound and started too.
    pub(crate) async fn start(
        config: Config,
        gateway: Option<&dyn Fn(String) -> Result<GatewayConfig, Failure>>,
        reloader: Option<Arc<dyn ConfigReloader>>,
        ledger: Ledger,
    ) -> Result<Stack, Failure> {
        let api = config.api.clone();
        let cooldowns = config.cooldowns;
        let api_listen = config.listen.api;
        // Bind the API before anything runs, so a taken port fails fast and cleanly.
        let api_listener = TcpListener::bind(api_listen).await.map_err(|e| {
            Failure::runtime(format!("cannot listen on {api_listen} (client API): {e}"))
        })?;
        let api_addr = api_listener
            .local_addr()
            .map_err(|e| Failure::runtime(format!("client API address: {e}")))?;
        let quota = quota::open(&config).await?;
        let clients = api_clients(&config, &quota);
        let mut controller = Controller::from_config(config)
            .await
            .map_err(|e| Failure::runtime(e.to_string()))?;
        controller.guard_store(match ledger {
            Ledger::Durable => quota.ledger.clone(),
            Ledger::ThisRun => Arc::new(proxypool_quota::MemoryQuota::new()),
        });
        let running = controller
            .clone()
            .start()
            .await
            .map_err(|e| Failure::runtime(e.to_string()))?;
        let started = start_api(
            &controller,
            &api,
            &cooldowns,
            clients,
            &quota,
            api_listener,
            ApiExtras {
                reloader,
                // `dev` (the run-only ledger) is one operator's loopback demo: its one
                // client's usage is theirs, so `/metrics` shows it without a token.
                client_metrics_open: ledger == Ledger::ThisRun,
            },
        );
        let api = match started {
            Ok(api) => api,
            Err(failure) => {
                running.shutdown().await;
                quota.close().await;
                return Err(failure);
            }
        };
        let mut stack = Stack {
            controller: running,
            api,
            gateway: None,
            quota,
            api_addr,
            http_addr: None,
            https_addr: None,
            socks5_addr: None,
        };
        if let Some(build) = gateway {
            // With [control.tls] the in-process gateway speaks TLS on loopback too (one
            // code path): the certificate must name 127.0.0.1 (or the listen address),
            // and [gateway.controller_tls] names its CA unless a public one signed it.
            let scheme = if stack.controller.controller().config().control.tls.is_some() {
                "https"
            } else {
                "http"
            };
            let url = format!("{scheme}://{}", dialable(stack.controller.control_addr()));
            let started = match build(url) {
                Ok(config) => start_gateway(config).await,
                Err(failure) => Err(failure),
            };
            match started {
                Ok((gateway, [http, https, socks5])) => {
                    stack.gateway = Some(gateway);
                    stack.http_addr = http;
                    stack.https_addr = https;
                    stack.socks5_addr = socks5;
                }
                Err(failure) => {
                    stack.shutdown().await;
                    return Err(failure);
                }
            }
        }
        Ok(stack)
    }

    /// Applies a reloaded configuration (only keys that apply live differ from the running
    /// one): the client API's clients, quota limits and extraction settings, then the
    /// controller's tokens, gateway clients and loops. A client removed here is refused by
    /// the API from its next request and by every gateway from its next snapshot.
    pub(crate) async fn apply(&mut self, config: Config) -> Result<(), Failure> {
        self.quota.replace_limits(quota::limits_table(&config)?);
        let state = &self.api.state;
        state
            .replace_clients(api_clients(&config, &self.quota))
            .map_err(|e| Failure::config(format!("api: {e}")))?;
        state
            .replace_extraction(config.api.extraction.clone())
            .map_err(|e| Failure::config(format!("api: {e}")))?;
        state.replace_metrics_token(metrics_token(&config.api));
        state.replace_cooldowns(config.cooldowns.policy());
        state
            .replace_feedback_rate(feedback_rate(&config.cooldowns))
            .map_err(|e| Failure::config(format!("api: {e}")))?;
        if let Some(tls) = &self.api.tls {
            tls.reload_or_keep();
        }
        if let (Some(gateway), Some(section)) = (&self.gateway, &config.gateway) {
            let running = &gateway.config;
            let settings = GatewayConfig::from_section(
                section,
                running.worker_id.clone(),
                running.controller_urls.clone(),
                running.worker_token.clone(),
            );
            gateway
                .reload
                .apply(&settings)
                .map_err(|e| Failure::config(format!("gateway: {}", e.0)))?;
        }
        self.controller.apply(config).await;
        Ok(())
    }

    /// Reopens the in-process gateway's access log (a reload that changed nothing).
    pub(crate) fn reopen_access_log(&self) {
        if let Some(gateway) = &self.gateway {
            gateway.reload.reopen_access_log();
        }
    }

    /// Shows a reload's report on the in-process gateway's `/status` too.
    pub(crate) fn show_reload(&self, report: &serde_json::Value) {
        if let Some(gateway) = &self.gateway {
            gateway.reload.set_report(report.clone());
        }
    }

    pub(crate) fn controller(&self) -> &Controller {
        self.controller.controller()
    }

    pub(crate) fn control_addr(&self) -> SocketAddr {
        self.controller.control_addr()
    }

    /// Stops everything, edge first (see the module docs).
    pub(crate) async fn shutdown(self) {
        if let Some(gateway) = self.gateway {
            let _ = gateway.stop.send(true);
            // The gateway bounds its own wait (`shutdown_grace_ms`).
            let _ = gateway.task.await;
        }
        let _ = self.api.stop.send(true);
        let mut task = self.api.task;
        match tokio::time::timeout(self.api.grace, &mut task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("client API server: {e}"),
            Ok(Err(e)) => tracing::warn!("client API task: {e}"),
            Err(_) => {
                tracing::warn!("client API requests still running after the grace; closing them");
                task.abort();
            }
        }
        self.controller.shutdown().await;
        self.quota.close().await;
    }
}

/// The hash `/metrics` checks tokens against, if the file sets one.
fn metrics_token(section: &ApiSection) -> Option<SecretHash> {
    section
        .metrics_token
        .as_ref()
        .and_then(SecretRef::verifier)
        .cloned()
}

/// Clients with an API token, as the client API sees them, each with its quota limits.
fn api_clients(config: &Config, quota: &OpenedQuota) -> Vec<ApiClient> {
    config
        .clients
        .iter()
        .filter_map(|client| {
            Some(ApiClient {
                id: client.id.clone(),
                project: client.project.clone(),
                token_hash: client.api_token_hash()?.clone(),
                admin: client.admin,
                shared_feedback: client.shared_feedback,
                allowed_upstreams: client.allowed_upstreams.clone(),
                allowed_regions: client.allowed_regions.clone(),
                quota: quota.limits_for(&client.project, client.id.as_str()),
                ip_allowlist: proxypool_config::Cidrs::from_valid(&client.ip_allowlist),
                rate_limit: client
                    .rate_limit
                    .as_ref()
                    .and_then(|id| config.policy(id))
                    .map(proxypool_config::RatePolicy::to_throttle),
            })
        })
        .collect()
}

/// The feedback bucket of every API client, from `[cooldowns]`.
fn feedback_rate(cooldowns: &proxypool_config::CooldownsConfig) -> FeedbackRate {
    FeedbackRate {
        per_minute: cooldowns.feedback_per_minute,
        burst: cooldowns.feedback_burst,
    }
}

/// What the client API takes from the command that runs it rather than from the file.
struct ApiExtras {
    reloader: Option<Arc<dyn ConfigReloader>>,
    client_metrics_open: bool,
}

fn start_api(
    controller: &Controller,
    section: &ApiSection,
    cooldowns: &proxypool_config::CooldownsConfig,
    clients: Vec<ApiClient>,
    quota: &OpenedQuota,
    listener: TcpListener,
    extras: ApiExtras,
) -> Result<RunningApi, Failure> {
    let pool = controller.pool();
    let view = Arc::new(ControllerView::new(controller.clone()));
    let ports = ApiPorts::from_pool(pool, quota.port.clone(), view.clone());
    let mut builder = ApiState::builder(ports, clients)
        .limits(section.limits.clone())
        .extraction(section.extraction.clone())
        .cooldowns(cooldowns.policy())
        .feedback_rate(feedback_rate(cooldowns))
        .shield_settings(ShieldSettings::from(&section.shield))
        .metrics_token(metrics_token(section))
        .trusted_proxies(proxypool_config::parse_cidrs(&section.trusted_proxies))
        .ownership_wake(view)
        .secure_cookies(section.tls.is_some() || section.secure_cookies)
        .client_metrics_open(extras.client_metrics_open);
    if let Some(reloader) = extras.reloader {
        builder = builder.reloader(reloader);
    }
    // One recorder per process, whichever role installs it first: the API's `/metrics`
    // shows the controller's and (in `serve`/`dev`) the gateway's metrics too.
    match proxypool_metrics::install() {
        Ok(handle) => builder = builder.metrics(handle),
        Err(_) => tracing::warn!("another metrics recorder is installed; /metrics is off"),
    }
    let state = builder
        .build()
        .map_err(|e| Failure::config(format!("api: {e}")))?;
    let (stop, mut stopped) = watch::channel(false);
    let state_handle = state.clone();
    let router = proxypool_api::router(state);
    let mut limits = proxypool_api::serve_limits(&section.limits);
    let balancers = proxypool_config::parse_cidrs(&section.trusted_proxies);
    if section.proxy_protocol {
        limits.proxy_protocol_from = balancers;
    } else {
        // They name their clients in X-Forwarded-For, which the API reads per request;
        // at accept they are many clients at one address.
        limits.uncounted_per_ip = balancers;
    }
    if let Some(tls) = &section.tls {
        limits.tls = Some(
            proxypool_controller::server_tls(tls)
                .map_err(|e| Failure::config(format!("api.tls: {e}")))?,
        );
    }
    let tls = limits.tls.clone();
    let task = tokio::spawn(async move {
        proxypool_api::serve_with(listener, router, limits, async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
    });
    Ok(RunningApi {
        state: state_handle,
        stop,
        task,
        grace: section.limits.request_timeout.as_duration() + Duration::from_secs(1),
        tls,
    })
}

/// Binds the gateway's listeners and runs it until its stop signal.
async fn start_gateway(
    config: GatewayConfig,
) -> Result<(RunningGateway, [Option<SocketAddr>; 3]), Failure> {
    let gateway = Gateway::bind(config.clone())
        .await
        .map_err(|e| Failure::runtime(format!("gateway: {e}")))?;
    let addrs = [
        gateway.http_addr(),
        gateway.https_addr(),
        gateway.socks5_addr(),
    ];
    let reload = gateway.reloader();
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(gateway.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    Ok((
        RunningGateway {
            stop,
            task,
            reload,
            config,
        },
        addrs,
    ))
}

/// An address a local client can connect to: a wildcard listener is reached on loopback.
pub(crate) fn dialable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    }
}
