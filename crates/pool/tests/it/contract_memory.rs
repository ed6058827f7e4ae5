//! The whole activity-pool contract suite against MemoryPool.

use proxypool_pool::contract::fixtures::MemoryFactory;

proxypool_pool::contract_suite!(MemoryFactory);
proxypool_pool::lease_contract_suite!(MemoryFactory);
