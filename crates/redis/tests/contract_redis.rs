//! The whole activity-pool contract suite (the same functions MemoryPool runs) against
//! RedisPool on a private redis-server shared by this test binary; every pool gets its own
//! key prefix, so tests run in parallel without seeing each other.

mod support;

use async_trait::async_trait;
use proxypool_pool::contract::{PoolFactory, ScanLimits};
use proxypool_redis::{RedisPool, RedisPoolOptions};

#[derive(Debug, Clone, Copy)]
struct RedisFactory;

#[async_trait]
impl PoolFactory for RedisFactory {
    type Pool = RedisPool;

    async fn create(&self, limits: ScanLimits) -> Option<RedisPool> {
        let server = support::shared_server()?;
        Some(support::pool_on(
            server.url(),
            RedisPoolOptions {
                key_prefix: "contract".to_owned(),
                extract_scan_budget: limits.extract_scan_budget,
                inventory_scan_budget: limits.inventory_scan_budget,
                call_timeout: support::TEST_TIMEOUT,
                ..RedisPoolOptions::default()
            },
        ))
    }
}

proxypool_pool::contract_suite!(RedisFactory);
proxypool_pool::lease_contract_suite!(RedisFactory);
