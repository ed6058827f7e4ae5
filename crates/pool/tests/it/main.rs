//! The memory pool's integration tests, one binary:
//!
//! - `contract_memory`: the whole activity-pool contract suite against MemoryPool.

mod contract_memory;
