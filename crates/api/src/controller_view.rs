//! What the API needs from the controller beyond the activity-pool ports: the upstreams'
//! provider status (the reconciler's state) and, optionally, a way to stop assigning new
//! proxies to a worker being drained.
//!
//! The controller implements these from its in-process state; tests implement them in test
//! code. They are traits rather than data so the API always shows the current state.

use async_trait::async_trait;
use proxypool_core::{PoolResult, UnixMillis, UpstreamId, WorkerId};
use serde::{Deserialize, Serialize};
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
    /// The provider kind, e.g. `http_list` or `static`.
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
}

/// Keeps a drained worker drained: without it the ownership manager would hand the worker
/// new proxies on its next pass. Optional; the admin drain works without it but then only
/// drains what the worker owns at that moment.
#[async_trait]
pub trait WorkerCordon: Send + Sync + Debug {
    /// Stop assigning proxies to `worker` (idempotent).
    async fn cordon(&self, worker: &WorkerId) -> PoolResult<()>;
}
