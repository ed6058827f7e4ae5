//! The whole quota contract suite against MemoryQuota.

use proxypool_quota::contract::fixtures::MemoryFactory;

proxypool_quota::contract_suite!(MemoryFactory);
