//! proxypool-pool: the in-memory activity pool and the contract suite.
//!
//! - [`MemoryPool`]: the reference semantics of every activity-pool port (docs/ARCHITECTURE.md), and
//!   the embedded store for one machine.
//! - `contract` (feature `contract`, off by default): public async test functions, one
//!   module per port family, that any adapter runs through `contract_suite!`; MemoryPool
//!   and RedisPool run the same ones. The test crates that run them enable the feature.

#[cfg(feature = "contract")]
pub mod contract;
mod memory;

pub use memory::{MemoryPool, MemoryPoolOptions};
