//! The `TicketKeyStore` port of MemoryPool: the key is made on the first call, under the
//! pool's lock, so racing callers all get the one stored first; it lives as long as the
//! pool (one key per store incarnation, as in Redis).

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::{PoolError, PoolResult, TicketKey, TicketKeyStore, UnixMillis};

#[async_trait]
impl TicketKeyStore for MemoryPool {
    async fn ticket_key(&self, _now: UnixMillis) -> PoolResult<TicketKey> {
        let mut state = self.lock()?;
        if let Some(key) = &state.ticket_key {
            return Ok(key.clone());
        }
        let key = TicketKey::generate().map_err(|e| PoolError::store_down(e.to_string()))?;
        state.ticket_key = Some(key.clone());
        Ok(key)
    }
}
