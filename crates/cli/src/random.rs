//! Random tokens for generated credentials (dev client, in-process worker token, salts).
//!
//! Read from the kernel's CSPRNG (`/dev/urandom`): these are real credentials, so a
//! hasher-based generator would not do, and a `rand` dependency would cost build time for
//! one read. Without `/dev/urandom` (not Linux) std's randomly keyed SipHash over the time
//! and a counter is the fallback: unpredictable enough for a loopback demo.

use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// `len` characters of `[a-zA-Z2-9]` without look-alikes (safe in URLs, shells and salts).
pub(crate) fn token(len: usize) -> String {
    // Rejection sampling keeps every character equally likely.
    let limit = 256 - 256 % ALPHABET.len();
    let mut out = String::with_capacity(len);
    let mut bytes = [0u8; 64];
    while out.len() < len {
        fill(&mut bytes);
        for &byte in &bytes {
            if usize::from(byte) < limit && out.len() < len {
                out.push(char::from(ALPHABET[usize::from(byte) % ALPHABET.len()]));
            }
        }
    }
    out
}

fn fill(buf: &mut [u8]) {
    let from_kernel = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf));
    if from_kernel.is_ok() {
        return;
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for chunk in buf.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        let value = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&value[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_length_and_alphabet_and_differ() {
        let a = token(32);
        let b = token(32);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| ALPHABET.contains(&c)));
        assert_ne!(a, b);
    }
}
