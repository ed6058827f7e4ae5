//! Opening the activity-pool store named by the configuration.
//!
//! This is the one place that knows which adapters exist. The memory store comes with an
//! [`AlwaysLeader`](crate::leadership::AlwaysLeader) (one controller per process-local
//! pool); a Redis store (`redis`) comes with a
//! [`LeaseLeadership`](crate::leadership::LeaseLeadership) over the same pool, because
//! several controllers may share it.
//!
//! Module map: `open` ([`open_store`]), `opened` ([`OpenedStore`], [`StoreOpenError`]),
//! `redis` (a Redis or Sentinel store with its lease leadership).

mod open;
mod opened;
mod redis;

pub use open::open_store;
pub use opened::{OpenedStore, StoreOpenError};
