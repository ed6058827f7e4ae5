//! `proxypool controller --config FILE`: the controller and the client API, for split
//! deployments where gateways run as `proxypool gateway` elsewhere. Any number of
//! controllers may run against one Redis store; a lease decides which one runs the
//! vendor fetches, health checks and ownership moves, and every one serves both APIs.

use crate::args::ConfigArg;
use crate::config_file::ConfigFile;
use crate::failure::Failure;
use crate::signal::Shutdown;
use crate::stack::Stack;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let file = ConfigFile::read(&args.config)?;
    let config = file.controller()?;
    let api = file.api()?;
    if config.worker_tokens.is_empty() {
        tracing::warn!("no [[worker_tokens]]: no gateway can register with this controller");
    }
    let stack = Stack::start(config, &api, None).await?;
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
