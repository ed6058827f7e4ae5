//! proxypool-pool: the in-memory activity pool and the contract suite.
//!
//! - [`MemoryPool`]: the reference semantics of every activity-pool port (docs/ARCHITECTURE.md), and
//!   the embedded store for one machine.
//! - [`contract`]: public async test functions, one module per port family, that any
//!   adapter runs through [`contract_suite!`]; MemoryPool and RedisPool run the same ones.

pub mod contract;
mod memory;

pub use memory::{MemoryPool, MemoryPoolOptions};
