//! Opening the activity-pool store named by the configuration.
//!
//! This is the one place that knows which adapters exist. The memory store comes with an
//! [`AlwaysLeader`]; a Redis store will come with its fenced lease. Until the Redis adapter
//! is part of this build, a Redis URL is refused here with a clear error (the config itself
//! already accepts and validates it).

use crate::config::{StoreConfig, StoreKind};
use crate::leadership::{AlwaysLeader, Leadership};
use proxypool_core::ActivityPool;
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use std::sync::Arc;

/// The store and the leadership that goes with it.
#[derive(Clone)]
pub struct OpenedStore {
    pub pool: Arc<dyn ActivityPool>,
    pub leadership: Arc<dyn Leadership>,
}

// The store is a trait object without `Debug`; show what identifies this value.
impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("leadership", &self.leadership)
            .finish_non_exhaustive()
    }
}

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    #[error("{0} store not available in this build")]
    NotAvailable(&'static str),
    #[error("cannot open the store: {0}")]
    Open(String),
}

/// Opens the configured store.
pub async fn open_store(config: &StoreConfig) -> Result<OpenedStore, StoreOpenError> {
    match &config.kind {
        StoreKind::Memory => Ok(OpenedStore {
            pool: Arc::new(MemoryPool::new(MemoryPoolOptions::default())),
            leadership: Arc::new(AlwaysLeader::new()),
        }),
        StoreKind::Redis { .. } | StoreKind::Sentinel { .. } => open_redis(config).await,
    }
}

/// The Redis adapter's entry point: connect with `config.kind` and `config.password`, and
/// pair the pool with a store-backed lease.
async fn open_redis(_config: &StoreConfig) -> Result<OpenedStore, StoreOpenError> {
    Err(StoreOpenError::NotAvailable("redis"))
}
