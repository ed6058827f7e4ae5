//! `proxypool gateway --config FILE`: one gateway worker. It registers with the
//! controller at `[gateway] controller_url`, pulls its snapshot of leased proxies and
//! serves clients from it; on shutdown it finishes in-flight work within
//! `shutdown_grace` and ends its session, and the controller hands its proxies to
//! other gateways at once (after a crash they wait for the leases to lapse).

use crate::args::ConfigArg;
use crate::failure::Failure;
use crate::gateway_section::{Placement, gateway_config};
use crate::reload::{Reloader, SplitGateway, gateway_until_shutdown};
use crate::settings;
use crate::signal::Shutdown;
use proxypool_config::Role;
use proxypool_gateway::Gateway;

pub(crate) async fn run(args: ConfigArg) -> Result<(), Failure> {
    let shutdown = Shutdown::install().map_err(|e| Failure::runtime(format!("signals: {e}")))?;
    let file = settings::load(&args.config, Role::Gateway)?;
    let config = gateway_config(&file, &Placement::Remote)?;
    let (mut reloader, _requests) = Reloader::new(args.config.clone(), Role::Gateway, file);
    let (worker, controller) = (config.worker_id.clone(), config.controller_urls.join(", "));
    let gateway = Gateway::bind(config)
        .await
        .map_err(|e| Failure::runtime(format!("gateway: {e}")))?;
    tracing::info!(
        %worker,
        %controller,
        http = ?gateway.http_addr(),
        https = ?gateway.https_addr(),
        socks5 = ?gateway.socks5_addr(),
        admin = ?gateway.admin_addr(),
        "proxypool gateway is running"
    );
    let mut target = SplitGateway {
        reload: gateway.reloader(),
    };
    gateway_until_shutdown(gateway.run(shutdown.wait()), &mut reloader, &mut target).await?;
    tracing::info!("proxypool gateway stopped");
    Ok(())
}
