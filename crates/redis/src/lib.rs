//! proxypool-redis: the activity pool in Redis, one deep adapter behind the core ports.
//!
//! [`RedisPool::new`] is the one constructor; callers see only the ports of
//! `proxypool_core::ports` (the same ones MemoryPool implements, checked by the same
//! contract suite). The pool's keys are split into shard groups (one by default), each under
//! its own hash tag; each port call is one atomic Lua function call (`FCALL`) per group it
//! touches: on a single instance, behind Sentinel, or on a Redis Cluster, where each group
//! is one slot (the groups spread over the primaries) and every call is routed by its
//! keys. Time comes from the caller (`now`); native TTLs are a memory safety
//! net only. Every call is bounded by a timeout and a fixed amount of script work, and
//! every failure to decide is `Unavailable`, never a wrong "no inventory".
//!
//! Module map:
//! - `sharded`: `RedisPool`, its constructor, and the ports routed over the groups.
//! - `group`: `GroupPool`, one group, and the call plumbing its ports share.
//! - [`options`]: `RedisPoolOptions` and defaults.
//! - [`client`]: `RedisClient`: a Redis URL, a `redis+sentinel://` or a `redis+cluster://`
//!   target.
//! - `connection`: connection manager or cluster connection, routing by key, per-call
//!   timeout, error mapping, Sentinel and Cluster failover.
//! - `keys`: the keyspace and its layout version (documented there), key names built in Rust.
//! - `scripts`: the Lua of `src/lua/` as one Redis function library (helpers defined once).
//! - `reply`: script replies to payloads and `PoolError`s.
//! - `codec`: how records, assignments, sessions, runtimes, results and cooldowns are stored.
//! - `ports`: one file per port family, the Rust half of each script.

pub mod client;
mod codec;
mod connection;
pub mod durability;
mod group;
mod keys;
pub mod options;
mod ports;
mod reply;
mod scripts;
mod sharded;

pub use client::RedisClient;
pub use durability::{Durability, ServerDurability};
pub use options::RedisPoolOptions;
pub use sharded::RedisPool;
