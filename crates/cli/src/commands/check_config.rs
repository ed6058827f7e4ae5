//! `proxypool check-config FILE`: loads the file exactly as the serving commands would
//! (environment overrides and secret references included), and prints a short summary,
//! or every problem with its file and key and exits non-zero. Without FILE,
//! `PROXYPOOL_CONFIG` names it, as for the serving commands. Nothing is connected to: a
//! file naming Redis and PostgreSQL checks out with neither running.
//!
//! A file with controller sections is checked as `serve`/`controller` read it (its
//! `[gateway]`, if any, as the in-process gateway); a file with only `[gateway]` is
//! checked as a split gateway's file.

use crate::args::CheckConfigArgs;
use crate::failure::Failure;
use crate::gateway_section::{Placement, gateway_config};
use crate::settings;
use proxypool_config::{Config, ProviderKind, QuotaKind, Role, StoreKind};
use proxypool_core::Secret;
use proxypool_gateway::GatewayConfig;
use std::net::SocketAddr;

pub(crate) async fn run(args: CheckConfigArgs) -> Result<(), Failure> {
    let config = settings::load(&args.file, Role::Check)?;
    let file = args.file.display().to_string();
    if args.effective {
        runnable(&config, &file)?;
        let text = config
            .effective_toml()
            .map_err(|e| Failure::runtime(format!("printing the configuration: {e}")))?;
        print!("{text}");
        return Ok(());
    }
    let lines = summary(&config, &file)?;
    println!("{file}: OK");
    for line in lines {
        println!("  {line}");
    }
    for warning in share_warnings(&config)
        .into_iter()
        .chain(exposure_warnings(&config))
        .chain(inspection_warnings(&config))
    {
        eprintln!("{file}: warning: {warning}");
    }
    Ok(())
}

/// A file that loads but has neither controller sections nor a `[gateway]` runs nothing.
fn runnable(config: &Config, file: &str) -> Result<(), Failure> {
    if !config.has_controller() && config.gateway.is_none() {
        return Err(Failure::config(format!(
            "{file}: invalid configuration:\n  - (top level): no controller sections and no [gateway] table: nothing to run"
        )));
    }
    Ok(())
}

/// The summary lines of a loaded file, after the checks that need more than the loader
/// (something to run, the gateway's settings as its role builds them). `init` runs the
/// same checks on what it writes.
pub(crate) fn summary(config: &Config, file: &str) -> Result<Vec<String>, Failure> {
    runnable(config, file)?;
    let has_controller = config.has_controller();
    let mut lines = Vec::new();
    if has_controller {
        summarize_controller(config, &mut lines);
        lines.push(format!(
            "api         {} connections, {} concurrent requests, extractions of up to {}",
            config.api.limits.max_connections,
            config.api.limits.max_concurrent_requests,
            config.api.extraction.max_count
        ));
    }
    if config.gateway.is_some() {
        let placement = if has_controller {
            Placement::InProcess {
                controller_url: "http://127.0.0.1:1".into(),
                token: Secret::new("check"),
            }
        } else {
            Placement::Remote
        };
        let remote = matches!(placement, Placement::Remote);
        let gateway = gateway_config(config, &placement)?;
        // The CA as the gateway would load it: a key of another certificate fails here.
        proxypool_gateway::check_ca(&gateway)
            .map_err(|e| Failure::config(format!("{file}: gateway: {}", e.0)))?;
        summarize_gateway(&gateway, remote, &mut lines);
    }
    Ok(lines)
}

/// What a file that loads still gets wrong about the split of the pool between a gateway
/// in the controller's process and extraction: with no share kept for extraction and a
/// per-worker target at least as large as everything the upstreams can hold, the one
/// gateway leases every usable proxy and the clients with an API token extract nothing.
/// Only for that shape (`serve`): a split controller cannot know how many gateways will
/// come. Also logged by `serve` at start.
pub(crate) fn share_warnings(config: &Config) -> Vec<String> {
    let ownership = &config.ownership;
    let extracting = config
        .clients
        .iter()
        .filter(|c| c.api_token.is_some())
        .count();
    if !config.has_controller()
        || config.gateway.is_none()
        || extracting == 0
        || ownership.share_for_extraction() > 0.0
    {
        return Vec::new();
    }
    let most: u64 = config
        .upstreams
        .iter()
        .map(|u| match u.provider.kind {
            ProviderKind::Static => u.max_size.min(u.provider.proxies.len() as u64),
            _ => u.max_size,
        })
        .sum();
    let target = ownership.worker_target();
    if most == 0 || most > target as u64 {
        return Vec::new();
    }
    let why = if ownership.extraction_share.is_some() {
        "[ownership] extraction_share = 0".to_owned()
    } else {
        format!("[ownership] per_worker_target = {target} without extraction_share")
    };
    vec![format!(
        "{why} leaves extraction nothing: the in-process gateway may lease {target} proxies, \
         and the upstreams hold at most {most}, so the {extracting} client(s) with an API \
         token would extract none; set extraction_share (e.g. 0.5) or a per_worker_target \
         below {most}"
    )]
}

/// The listeners that serve metrics or operator routes without a token while reachable
/// from another host (not bound to loopback): one line each, naming the key, the address
/// and what anyone who reaches it can read. And worker tokens good for any worker id. Without their token these routes show only the
/// aggregate, never a tenant's series or detail, but that still maps the deployment.
pub(crate) fn exposure_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    let exposed = |addr: &SocketAddr| !addr.ip().is_loopback();
    if let Some(gateway) = &config.gateway
        && let Some(addr) = gateway.listeners.admin.filter(exposed)
        && gateway.admin_token.is_none()
    {
        warnings.push(format!(
            "[gateway.listeners] admin = {addr} is not on loopback and [gateway] admin_token \
             is unset: anyone who reaches it can read /metrics (request, error and byte \
             counts by upstream, the pool and lease sizes) and /status (the controller's \
             address, the snapshot, leases and cooldown counts); set admin_token, or bind \
             it to 127.0.0.1"
        ));
    }
    if config.has_controller() {
        for entry in config.worker_tokens.iter().filter(|t| t.workers.is_empty()) {
            warnings.push(format!(
                "[[worker_tokens]] {name} lists no workers: it acts for any worker id, so a \
                 leaked copy can register as any gateway (fencing its session and taking its \
                 proxies); set workers = [\"<the gateway's worker_id>\"], one entry per \
                 gateway",
                name = entry.name
            ));
        }
    }
    let api = config.listen.api;
    if config.has_controller() && exposed(&api) && config.api.metrics_token.is_none() {
        warnings.push(format!(
            "[listen] api = {api} is not on loopback and [api] metrics_token is unset: \
             anyone who reaches it can read /metrics (every role's counts by upstream, \
             route and outcome, the pool's size and state, the controllers' leadership); \
             set metrics_token, or keep the API on a network only clients and Prometheus \
             reach"
        ));
    }
    warnings
}

/// What a file that loads still gets wrong about TLS inspection: a CA key other users may
/// read (whoever reads it can impersonate any site to every inspected client), and
/// clients asking for inspection from an in-process gateway without `[gateway.inspection]`
/// (it then never inspects: their CONNECTs stay plain tunnels). A controller's file
/// without `[gateway]` is not warned about: its split gateways carry their own table.
pub(crate) fn inspection_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(gateway) = &config.gateway else {
        return warnings;
    };
    match &gateway.inspection {
        Some(inspection) => {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(metadata) = std::fs::metadata(&inspection.ca_key)
                && metadata.permissions().mode() & 0o077 != 0
            {
                warnings.push(format!(
                    "[gateway.inspection] ca_key = {} is readable by other users (mode {:o}):                      whoever reads it can impersonate any site to every inspected client;                      chmod 600 it, owned by the gateway's user",
                    inspection.ca_key.display(),
                    metadata.permissions().mode() & 0o777
                ));
            }
        }
        None if config.has_controller() => {
            let asking: Vec<&str> = config
                .clients
                .iter()
                .filter(|c| !c.inspection.is_off())
                .map(|c| c.id.as_str())
                .collect();
            if !asking.is_empty() {
                warnings.push(format!(
                    "client(s) {} have inspection on or allowed, but [gateway] has no                      [gateway.inspection]: the gateway never inspects, their CONNECTs stay                      plain tunnels (add the table; `proxypool ca init` makes the CA)",
                    asking.join(", ")
                ));
            }
        }
        None => {}
    }
    warnings
}

fn summarize_controller(config: &Config, lines: &mut Vec<String>) {
    let store = match &config.store.kind {
        StoreKind::Memory => "memory (one controller)".to_owned(),
        StoreKind::Redis { url } => format!("redis {url} (prefix {})", config.store.key_prefix),
        StoreKind::Sentinel {
            sentinels, master, ..
        } => format!("redis sentinel {} master {master}", sentinels.join(",")),
        StoreKind::Cluster { nodes, tls } => format!(
            "redis cluster {} ({}seed nodes, prefix {})",
            nodes.join(","),
            if *tls { "TLS, " } else { "" },
            config.store.key_prefix
        ),
    };
    let quota = match &config.quota.kind {
        QuotaKind::Memory => "memory (lost on restart)".to_owned(),
        QuotaKind::Sqlite { path } => format!("sqlite {}", path.display()),
        QuotaKind::Postgres { url } => format!("postgres {url}"),
    };
    lines.push(format!("store       {store}"));
    lines.push(format!("quota       {quota}"));
    lines.push(format!(
        "listen      control {}, api {}",
        config.listen.control, config.listen.api
    ));
    let upstreams: Vec<String> = config
        .upstreams
        .iter()
        .map(|u| match u.provider.kind {
            ProviderKind::Http => format!(
                "{} (http list every {}, ttl {}, max {})",
                u.id, u.provider.interval, u.ttl, u.max_size
            ),
            ProviderKind::Static => format!(
                "{} (static, {} proxies, max {})",
                u.id,
                u.provider.proxies.len(),
                u.max_size
            ),
            ProviderKind::Backconnect => {
                let (gateway, sessions) =
                    u.provider
                        .backconnect
                        .as_ref()
                        .map_or((String::new(), 0), |b| {
                            (
                                format!("{}:{}", b.host, b.port),
                                b.sessions.iter().map(|g| g.count).sum::<u32>(),
                            )
                        });
                format!(
                    "{} (backconnect {gateway}, {sessions} sessions, max {})",
                    u.id, u.max_size
                )
            }
        })
        .collect();
    lines.push(format!(
        "upstreams   {}{}",
        config.upstreams.len(),
        list(&upstreams)
    ));
    let clients: Vec<String> = config
        .clients
        .iter()
        .map(|c| {
            let mut can = Vec::new();
            if c.api_token.is_some() {
                can.push("api");
            }
            if c.gateway_password.is_some() {
                can.push("gateway");
            }
            if c.admin {
                can.push("admin");
            }
            format!("{} ({})", c.id, can.join("+"))
        })
        .collect();
    lines.push(format!(
        "clients     {}{}",
        config.clients.len(),
        list(&clients)
    ));
    let share = config.ownership.share_for_extraction();
    let kept = if share > 0.0 {
        format!("a share of {share} of the usable proxies kept unowned for extraction")
    } else {
        "no share kept for extraction".to_owned()
    };
    lines.push(format!(
        "workers     {} token(s), lease {}, up to {} proxies per worker, {kept}",
        config.worker_tokens.len(),
        config.ownership.lease,
        config.ownership.worker_target()
    ));
}

fn summarize_gateway(gateway: &GatewayConfig, remote: bool, lines: &mut Vec<String>) {
    let listeners = &gateway.listeners;
    let mut on = Vec::new();
    if let Some(addr) = listeners.http {
        on.push(format!("http {addr}"));
    }
    if let Some(addr) = listeners.socks5 {
        on.push(format!("socks5 {addr}"));
    }
    if let Some(addr) = listeners.admin {
        on.push(format!("admin {addr}"));
    }
    let controller = if remote {
        format!("controller {}", gateway.controller_urls.join(", "))
    } else {
        "in-process controller".to_owned()
    };
    lines.push(format!(
        "gateway     worker {}, {controller}; {}",
        gateway.worker_id,
        on.join(", ")
    ));
    if let Some(inspection) = &gateway.inspection {
        lines.push(format!(
            "inspection  CA {}, {} bypassed domain(s), up to {} leaves valid {} each",
            inspection.ca_cert.display(),
            inspection.bypass.len(),
            inspection.leaf_cache,
            inspection.leaf_validity
        ));
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(": {}", items.join(", "))
    }
}
