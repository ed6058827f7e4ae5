//! Validated identifiers.
//!
//! Every identifier is checked once, when it is built, so adapters can use it in keys and
//! logs without escaping. Upstream ids and labels appear inside gateway usernames
//! (`client-region-us-upstream-acme`), so they may not contain `-`.

use crate::error::PoolError;
use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
fn check_id(kind: &str, value: &str) -> Result<(), PoolError> {
    let mut chars = value.chars();
    let valid = value.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(is_id_char);
    if valid {
        Ok(())
    } else {
        Err(PoolError::invalid(format!(
            "{kind} must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit"
        )))
    }
}

/// `^[a-z0-9][a-z0-9_]{0,63}$` after lower-casing.
fn normalize_label(kind: &str, value: &str) -> Result<String, PoolError> {
    let lowered = value.to_ascii_lowercase();
    let valid = !lowered.is_empty()
        && lowered.len() <= 64
        && !lowered.starts_with('_')
        && lowered.chars().all(is_label_char);
    if valid {
        Ok(lowered)
    } else {
        Err(PoolError::invalid(format!(
            "{kind} must be 1-64 characters of [a-z0-9_] (case-insensitive), not starting with '_'"
        )))
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl AsRef<str>) -> Result<Self, PoolError> {
                let check: fn(&str) -> Result<String, PoolError> = $check;
                check(value.as_ref()).map($name)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(deserializer)?;
                $name::new(&raw).map_err(serde::de::Error::custom)
            }
        }

        impl std::str::FromStr for $name {
            type Err = PoolError;
            fn from_str(value: &str) -> Result<Self, PoolError> {
                $name::new(value)
            }
        }
    };
}

string_id!(
    /// A vendor (upstream) id, e.g. `acme_resi`. Lower-case, no `-`.
    UpstreamId,
    "upstream id",
    |v| normalize_label("upstream id", v)
);
string_id!(
    /// A region or carrier label, e.g. `us`, `de_berlin`, `vodafone`. Lower-case, no `-`.
    Label,
    "label",
    |v| normalize_label("label", v)
);
string_id!(
    /// A gateway worker id, stable across restarts of the same worker.
    WorkerId,
    "worker id",
    |v| check_id("worker id", v).map(|()| v.to_owned())
);
string_id!(
    /// The API client (tenant) that owns extractions.
    ClientId,
    "client id",
    |v| check_id("client id", v).map(|()| v.to_owned())
);
string_id!(
    /// A tenant: the project a client belongs to. Quota buckets are per (project, client,
    /// operation), and clients' reports on proxies are scoped to their project.
    ProjectId,
    "project",
    |v| check_id("project", v).map(|()| v.to_owned())
);
string_id!(
    /// A stable proxy id: 32 hex digits of the unique-key digest.
    ProxyId,
    "proxy id",
    |v| {
        if v.len() == 32 && v.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            Ok(v.to_owned())
        } else {
            Err(PoolError::invalid("proxy id must be 32 lower-case hex digits"))
        }
    }
);
string_id!(
    /// An extraction id (`ex_` + 32 hex digits), derived from the client and the
    /// idempotency key or request id, so every adapter names an extraction the same way.
    ExtractionId,
    "extraction id",
    |v| {
        let hex = v.strip_prefix("ex_").unwrap_or("");
        if hex.len() == 32 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            Ok(v.to_owned())
        } else {
            Err(PoolError::invalid("extraction id must be ex_ followed by 32 hex digits"))
        }
    }
);

/// Lower-case hex of the first `bytes` bytes of SHA-256 over `parts`, each part
/// length-prefixed so that ("ab","c") and ("a","bc") differ.
pub(crate) fn digest_hex(parts: &[&[u8]], bytes: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    crate::hex::encode(&hasher.finalize()[..bytes])
}

impl ExtractionId {
    /// The id of an extraction by `client` for the given idempotency key or request id.
    pub fn derive(client: &ClientId, idempotency_key: Option<&str>, request_id: &str) -> Self {
        let (kind, value) = match idempotency_key {
            Some(key) => ("idem", key),
            None => ("request", request_id),
        };
        let hex = digest_hex(
            &[
                client.as_str().as_bytes(),
                kind.as_bytes(),
                value.as_bytes(),
            ],
            16,
        );
        ExtractionId(format!("ex_{hex}"))
    }
}

impl ProxyId {
    pub(crate) fn from_digest_hex(hex: String) -> Self {
        ProxyId(hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_lowercased_and_reject_separators() {
        assert_eq!(Label::new("US").unwrap().as_str(), "us");
        assert!(Label::new("us-east").is_err());
        assert!(Label::new("").is_err());
        assert!(UpstreamId::new("acme_resi").is_ok());
        assert!(UpstreamId::new("acme-resi").is_err());
    }

    #[test]
    fn ids_reject_control_and_overlong_values() {
        assert!(WorkerId::new("gw-1").is_ok());
        assert!(WorkerId::new("gw\n1").is_err());
        assert!(ClientId::new("a".repeat(129)).is_err());
        assert!(ClientId::new("-leading").is_err());
    }

    #[test]
    fn deserialization_validates() {
        let bad: Result<UpstreamId, _> = serde_json::from_str("\"Bad Id\"");
        assert!(bad.is_err());
        let good: UpstreamId = serde_json::from_str("\"Acme\"").unwrap();
        assert_eq!(good.as_str(), "acme");
    }

    #[test]
    fn extraction_ids_are_deterministic_per_client_and_key() {
        let a = ClientId::new("a").unwrap();
        let b = ClientId::new("b").unwrap();
        let first = ExtractionId::derive(&a, Some("k1"), "r1");
        assert_eq!(first, ExtractionId::derive(&a, Some("k1"), "r2"));
        assert_ne!(first, ExtractionId::derive(&b, Some("k1"), "r1"));
        assert_ne!(first, ExtractionId::derive(&a, None, "k1"));
        assert!(ExtractionId::new(first.as_str()).is_ok());
    }
}
