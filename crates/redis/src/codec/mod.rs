//! How values are laid out inside Redis: compact, tab-separated strings the Lua scripts
//! can split cheaply, with JSON only where Lua merely stores or compares a value.
//!
//! No field separator can occur inside a field: hosts, labels, ids and error kinds are
//! validated to exclude control characters, and JSON escapes them.

pub(crate) mod assignment;
pub(crate) mod cooldown;
pub(crate) mod extraction;
pub(crate) mod layout;
pub(crate) mod record;
pub(crate) mod runtime;
pub(crate) mod session;
pub(crate) mod upsert;

use proxypool_core::{PoolError, PoolResult};

/// Largest millisecond value the scripts handle exactly (Lua numbers are doubles).
/// Saturated expiries (`now + u64::MAX`) are clamped to it: still "never" in practice.
pub(crate) const MAX_MS: u64 = (1 << 53) - 1;

pub(crate) fn clamp_ms(ms: u64) -> u64 {
    ms.min(MAX_MS)
}

pub(crate) fn corrupt(what: &str) -> PoolError {
    PoolError::corrupt(format!("undecodable {what} in redis"))
}

pub(crate) fn parse_u64(field: &str, what: &str) -> PoolResult<u64> {
    field.parse().map_err(|_| corrupt(what))
}

pub(crate) fn parse_opt_u64(field: &str, what: &str) -> PoolResult<Option<u64>> {
    if field.is_empty() {
        Ok(None)
    } else {
        parse_u64(field, what).map(Some)
    }
}

pub(crate) fn opt_to_field(value: Option<impl ToString>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}
