//! ProxyLister: `proxies.lua` reads one page (records with their assignments) in one
//! atomic call; the rows are built by core's `ListedProxy::new`, as MemoryPool's are.

use crate::codec::record::status_code;
use crate::codec::{assignment, opt_to_field, record};
use crate::group::{GroupPool, Side};
use async_trait::async_trait;
use proxypool_core::listing::check_limit;
use proxypool_core::{
    ClientId, ListedProxy, PoolError, PoolResult, ProxyListFilter, ProxyLister, ProxyPage,
    UnixMillis,
};

#[async_trait]
impl ProxyLister for GroupPool {
    async fn list_proxies(
        &self,
        now: UnixMillis,
        filter: &ProxyListFilter,
        limit: usize,
    ) -> PoolResult<ProxyPage> {
        check_limit(limit)?;
        let args = vec![
            opt_to_field(filter.after.as_ref()),
            opt_to_field(filter.upstream.as_ref()),
            opt_to_field(filter.status.map(status_code)),
            limit.to_string(),
            self.options.inventory_scan_budget.to_string(),
        ];
        let reply = self
            .call(&self.scripts.proxies, now, Side::Read, args)
            .await?;
        let more = reply.number(0)? == 1;
        let rows = reply.texts()?;
        let rows = rows.get(1..).unwrap_or_default();
        if rows.len() % 5 != 0 {
            return Err(PoolError::corrupt("undecodable proxy listing in redis"));
        }
        let mut proxies = Vec::with_capacity(rows.len() / 5);
        for row in rows.chunks_exact(5) {
            let record = record::decode(&row[1])?;
            let assignment = if row[2].is_empty() {
                None
            } else {
                Some(assignment::decode(&row[0], &row[2], &row[3])?)
            };
            let extracted_by =
                if row[4].is_empty() {
                    None
                } else {
                    Some(ClientId::new(&row[4]).map_err(|_| {
                        PoolError::corrupt("undecodable extracting client in redis")
                    })?)
                };
            proxies.push(ListedProxy::new(
                now,
                &record,
                assignment.as_ref(),
                extracted_by.as_ref(),
            ));
        }
        let next = if more {
            proxies.last().map(|p| p.id.clone())
        } else {
            None
        };
        Ok(ProxyPage { proxies, next })
    }
}
