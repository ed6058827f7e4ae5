//! Random tokens for generated credentials (dev client, in-process worker token, salts),
//! from the operating system's CSPRNG (`proxypool_core::random`).

use proxypool_core::random;

/// `len` characters of `[a-zA-Z2-9]` without look-alikes (safe in URLs, shells and salts).
///
/// # Panics
/// If the operating system's random source cannot be read: these are real credentials,
/// so there is no weaker fallback, and a process that cannot make them cannot start.
pub(crate) fn token(len: usize) -> String {
    random::token(random::UNAMBIGUOUS, len).unwrap_or_else(|error| panic!("{error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_length_and_alphabet_and_differ() {
        let a = token(32);
        let b = token(32);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| random::UNAMBIGUOUS.contains(&c)));
        assert_ne!(a, b);
    }
}
