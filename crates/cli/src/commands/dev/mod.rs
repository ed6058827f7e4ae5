//! `proxypool dev`: the whole system in one process on loopback, with a simulated vendor,
//! so a newcomer sees it work within a minute of the build.
//!
//! What runs: a [`SimVendor`] (upstream HTTP and SOCKS5 proxies leaving from their own
//! 127.0.0.x exits, a rotating vendor list, an origin that echoes the exit it sees), and
//! the same controller + client API + gateway stack as `serve`, on the memory store with
//! the SQLite quota under `--data-dir`. One client (`dev`) gets a generated gateway
//! password and API token. Half of the proxies are leased to the gateway; the other half
//! stay unowned, so extraction has inventory too.
//!
//! `--ban-exit EXIT=HOST[:STATUS]` makes the origin refuse one exit for one host name
//! (names under `.test` reach the origin through the simulated proxies), so per-domain
//! cooldowns and the gateway's retry through another proxy can be watched offline.
//!
//! The banner with ready-to-paste commands is printed only once those commands work: a
//! request through each gateway listener reached the origin and every simulated proxy
//! passed its health check (see [`ready`]).
//!
//! - [`setup`]: the generated controller configuration and credentials.
//! - [`ready`]: the readiness probes.
//! - [`banner`]: what is printed.
//! - [`tls`]: the TLS listener's self-signed certificate and its probe.
//! - [`inspection`]: TLS inspection's CA (kept in the data directory) and an https origin.

mod banner;
mod inspection;
mod ready;
mod setup;
mod tls;

use crate::args::DevArgs;
use crate::commands::sim::vendor_config;
use crate::failure::Failure;
use crate::gateway_section::gateway_config;
use crate::signal::Shutdown;
use crate::stack::{Ledger, LoopbackWorker, Stack};
use proxypool_gateway::GatewayConfig;
use proxypool_sim::SimVendor;
use std::time::{Duration, Instant};

pub(crate) async fn run(mut args: DevArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", args.data_dir.display())))?;
    // The generated configuration anchors relative paths at the data directory, and the
    // banner's commands run from the caller's directory: only an absolute path serves both.
    args.data_dir = std::fs::canonicalize(&args.data_dir).map_err(|e| {
        Failure::runtime(format!("cannot resolve {}: {e}", args.data_dir.display()))
    })?;
    let sim = SimVendor::start(vendor_config(args.proxies, args.proxy_ttl))
        .await
        .map_err(|e| Failure::runtime(format!("simulated vendor: {e}")))?;
    for ban in &args.ban_exit {
        let status = proxypool_sim::StatusCode::from_u16(ban.status)
            .map_err(|e| Failure::config(format!("--ban-exit: {e}")))?;
        sim.origin()
            .ban(std::net::IpAddr::V4(ban.exit), &ban.host, status);
    }
    let credentials = setup::Credentials::generate();
    let banned_hosts: Vec<String> = args.ban_exit.iter().map(|ban| ban.host.clone()).collect();
    let inspection = inspection::start(&args.data_dir, &banned_hosts).await?;
    for ban in &args.ban_exit {
        if let Ok(status) = proxypool_sim::StatusCode::from_u16(ban.status) {
            inspection
                .origin
                .ban(std::net::IpAddr::V4(ban.exit), &ban.host, status);
        }
    }
    let listener_cert = tls::ensure(&args.data_dir)?;
    let mut config =
        setup::controller_config(&args, &sim, &credentials, &listener_cert, &inspection)?;
    let (worker, _) = LoopbackWorker::authorized_in(&mut config)?;
    let file = config.clone();
    let build = |url: String| -> Result<GatewayConfig, Failure> {
        gateway_config(&file, &worker.placement(url))
    };
    let stack = Stack::start(config, Some(&build), None, Ledger::ThisRun)
        .await
        .map_err(|mut failure| {
            if failure.message.contains("in use") {
                failure.message.push_str(
                    "\nanother proxypool dev may be running; or pick other ports with \
                     --http/--https/--socks5/--api (port 0 = any free port)",
                );
            }
            failure
        })?;
    let endpoints = banner::Endpoints::new(&stack, listener_cert)?;

    let deadline = Duration::from_secs(args.ready_timeout);
    let waited = tokio::select! {
        ready = ready::wait(&stack, &sim, &endpoints, &credentials, usize::from(args.proxies), deadline) => Some(ready),
        () = shutdown.wait() => None,
    };
    match waited {
        Some(Ok(())) => {
            banner::print(
                &endpoints,
                &sim,
                &credentials,
                &args,
                &inspection,
                started.elapsed(),
            );
            tracing::info!(
                ready_after_ms = started.elapsed().as_millis() as u64,
                "dev ready"
            );
            shutdown.wait().await;
        }
        Some(Err(failure)) => {
            stack.shutdown().await;
            return Err(failure);
        }
        None => {}
    }
    stack.shutdown().await;
    drop(sim);
    tracing::info!("proxypool dev stopped");
    Ok(())
}
