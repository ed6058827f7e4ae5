//! [`open_store`]: the configured store kind to an opened store.

use super::opened::{OpenedStore, StoreOpenError};
use super::redis;
use crate::config::{StoreConfig, StoreKind};
use crate::leadership::AlwaysLeader;
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use std::sync::Arc;

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
        StoreKind::Redis { .. } | StoreKind::Sentinel { .. } | StoreKind::Cluster { .. } => {
            Box::pin(redis::open(config)).await
        }
    }
}
