//! Request ids: every answer (and every error body) names one, so an operator can find the
//! request in the logs.
//!
//! [`RequestId::generate`] is unique across processes: each process starts from a random
//! 64-bit prefix (std's `RandomState` keys come from the OS) followed by a counter. The
//! form `req-<16 hex><16 hex>` also fits the quota's receipt rule
//! (`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,254}$`), so the client API uses it as the receipt of an
//! extraction without an `Idempotency-Key`, and for that reason never takes a client's id.
//! The control API keeps a worker's `X-Request-Id` when it is short and printable
//! ([`RequestId::from_header`]), so a worker's logs and the controller's name the same
//! request.

use http::{HeaderName, HeaderValue};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The header that carries the id, both ways.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The id of one request.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    /// A fresh id, unique within this process and (with overwhelming probability) across
    /// processes.
    pub fn generate() -> Self {
        static PREFIX: OnceLock<u64> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let prefix = *PREFIX.get_or_init(|| RandomState::new().hash_one(std::process::id()));
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        RequestId(format!("req-{prefix:016x}{n:016x}"))
    }

    /// A caller's id, when it is 1 to 64 characters of `[A-Za-z0-9._:-]`.
    pub fn from_header(value: &HeaderValue) -> Option<Self> {
        let text = value.to_str().ok()?;
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        ok.then(|| RequestId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as a header value (ids are always printable ASCII).
    pub fn header_value(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.0).ok()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_receipt_shaped() {
        let a = RequestId::generate();
        let b = RequestId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 36);
        assert!(
            a.as_str()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        );
        assert_eq!(&a.as_str()[..20], &b.as_str()[..20], "same process prefix");
    }

    #[test]
    fn a_callers_id_is_kept_only_when_short_and_printable() {
        let ok = HeaderValue::from_static("gw-1:abc_2.x");
        assert_eq!(
            RequestId::from_header(&ok).unwrap().as_str(),
            "gw-1:abc_2.x"
        );
        assert!(RequestId::from_header(&HeaderValue::from_static("a b")).is_none());
        assert!(RequestId::from_header(&HeaderValue::from_static("")).is_none());
        let long = HeaderValue::from_str(&"x".repeat(65)).unwrap();
        assert!(RequestId::from_header(&long).is_none());
    }
}
