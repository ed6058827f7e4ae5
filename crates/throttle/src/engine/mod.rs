//! [`TokenBucketEngine`]: the sharded map from key to bucket state, and the check path.
//!
//! Keys are spread over a power-of-two number of shards, each a `Mutex<HashSet<Entry>>`.
//! A check takes the clock's cheap reading, picks the shard from the hash stored in the key,
//! locks only that shard and runs the pure state machine in [`crate::bucket`].
//!
//! What keeps it fast:
//! * an entry is key, hash and state in one 64-byte cache line (`entry`), and the hash is
//!   computed once when the key is made, never by the map;
//! * admissions and lockouts are counted inside the shard, under the lock the check already
//!   holds; rarer outcomes go to per-thread striped counters; so no shared atomic is touched
//!   on the hot path, and the only global atomic changes when a key is created or evicted
//!   (the tracked count behind the cap);
//! * each shard keeps its latest lockout in a lock-free slot (`lockout_board`), with the
//!   slot's key hash in the lock's own cache line: a client flooding after being locked out
//!   is answered with a few loads and no lock, and other checks pay nothing for it.
//!
//! Module map: `token_bucket_engine` (the engine's state and the check path), `entry`
//! (stored form of a key), `shard` (one locked part of the map),
//! `lockout_board` (lock-free lockout shortcut), `striped_counter` (per-thread counters),
//! `sweep` (bounded eviction), `inspect` (reports).

mod entry;
mod inspect;
mod lockout_board;
mod shard;
mod striped_counter;
mod sweep;
mod token_bucket_engine;

pub use sweep::SweepOutcome;
pub use token_bucket_engine::{ScopeSpec, TokenBucketEngine};
