//! ProxyLister for MemoryPool: one bounded scan of the records under the lock.

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::listing::check_limit;
use proxypool_core::{
    ListedProxy, PoolError, PoolResult, ProxyListFilter, ProxyLister, ProxyPage, Unavailable,
    UnixMillis,
};

#[async_trait]
impl ProxyLister for MemoryPool {
    async fn list_proxies(
        &self,
        now: UnixMillis,
        filter: &ProxyListFilter,
        limit: usize,
    ) -> PoolResult<ProxyPage> {
        check_limit(limit)?;
        let state = self.lock()?;
        // The same bound as an inventory read: past it the answer would cost too much to
        // hold the lock for, so the caller hears Unavailable rather than a partial page.
        if state.records.len() > self.options.inventory_scan_budget {
            return Err(PoolError::Unavailable(Unavailable::ScanBudget));
        }
        let mut matching: Vec<_> = state
            .records
            .values()
            .filter(|record| filter.matches(now, record))
            .collect();
        matching.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let more = matching.len() > limit;
        matching.truncate(limit);
        let proxies: Vec<ListedProxy> = matching
            .into_iter()
            .map(|record| {
                ListedProxy::new(
                    now,
                    record,
                    state.assignments.get(&record.id),
                    state.extracted_by.get(&record.id),
                )
            })
            .collect();
        let next = if more {
            proxies.last().map(|p| p.id.clone())
        } else {
            None
        };
        Ok(ProxyPage { proxies, next })
    }
}
