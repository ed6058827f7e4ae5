//! `proxypool serve --config FILE`: controller, client API and a gateway in one process
//! for one machine. The gateway reaches the controller over the worker control API on
//! loopback with a token made up for this run.

use crate::args::ConfigArg;
use crate::failure::Failure;
use crate::gateway_section::{self, Placement, gateway_config};
use crate::settings;
use crate::signal::Shutdown;
use crate::stack::{LoopbackWorker, Stack};
use proxypool_config::Role;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let mut config = settings::load(&args.config, Role::Serve)?;
    let section = config
        .gateway
        .as_ref()
        .ok_or_else(|| Failure::config("gateway: missing"))?;
    let worker = LoopbackWorker::new(gateway_section::worker_id(section)?);
    worker.authorize(&mut config)?;
    // Checked before anything starts, with a placeholder controller URL.
    gateway_config(&config, &placement(&worker, "http://127.0.0.1:1".into()))?;
    let file = config.clone();
    let build = |url: String| gateway_config(&file, &placement(&worker, url));
    let stack = Stack::start(config, Some(&build)).await?;
    tracing::info!(
        api = %stack.api_addr,
        control = %stack.control_addr(),
        http = ?stack.http_addr,
        socks5 = ?stack.socks5_addr,
        worker = %worker.worker,
        "proxypool serve is running"
    );
    shutdown.wait().await;
    stack.shutdown().await;
    tracing::info!("proxypool serve stopped");
    Ok(())
}

fn placement(worker: &LoopbackWorker, controller_url: String) -> Placement {
    Placement::InProcess {
        controller_url,
        token: worker.token.clone(),
    }
}
