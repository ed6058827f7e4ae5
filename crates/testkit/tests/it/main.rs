//! The testkit's integration tests, one binary, against real server processes:
//!
//! - `redis_cluster`: the Redis Cluster guard: the cluster forms and serves every slot, a
//!   killed or paused primary is replaced by its replica and comes back as one, nothing
//!   outlives the guard or a killed test process.
//! - `smoke`: redis-server and PostgreSQL start privately, answer, stop and restart on the
//!   same port, are isolated from each other, and leave nothing behind.
//!
//! The "killed test process" tests run this binary again as a child (an ignored helper
//! test, selected by its full name) and kill it.

mod redis_cluster;
mod smoke;
