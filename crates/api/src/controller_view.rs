//! What the API needs from the controller beyond the activity-pool ports: the upstreams'
//! provider status (the reconcilers' state, shared through the store) and, optionally, a
//! nudge for the ownership manager when an operator changes a worker's mode.
//!
//! The controller implements these from its in-process state; tests implement them in test
//! code. They are traits rather than data so the API always shows the current state.

use async_trait::async_trait;
use proxypool_core::{PoolResult, StoreStatus, UnixMillis, UpstreamId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;

/// How the last fetches of an upstream went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchHealth {
    /// Not fetched yet.
    Pending,
    /// The last fetch succeeded.
    Ok,
    /// The last fetch failed (see `consecutive_failures` and `last_error`).
    Failing,
    /// Configured but switched off.
    Disabled,
}

/// One upstream (vendor) as the provider reconciler sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamStatus {
    pub id: UpstreamId,
    /// The provider kind: `http_list`, `static` or `backconnect`.
    pub provider: String,
    pub health: FetchHealth,
    pub fetch_interval_ms: u64,
    pub proxy_ttl_ms: u64,
    pub max_size: u64,
    pub last_fetch_at_ms: Option<UnixMillis>,
    pub last_success_at_ms: Option<UnixMillis>,
    pub consecutive_failures: u32,
    /// A short error kind (never a vendor's message, which could echo credentials).
    pub last_error: Option<String>,
    /// Proxies the last successful fetch listed.
    pub last_fetched: Option<u64>,
    /// Entries of the last successful list that were not stored, by reason
    /// (`vendor_invalid`, `invalid_expires_at`, `host_not_allowed`, ...): what an operator
    /// reads when a vendor's list leaves the pool empty.
    #[serde(default)]
    pub last_dropped: BTreeMap<String, u32>,
    /// Fields of stored entries of the last list that could not be read and were left out,
    /// by reason (`invalid_issued_at`).
    #[serde(default)]
    pub last_ignored: BTreeMap<String, u32>,
    /// Entries of the last list refused by the host policy (also in `last_dropped`).
    #[serde(default)]
    pub last_refused: u32,
}

/// The upstreams' provider status (the controller implements it from its reconciler).
#[async_trait]
pub trait UpstreamStatusSource: Send + Sync + Debug {
    /// Every configured upstream, in a stable order.
    async fn upstreams(&self) -> PoolResult<Vec<UpstreamStatus>>;

    /// One upstream; `None` when it is not configured.
    async fn upstream(&self, id: &UpstreamId) -> PoolResult<Option<UpstreamStatus>> {
        Ok(self.upstreams().await?.into_iter().find(|u| &u.id == id))
    }

    /// What the controller knows of the pool store's identity (`None`: it keeps none).
    fn store_status(&self) -> Option<StoreStatus> {
        None
    }

    /// What the ownership manager's last round left for extraction (`None`: this
    /// controller does not run it now, or keeps no such view).
    fn extraction(&self) -> Option<ExtractionShare> {
        None
    }
}

/// How the pool is split between the gateways and extraction, as the leading controller's
/// ownership manager last saw it: shown on `/readyz` so an operator sees at once why
/// extraction answers with no proxies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractionShare {
    /// The fraction of the usable proxies kept unowned for extraction.
    pub share: f64,
    /// Usable proxies no gateway holds (what extraction can take).
    pub unowned: u64,
    /// Usable proxies leased to gateways.
    pub leased_to_gateways: u64,
    /// Since when the gateways have held every usable proxy, leaving extraction none.
    pub gateways_hold_all_since_ms: Option<UnixMillis>,
    /// When the round looked.
    pub measured_at_ms: UnixMillis,
}

/// Tells the controller in this process that an operator changed a worker's mode, so its
/// ownership manager runs now instead of at its next interval. Optional: the mode lives in
/// the store, and the leading controller acts on it within one ownership interval anyway.
pub trait OwnershipWake: Send + Sync + Debug {
    fn wake(&self);
}
