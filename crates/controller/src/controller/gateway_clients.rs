//! The gateway clients every snapshot carries, from the configuration.

use crate::config::Config;
use proxypool_core::control::{GatewayClient, RateLimitSpec};

/// The gateway clients every snapshot carries: clients with a gateway password.
pub(super) fn gateway_clients(config: &Config) -> Vec<GatewayClient> {
    config
        .clients
        .iter()
        .filter_map(|client| {
            let password_hash = client.gateway_password_hash()?.clone();
            let rate_limit = client.rate_limit.as_ref().and_then(|id| {
                config.policy(id).map(|p| RateLimitSpec {
                    id: p.id.clone(),
                    requests_per_second: p.requests_per_second,
                    burst: p.burst,
                    hard_lockout_ms: p.hard_lockout.map(|m| m.as_ms()),
                    max_soft_violations: p.max_soft_violations,
                })
            });
            Some(GatewayClient {
                id: client.id.clone(),
                project: client.project.clone(),
                password_hash,
                allowed_upstreams: client.allowed_upstreams.clone(),
                allowed_regions: client.allowed_regions.clone(),
                ip_allowlist: client.ip_allowlist.clone(),
                rate_limit,
                max_connections: client.max_connections,
                allowed_ports: client.allowed_ports.clone(),
                ban_statuses: client.ban_statuses.clone(),
                rotation: client.rotation.map(|r| r.to_snapshot()),
                inspection: client.inspection,
                tls_names: client.tls_names.clone(),
            })
        })
        .collect()
}
