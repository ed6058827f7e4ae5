//! TicketKeyStore: `ticket_key.lua` stores the caller's fresh key only when the store has
//! none (SET NX) and answers the stored one.

use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::{PoolError, PoolResult, TicketKey, TicketKeyStore, UnixMillis};

#[async_trait]
impl TicketKeyStore for GroupPool {
    async fn ticket_key(&self, now: UnixMillis) -> PoolResult<TicketKey> {
        // Lua has no CSPRNG: each caller offers a key, the first stored wins.
        let offered = TicketKey::generate().map_err(|e| PoolError::store_down(e.to_string()))?;
        let reply = self
            .call(
                &self.scripts.ticket_key,
                now,
                Side::Read,
                vec![offered.to_hex()],
            )
            .await?;
        TicketKey::from_hex(&reply.text(0)?)
            .map_err(|_| PoolError::corrupt("the stored ticket key is not 64 hex digits"))
    }
}
