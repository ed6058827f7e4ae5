//! Randomness from the operating system's CSPRNG (`getrandom`), for everything that must
//! not be guessed or must not collide: credentials, salts, session ids.
//!
//! One small module over `getrandom` rather than `rand`: callers need bytes, a token over
//! an alphabet and a number, never a seeded generator or distributions. A failed read is an
//! error for the caller to handle, never a weaker fallback.

use std::fmt::Write as _;

/// Letters and digits without look-alikes (`l`, `I`, `O`, `0`, `1`): safe in URLs, shells
/// and salts, and easy to read back.
pub const UNAMBIGUOUS: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// The operating system's random source could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source cannot be read: {0}")]
pub struct RandomError(getrandom::Error);

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) -> Result<(), RandomError> {
    getrandom::fill(buf).map_err(RandomError)
}

/// A random `u64`.
pub fn u64() -> Result<u64, RandomError> {
    getrandom::u64().map_err(RandomError)
}

/// `bytes` random bytes as `2 * bytes` lowercase hex digits.
pub fn hex(bytes: usize) -> Result<String, RandomError> {
    let mut raw = vec![0u8; bytes];
    fill(&mut raw)?;
    let mut out = String::with_capacity(bytes * 2);
    for byte in raw {
        let _ = write!(out, "{byte:02x}");
    }
    Ok(out)
}

/// `len` characters drawn uniformly from `alphabet` (1 to 256 ASCII characters).
///
/// # Panics
/// If `alphabet` is empty, longer than 256 or not ASCII: a programming error.
pub fn token(alphabet: &[u8], len: usize) -> Result<String, RandomError> {
    assert!(
        !alphabet.is_empty() && alphabet.len() <= 256 && alphabet.is_ascii(),
        "a token alphabet is 1 to 256 ASCII characters"
    );
    // Rejection sampling keeps every character equally likely: bytes at or above the
    // largest multiple of the alphabet's length are drawn again.
    let limit = 256 - 256 % alphabet.len();
    let mut out = String::with_capacity(len);
    let mut bytes = [0u8; 64];
    while out.len() < len {
        fill(&mut bytes)?;
        for &byte in &bytes {
            if usize::from(byte) < limit && out.len() < len {
                out.push(char::from(alphabet[usize::from(byte) % alphabet.len()]));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_length_and_alphabet_and_differ() {
        let a = token(UNAMBIGUOUS, 40).unwrap();
        let b = token(UNAMBIGUOUS, 40).unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| UNAMBIGUOUS.contains(&c)));
        assert_ne!(a, b);
        assert_eq!(token(b"x", 3).unwrap(), "xxx");
        assert_eq!(token(UNAMBIGUOUS, 0).unwrap(), "");
    }

    #[test]
    fn hex_has_two_digits_per_byte_and_differs() {
        let a = hex(32).unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, hex(32).unwrap());
    }

    #[test]
    fn every_character_of_an_alphabet_turns_up() {
        // 3 does not divide 256: without the rejection the first letter would be favoured,
        // and with a broken mapping some letter would never appear.
        let drawn = token(b"abc", 3_000).unwrap();
        for letter in ['a', 'b', 'c'] {
            let count = drawn.chars().filter(|&c| c == letter).count();
            assert!((700..1_300).contains(&count), "{letter}: {count}");
        }
        assert_ne!(u64().unwrap(), u64().unwrap());
    }
}
