//! Time as the ports see it: explicit milliseconds since the Unix epoch.
//!
//! Every time-dependent port method takes `now` from its caller, so one contract suite can
//! time-travel every adapter and production code reads the clock in exactly one place.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type UnixMillis = u64;

/// The wall clock in milliseconds (for production callers of the ports).
pub fn now_millis() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMillis)
        .unwrap_or(0)
}
