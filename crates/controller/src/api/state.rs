//! [`ControlState`]: what the control API's handlers share.

use super::auth::WorkerTokens;
use super::fleet::FleetCache;
use crate::clock::SharedClock;
use crate::config::{Config, ControlLimits, SnapshotConfig};
use crate::snapshot::SnapshotPublisher;
use arc_swap::ArcSwap;
use proxypool_core::ActivityPool;
use std::sync::Arc;
use tokio::sync::Notify;

/// What the control API handlers share.
#[derive(Debug, Clone)]
pub struct ControlState {
    pub pool: Arc<dyn ActivityPool>,
    pub clock: SharedClock,
    pub publisher: Arc<SnapshotPublisher>,
    pub tokens: Arc<WorkerTokens>,
    pub snapshot: SnapshotConfig,
    /// Body caps per route.
    pub limits: ControlLimits,
    /// Wakes the ownership manager (a new session should get proxies promptly).
    pub wake_ownership: Arc<Notify>,
    /// The configuration in force, swapped whole on reload: the projects a report's
    /// cooldowns may name are the configured clients' (read at each report).
    pub config: Arc<ArcSwap<Config>>,
    /// The gateway fleet's members, cached per process.
    pub fleet: Arc<FleetCache>,
}
