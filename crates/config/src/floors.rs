//! The floors many sections share: counts and durations that must be at least 1, a
//! request-head cap no smaller than hyper's smallest read buffer, and the connection
//! limits of a listener (a per-address cap well below the global one, the IPv6 grouping
//! prefix, the first-byte deadline and its default).

use crate::duration::Millis;
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

/// How many addresses it must take, at least, to fill a listener's connection cap: a
/// per-address cap above `max_connections / MIN_ADDRESSES_TO_FILL` is refused.
pub(crate) const MIN_ADDRESSES_TO_FILL: usize = 4;

/// The shortest IPv6 prefix peers may be grouped by: a shorter one would lump whole
/// providers' customers together.
pub(crate) const MIN_IPV6_PREFIX: u8 = 32;

/// `(key, message)` for every problem of a listener's connection limits: a per-address
/// cap that is not well below the global one, an IPv6 grouping prefix out of range, a
/// first-byte deadline longer than the whole head's (`(first_byte, header_read)`).
pub(crate) fn connection_caps(
    max_connections: usize,
    max_connections_per_ip: usize,
    ipv6_prefix: u8,
    (first_byte, header_read): (Option<Millis>, Millis),
) -> impl Iterator<Item = (&'static str, String)> {
    let most = max_connections / MIN_ADDRESSES_TO_FILL;
    let per_ip = (max_connections_per_ip > most).then(|| {
        format!(
            "must be at most a quarter of max_connections ({most} of {max_connections}), so \
             that it takes at least {MIN_ADDRESSES_TO_FILL} addresses to fill the listener"
        )
    });
    let prefix = (!(MIN_IPV6_PREFIX..=128).contains(&ipv6_prefix)).then(|| {
        format!("must be between {MIN_IPV6_PREFIX} and 128 (64 = one count per /64 network)")
    });
    let first = first_byte.and_then(|first| match first.as_ms() {
        0 => Some("must be at least 1ms".to_owned()),
        ms if ms > header_read.as_ms() => Some("must be at most header_read_timeout".to_owned()),
        _ => None,
    });
    [
        ("max_connections_per_ip", per_ip),
        ("ipv6_prefix", prefix),
        ("first_byte_timeout", first),
    ]
    .into_iter()
    .filter_map(|(key, problem)| Some((key, problem?)))
}

/// The first-byte deadline when none is set: this, or the head's deadline if shorter.
pub(crate) const DEFAULT_FIRST_BYTE_TIMEOUT: Millis = Millis::from_secs(3);

/// The first-byte deadline a listener applies: the one set, else
/// [`DEFAULT_FIRST_BYTE_TIMEOUT`] cut to the head's deadline.
pub(crate) fn first_byte_deadline(first_byte: Option<Millis>, header_read: Millis) -> Millis {
    first_byte.unwrap_or(Millis(
        DEFAULT_FIRST_BYTE_TIMEOUT.as_ms().min(header_read.as_ms()),
    ))
}
