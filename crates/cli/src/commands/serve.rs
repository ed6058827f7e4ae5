//! `proxypool serve --config FILE`: controller, client API and a gateway in one process
//! for one machine. The gateway reaches the controller over the worker control API on
//! loopback with a token made up for this run.

use crate::args::ConfigArg;
use crate::config_file::ConfigFile;
use crate::failure::Failure;
use crate::gateway_section::{self, Placement, gateway_config};
use crate::signal::Shutdown;
use crate::stack::{LoopbackWorker, Stack};

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let file = ConfigFile::read(&args.config)?;
    let mut config = file.controller()?;
    let api = file.api()?;
    let worker = LoopbackWorker::new(file.gateway_table().and_then(gateway_section::worker_id))?;
    worker.authorize(&mut config)?;
    // Checked before anything starts, with a placeholder controller URL.
    gateway_config(&file, placement(&worker, "http://127.0.0.1:1".into()))?;
    let build = |url: String| gateway_config(&file, placement(&worker, url));
    let stack = Stack::start(config, &api, Some(&build)).await?;
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
