//! The `UsageReader` port of MemoryPool: each client's usage as its state accounts it
//! (`usage_state.rs`).

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::usage::ClientUsage;
use proxypool_core::{ClientId, PoolResult, UnixMillis, UsageReader};

#[async_trait]
impl UsageReader for MemoryPool {
    async fn usage(&self, now: UnixMillis, clients: &[ClientId]) -> PoolResult<Vec<ClientUsage>> {
        let state = self.lock()?;
        Ok(clients
            .iter()
            .map(|client| state.usage.read(now, client))
            .collect())
    }
}
