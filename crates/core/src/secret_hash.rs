//! Salted secret hashes for API tokens and gateway passwords, with constant-time checks.
//!
//! The secrets these protect are machine-generated (long random tokens and proxy passwords),
//! so a salted SHA-256 is enough and cheap enough for a gateway that authenticates at high
//! request rates; human-chosen passwords would need a slow hash instead. The stored form is
//! `sha256:<salt>:<hex digest>`.

use crate::error::PoolError;
use crate::ids::digest_hex;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use subtle::ConstantTimeEq;

/// A salted hash of a secret. Its `Debug` shows only the algorithm.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SecretHash(String);

impl SecretHash {
    /// Hashes `secret` with `salt` (1-64 characters of `[A-Za-z0-9]`).
    pub fn derive(secret: &str, salt: &str) -> Result<Self, PoolError> {
        if salt.is_empty() || salt.len() > 64 || !salt.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(PoolError::invalid(
                "salt must be 1-64 characters of [A-Za-z0-9]",
            ));
        }
        let digest = digest_hex(&[salt.as_bytes(), secret.as_bytes()], 32);
        Ok(SecretHash(format!("sha256:{salt}:{digest}")))
    }

    /// Parses a stored hash.
    pub fn parse(stored: &str) -> Result<Self, PoolError> {
        let mut parts = stored.split(':');
        let (Some("sha256"), Some(salt), Some(digest), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(PoolError::invalid(
                "a secret hash looks like sha256:<salt>:<64 hex>",
            ));
        };
        let salt_ok =
            !salt.is_empty() && salt.len() <= 64 && salt.chars().all(|c| c.is_ascii_alphanumeric());
        let digest_ok =
            digest.len() == 64 && digest.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
        if !salt_ok || !digest_ok {
            return Err(PoolError::invalid(
                "a secret hash looks like sha256:<salt>:<64 hex>",
            ));
        }
        Ok(SecretHash(stored.to_owned()))
    }

    /// Whether `candidate` is the secret, compared in constant time.
    pub fn verify(&self, candidate: &str) -> bool {
        let salt = self.0.split(':').nth(1).unwrap_or_default();
        let Ok(other) = SecretHash::derive(candidate, salt) else {
            return false;
        };
        constant_time_eq(self.0.as_bytes(), other.0.as_bytes())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(sha256:***)")
    }
}

impl<'de> Deserialize<'de> for SecretHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        SecretHash::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Compares without an early exit, so timing does not reveal the matching prefix length
/// (only whether the lengths differ).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_only_the_secret() {
        let hash = SecretHash::derive("s3cret-token", "abc123").unwrap();
        assert!(hash.verify("s3cret-token"));
        assert!(!hash.verify("s3cret-tokeN"));
        assert!(!hash.verify(""));
        assert_ne!(
            hash,
            SecretHash::derive("s3cret-token", "other").unwrap(),
            "salted"
        );
        assert!(!format!("{hash:?}").contains(&hash.as_str()[10..]));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        let hash = SecretHash::derive("x", "salt").unwrap();
        assert_eq!(SecretHash::parse(hash.as_str()).unwrap(), hash);
        assert!(SecretHash::parse("md5:salt:abcd").is_err());
        assert!(SecretHash::parse("sha256:salt:zz").is_err());
        assert!(SecretHash::parse("sha256::".to_string().as_str()).is_err());
    }
}
