//! `proxypool controller --config FILE`: the controller and the client API, for split
//! deployments where gateways run as `proxypool gateway` elsewhere. Any number of
//! controllers may run against one Redis store; a lease decides which one runs the
//! vendor fetches, health checks and ownership moves, and every one serves both APIs.

use crate::args::ConfigArg;
use crate::failure::Failure;
use crate::settings;
use crate::signal::Shutdown;
use crate::stack::Stack;
use proxypool_config::Role;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let config = settings::load(&args.config, Role::Controller)?;
    if config.worker_tokens.is_empty() {
        tracing::warn!("no [[worker_tokens]]: no gateway can register with this controller");
    }
    let stack = Stack::start(config, None).await?;
    tracing::info!(
        api = %stack.api_addr,
        control = %stack.control_addr(),
        "proxypool controller is running"
    );
    shutdown.wait().await;
    stack.shutdown().await;
    tracing::info!("proxypool controller stopped");
    Ok(())
}
