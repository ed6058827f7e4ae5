//! The two clocks the gateway reads: wall-clock milliseconds (leases and `usable_until`
//! are wall-clock times set by the controller) and a process-wide monotonic millisecond
//! counter (cooldowns and idle timers, immune to wall-clock jumps).

use std::sync::OnceLock;
use std::time::Instant;

/// Wall clock, milliseconds since the Unix epoch.
pub(crate) fn wall_ms() -> u64 {
    proxypool_core::now_millis()
}

/// Milliseconds since the first call in this process.
pub(crate) fn mono_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX)
}
