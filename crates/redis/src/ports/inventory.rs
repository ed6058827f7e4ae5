//! InventoryReader: `inventory.lua` computes one upstream's view exactly, or answers
//! `scan_budget` rather than approximate.

use crate::codec::record::status_of;
use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::{
    InventoryReader, InventoryView, PoolError, PoolResult, UnixMillis, UpstreamId,
};
use std::collections::BTreeMap;

#[async_trait]
impl InventoryReader for GroupPool {
    async fn inventory(&self, now: UnixMillis, upstream: &UpstreamId) -> PoolResult<InventoryView> {
        let args = vec![
            upstream.to_string(),
            self.options.inventory_scan_budget.to_string(),
        ];
        let reply = self
            .call(&self.scripts.inventory, now, Side::Read, args)
            .await?;
        let mut by_status = BTreeMap::new();
        let listed = reply.text(3)?;
        for pair in listed.split(',').filter(|p| !p.is_empty()) {
            let (code, count) = pair
                .split_once('=')
                .ok_or_else(|| PoolError::corrupt("undecodable inventory in redis"))?;
            let count = count
                .parse()
                .map_err(|_| PoolError::corrupt("undecodable inventory in redis"))?;
            by_status.insert(status_of(code)?, count);
        }
        Ok(InventoryView {
            upstream: upstream.clone(),
            unextracted: reply.number(0)?,
            managed: reply.number(1)?,
            available_slots: reply.number(2)?,
            by_status,
        })
    }
}
