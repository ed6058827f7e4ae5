//! Opening the activity-pool store named by the configuration.
//!
//! This is the one place that knows which adapters exist. The memory store comes with an
//! [`AlwaysLeader`] (one controller per process-local pool); a Redis store (`redis`)
//! comes with a [`LeaseLeadership`](crate::leadership::LeaseLeadership) over the same
//! pool, because several controllers may share it.

mod redis;

use crate::config::{StoreConfig, StoreKind};
use crate::leadership::{AlwaysLeader, Leadership};
use proxypool_core::ActivityPool;
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use std::sync::Arc;

/// The store and the leadership that goes with it.
#[derive(Debug, Clone)]
pub struct OpenedStore {
    pub pool: Arc<dyn ActivityPool>,
    pub leadership: Arc<dyn Leadership>,
}

/// Why the store could not be opened. The message never carries a password or a URL's
/// credentials (the configuration refuses those anyway).
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    #[error("cannot open the store: {0}")]
    Open(String),
}

/// Opens the configured store. A Redis store does not connect here: a Redis that is down
/// at start-up makes calls fail (and the controller stand by) until it is reachable, it
/// does not fail the start. Needs a tokio runtime (the lease renewer is spawned on it).
pub async fn open_store(config: &StoreConfig) -> Result<OpenedStore, StoreOpenError> {
    match &config.kind {
        StoreKind::Memory => Ok(OpenedStore {
            pool: Arc::new(MemoryPool::new(MemoryPoolOptions::default())),
            leadership: Arc::new(AlwaysLeader::new()),
        }),
        // Boxed: the durability check makes this future deep, and every embedding
        // future (the binary's, a doc example's) would carry it inline.
        StoreKind::Redis { .. } | StoreKind::Sentinel { .. } => Box::pin(redis::open(config)).await,
    }
}
