//! `proxypool controller --config FILE`: the controller and the client API, for split
//! deployments where gateways run as `proxypool gateway` elsewhere. Any number of
//! controllers may run against one Redis store; a lease decides which one runs the
//! vendor fetches, health checks and ownership moves, and every one serves both APIs.

use crate::args::ConfigArg;
use crate::failure::Failure;
use crate::reload::{Reloader, serve_until_shutdown};
use crate::settings;
use crate::signal::Shutdown;
use crate::stack::{Ledger, Stack};
use proxypool_config::Role;
use std::sync::Arc;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let config = settings::load(&args.config, Role::Controller)?;
    let (mut reloader, requests) =
        Reloader::new(args.config.clone(), Role::Controller, config.clone());
    if config.worker_tokens.is_empty() {
        tracing::warn!("no [[worker_tokens]]: no gateway can register with this controller");
    }
    let mut stack = Stack::start(config, None, Some(Arc::new(requests)), Ledger::Durable).await?;
    tracing::info!(
        api = %stack.api_addr,
        control = %stack.control_addr(),
        "proxypool controller is running"
    );
    serve_until_shutdown(&shutdown, &mut reloader, &mut stack).await?;
    stack.shutdown().await;
    tracing::info!("proxypool controller stopped");
    Ok(())
}
