//! Opening the activity-pool store named by the configuration.
//!
//! This is the one place that knows which adapters exist. The memory store comes with an
//! [`AlwaysLeader`](crate::leadership::AlwaysLeader) (one controller per process-local
//! pool); a Redis store (`redis`) comes with a
//! [`LeaseLeadership`](crate::leadership::LeaseLeadership) over the same pool, because
//! several controllers may share it.
//!
//! Module map: `open` ([`open_store`]), `opened` ([`OpenedStore`], [`StoreOpenError`]),
//! `redis` (a Redis or Sentinel store with its lease leadership), `guard` ([`StoreGuard`]:
//! the store's identity against the durable ledger, losses and recoveries).

mod guard;
mod open;
mod opened;
mod redis;

pub use guard::{GUARD_INTERVAL, StoreGuard, recovery_hold_ms};
pub use open::open_store;
pub use opened::{OpenedStore, StoreOpenError};
