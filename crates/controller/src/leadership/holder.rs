//! The holder id a controller writes into the leader lease: `host/pid/random`.
//!
//! Host and pid tell an operator which process leads; the random part keeps two
//! controllers apart when they share both (two instances in one process, a container
//! restart that reuses pid 1), because a lease renews for whoever presents the same holder.

use crate::jitter;

/// Longest holder id a lease store accepts.
const MAX_LEN: usize = 128;
/// Longest host part kept (the rest of the id must still fit).
const MAX_HOST: usize = 64;

/// A fresh holder id for this process (a new one on every call).
pub fn holder_id() -> String {
    let host = sanitize(&hostname());
    let id = format!("{host}/{}/{}", std::process::id(), jitter::hex_id());
    debug_assert!(id.len() <= MAX_LEN);
    id
}

/// The kernel's hostname, else `/etc/hostname`, else `host` (std has no portable call,
/// and the crate forbids the unsafe one).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// Printable ASCII without `/` (the separator), at most [`MAX_HOST`] characters.
fn sanitize(host: &str) -> String {
    let cleaned: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '/' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_HOST)
        .collect();
    if cleaned.is_empty() {
        "host".to_owned()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_printable_bounded_and_distinct() {
        let a = holder_id();
        let b = holder_id();
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert!(id.len() <= MAX_LEN);
            assert!(id.chars().all(|c| c.is_ascii_graphic()), "{id}");
            assert_eq!(id.split('/').count(), 3, "{id}");
        }
        assert_eq!(sanitize("a b/c\u{e9}"), "a_b_c_");
        assert_eq!(sanitize(&"h".repeat(300)).len(), MAX_HOST);
        assert_eq!(sanitize(""), "host");
    }
}
