//! RedisPool's integration tests, one binary; `support` holds the binary's shared private
//! redis-server and Redis Cluster (pools on them isolated by a unique key prefix) and the
//! retry of a caller while the store is unavailable. Tests that break a server start their
//! own. One module per concern:
//!
//! - `churn`: ten simulated minutes of rotating proxies stay bounded in keys and members;
//!   once everything expired the pool holds (almost) nothing.
//! - `cluster_faults`: a killed or frozen primary of the pool's slot on a private cluster:
//!   no call hangs, calls recover after the promotion on the same handle.
//! - `contract_cluster`: the activity-pool contract suite on the shared cluster, three shard
//!   groups, one per primary.
//! - `contract_groups`: the contract suite over three shard groups on the shared server.
//! - `contract_redis`: the contract suite on the shared server, one group.
//! - `faults`: scripts and the library flushed mid-run, replies lost after a commit, a
//!   server down, frozen or restarted (each on a private server).
//! - `groups`: what only a pool over several groups can get wrong, beyond the contract.
//! - `groups_faults`: extractions over groups stay exclusive through a killed primary.
//! - `invariants`: incrementally kept indexes and counters equal a full recomputation.
//! - `journal`: the snapshot change journal as stored; a lapsed journal reads as forgotten.
//! - `layout`: the key layout as stored (version 2, see `src/keys.rs`).
//! - `leaks`: credentials never leave the record values, nor outlive the proxies.
//! - `sentinel`: `redis+sentinel://` end to end, also after the master restarts.

mod support;

mod churn;
mod cluster_faults;
mod contract_cluster;
mod contract_groups;
mod contract_redis;
mod faults;
mod groups;
mod groups_faults;
mod invariants;
mod journal;
mod layout;
mod leaks;
mod sentinel;
