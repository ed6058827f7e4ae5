//! The whole activity-pool contract suite against RedisPool with its keys spread over
//! three shard groups on one redis-server: every call that spans groups (extraction,
//! upserts near max_size, sessions, the journal, leases and fencing) answers exactly as
//! one group does. `contract_cluster.rs` runs the same groups over a cluster's primaries.

use crate::support;

use async_trait::async_trait;
use proxypool_pool::contract::{PoolFactory, ScanLimits};
use proxypool_redis::RedisPool;

#[derive(Debug, Clone, Copy)]
struct GroupsFactory;

#[async_trait]
impl PoolFactory for GroupsFactory {
    type Pool = RedisPool;

    async fn create(&self, limits: ScanLimits) -> Option<RedisPool> {
        Some(support::contract_pool(
            support::shared_server()?.url(),
            limits,
            3,
        ))
    }
}

proxypool_pool::contract_suite!(GroupsFactory);
proxypool_pool::lease_contract_suite!(GroupsFactory);
