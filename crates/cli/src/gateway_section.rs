//! Turning the file's `[gateway]` table into the gateway's settings, for where it runs:
//!
//! - [`Placement::Remote`] (`proxypool gateway`): its own `worker_id`, `controller_url`
//!   and worker token from the table (the configuration crate required them).
//! - [`Placement::InProcess`] (`serve`, `dev`): the gateway talks to this process's own
//!   controller over loopback with a token made up at start, so `controller_url` and the
//!   token reference are ignored (the same file can then also feed split gateways) and
//!   `worker_id` defaults to `local`.

use crate::failure::Failure;
use proxypool_config::{Config, GatewaySection, LOCAL_WORKER};
use proxypool_core::{Secret, WorkerId};
use proxypool_gateway::GatewayConfig;

/// Where the gateway runs relative to its controller.
#[derive(Debug, Clone)]
pub(crate) enum Placement {
    Remote,
    InProcess {
        controller_url: String,
        token: Secret,
    },
}

/// The gateway settings of `config`'s `[gateway]` for `placement`.
pub(crate) fn gateway_config(
    config: &Config,
    placement: &Placement,
) -> Result<GatewayConfig, Failure> {
    let section = config.gateway.as_ref().ok_or_else(|| {
        Failure::config("gateway: missing: add a [gateway] table (see examples/gateway.toml)")
    })?;
    let gateway = match placement {
        Placement::Remote => {
            let (Some(worker), Some(url), Some(token)) = (
                section.worker_id.clone(),
                section.controller_url.clone(),
                section
                    .worker_token
                    .as_ref()
                    .and_then(|t| t.plain())
                    .cloned(),
            ) else {
                return Err(Failure::config(
                    "gateway: a split gateway needs worker_id, controller_url and worker_token",
                ));
            };
            GatewayConfig::from_section(section, worker, url.0, token)
        }
        Placement::InProcess {
            controller_url,
            token,
        } => {
            if section.controller_url.is_some() || section.worker_token.is_some() {
                tracing::info!(
                    "the in-process gateway talks to this process's controller; \
                     gateway.controller_url and gateway.worker_token are not used"
                );
            }
            GatewayConfig::from_section(
                section,
                worker_id(section)?,
                vec![controller_url.clone()],
                token.clone(),
            )
        }
    };
    gateway
        .validate()
        .map_err(|e| Failure::config(format!("gateway: {}", e.0)))?;
    Ok(gateway)
}

/// The worker id of an in-process gateway: the table's, or `local`.
pub(crate) fn worker_id(section: &GatewaySection) -> Result<WorkerId, Failure> {
    match &section.worker_id {
        Some(worker) => Ok(worker.clone()),
        None => {
            WorkerId::new(LOCAL_WORKER).map_err(|e| Failure::runtime(format!("worker id: {e}")))
        }
    }
}
