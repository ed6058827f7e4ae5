//! The configuration file's shape: one serde struct per TOML table, for every role.
//!
//! Every table rejects unknown keys, so a typo fails the load instead of silently falling
//! back to a default. Secrets appear only as [`crate::SecretRef`]s; what a reference
//! resolves to is filled in by the loader and never printed. Here are the whole file
//! ([`Config`]) and `[listen]`; every other section has a module of its own, which also
//! checks it.

use crate::api::ApiSection;
use crate::client::ClientConfig;
use crate::control::{ControlSection, WorkerTokenConfig};
use crate::gateway::GatewaySection;
use crate::limiter::RatePolicy;
use crate::quota::QuotaStoreConfig;
use crate::store::StoreConfig;
use crate::tuning::{
    CheckerConfig, CooldownsConfig, MaintenanceConfig, OwnershipConfig, SnapshotConfig,
};
use crate::upstream::UpstreamConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The whole file: every role reads the sections it needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub quota: QuotaStoreConfig,
    #[serde(default)]
    pub listen: ListenConfig,
    /// The worker control API's listener limits.
    #[serde(default)]
    pub control: ControlSection,
    #[serde(default)]
    pub snapshot: SnapshotConfig,
    #[serde(default)]
    pub ownership: OwnershipConfig,
    #[serde(default)]
    pub checker: CheckerConfig,
    #[serde(default)]
    pub maintenance: MaintenanceConfig,
    /// How long a ban keeps a proxy off a domain (gateways' bans and clients' feedback).
    #[serde(default)]
    pub cooldowns: CooldownsConfig,
    #[serde(default)]
    pub worker_tokens: Vec<WorkerTokenConfig>,
    #[serde(default)]
    pub policies: Vec<RatePolicy>,
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
    /// The client API (served by `serve` and `controller`).
    #[serde(default)]
    pub api: ApiSection,
    /// A gateway worker: the in-process one of `serve`, or a split `proxypool gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySection>,
    /// How the process logs (every role).
    #[serde(default)]
    pub log: crate::log::LogSection,
}

impl Config {
    /// Whether the file configures a controller: any of its sections, or `[api]`, which
    /// only a controller serves. A gateway-only file does not.
    pub fn has_controller(&self) -> bool {
        let empty = Config {
            gateway: self.gateway.clone(),
            log: self.log.clone(),
            ..Config::default()
        };
        *self != empty
    }

    /// The policy `id` names.
    pub fn policy(&self, id: &str) -> Option<&RatePolicy> {
        self.policies.iter().find(|p| p.id.as_deref() == Some(id))
    }
}

/// Listening addresses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// The worker control API (gateways).
    #[serde(default = "default_control_addr")]
    pub control: SocketAddr,
    /// The client API (extraction, inventory, admin).
    #[serde(default = "default_api_addr")]
    pub api: SocketAddr,
}

fn default_control_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7070))
}

fn default_api_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7080))
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            control: default_control_addr(),
            api: default_api_addr(),
        }
    }
}
