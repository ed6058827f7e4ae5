//! The whole activity-pool contract suite (the same functions MemoryPool runs) against
//! RedisPool on a private redis-server shared by this test binary; every pool gets its own
//! key prefix, so tests run in parallel without seeing each other.

use crate::support;

use async_trait::async_trait;
use proxypool_pool::contract::{PoolFactory, ScanLimits};
use proxypool_redis::RedisPool;

#[derive(Debug, Clone, Copy)]
struct RedisFactory;

#[async_trait]
impl PoolFactory for RedisFactory {
    type Pool = RedisPool;

    async fn create(&self, limits: ScanLimits) -> Option<RedisPool> {
        Some(support::contract_pool(
            support::shared_server()?.url(),
            limits,
            1,
        ))
    }
}

proxypool_pool::contract_suite!(RedisFactory);
proxypool_pool::lease_contract_suite!(RedisFactory);
