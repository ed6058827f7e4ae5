//! `proxypool serve --config FILE`: controller, client API and a gateway in one process
//! for one machine. The gateway reaches the controller over the worker control API on
//! loopback with a token made up for this run.
//!
//! The gateway and extraction share the pool: unless the file says otherwise, half of the
//! usable proxies stay unowned for extraction (`[ownership] extraction_share`, resolved
//! for this role by the configuration's loader), and a file that leaves extraction nothing
//! is warned about at start, as `check-config` does.

use crate::args::ConfigArg;
use crate::failure::Failure;
use crate::gateway_section::gateway_config;
use crate::reload::{Reloader, serve_until_shutdown};
use crate::settings;
use crate::signal::Shutdown;
use crate::stack::{Ledger, LoopbackWorker, Stack};
use proxypool_config::Role;
use std::sync::Arc;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let mut config = settings::load(&args.config, Role::Serve)?;
    for warning in crate::commands::check_config::share_warnings(&config) {
        tracing::warn!("{warning}");
    }
    let (mut reloader, requests) = Reloader::new(args.config.clone(), Role::Serve, config.clone());
    let (worker, token) = LoopbackWorker::authorized_in(&mut config)?;
    reloader.keep_tokens(vec![token]);
    // Checked before anything starts, with a placeholder controller URL.
    gateway_config(&config, &worker.placement("http://127.0.0.1:1".into()))?;
    let file = config.clone();
    let build = |url: String| gateway_config(&file, &worker.placement(url));
    let mut stack = Stack::start(
        config,
        Some(&build),
        Some(Arc::new(requests)),
        Ledger::Durable,
    )
    .await?;
    tracing::info!(
        api = %stack.api_addr,
        control = %stack.control_addr(),
        http = ?stack.http_addr,
        https = ?stack.https_addr,
        socks5 = ?stack.socks5_addr,
        worker = %worker.worker,
        "proxypool serve is running"
    );
    serve_until_shutdown(&shutdown, &mut reloader, &mut stack).await?;
    stack.shutdown().await;
    tracing::info!("proxypool serve stopped");
    Ok(())
}
