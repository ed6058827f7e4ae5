//! The floors many sections share: counts and durations that must be at least 1, and a
//! request-head cap no smaller than hyper's smallest read buffer.

use proxypool_core::MIN_HEADER_BYTES;

/// `(key, message)` for every `(key, value)` whose value is zero.
pub(crate) fn at_least_one<const N: usize>(
    values: [(&'static str, u64); N],
) -> impl Iterator<Item = (&'static str, String)> {
    values
        .into_iter()
        .filter(|&(_, value)| value == 0)
        .map(|(key, _)| (key, "must be at least 1".to_owned()))
}

/// The problem with a `max_header_bytes` hyper could not honour, if any.
pub(crate) fn header_bytes(max_header_bytes: usize) -> Option<String> {
    (max_header_bytes < MIN_HEADER_BYTES)
        .then(|| format!("must be at least {MIN_HEADER_BYTES} (hyper's smallest read buffer)"))
}
