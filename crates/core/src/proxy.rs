//! The proxy record and its lifecycle.
//!
//! ```text
//! FETCHED --check--> AVAILABLE | SUSPECT | UNHEALTHY   (re-checks move between these)
//! AVAILABLE --extract--> EXTRACTED                      (exclusive; terminal for this generation)
//! EXTRACTED, given back --vendor re-issues--> FETCHED   (a new generation: crate::extract)
//! any --hard TTL--> EXPIRED,  any --operator--> REMOVED
//! ```
//! Only AVAILABLE, unowned records before `usable_until_ms` are in the available indexes.

use crate::ids::{Label, ProxyId, UpstreamId, digest_hex};
use crate::secret::Credentials;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// How clients talk to an upstream proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Http,
    Https,
    Socks5,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Http, Protocol::Https, Protocol::Socks5];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https => "https",
            Protocol::Socks5 => "socks5",
        }
    }

    pub fn parse(value: &str) -> Option<Protocol> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(value))
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a proxy is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProxyStatus {
    /// Fetched from the vendor, never checked.
    Fetched,
    /// A check is in flight.
    Checking,
    /// Last check succeeded.
    Available,
    /// Last check failed, earlier ones may have succeeded.
    Suspect,
    /// Several consecutive checks failed.
    Unhealthy,
    /// Handed out exclusively by an extraction; never re-enters this lifetime, unless its
    /// client gave it back and the vendor re-issued it (a new generation).
    Extracted,
    /// Past its hard expiry.
    Expired,
    /// Removed by an operator or a vendor.
    Removed,
}

impl ProxyStatus {
    pub const ALL: [ProxyStatus; 8] = [
        ProxyStatus::Fetched,
        ProxyStatus::Checking,
        ProxyStatus::Available,
        ProxyStatus::Suspect,
        ProxyStatus::Unhealthy,
        ProxyStatus::Extracted,
        ProxyStatus::Expired,
        ProxyStatus::Removed,
    ];

    /// Counted as "managed" inventory (the pool is still working with it).
    pub fn is_managed(self) -> bool {
        matches!(
            self,
            ProxyStatus::Fetched
                | ProxyStatus::Checking
                | ProxyStatus::Available
                | ProxyStatus::Suspect
        )
    }

    /// Still counts against the upstream's `max_size` (not handed out, not gone).
    pub fn is_unextracted(self) -> bool {
        !matches!(
            self,
            ProxyStatus::Extracted | ProxyStatus::Expired | ProxyStatus::Removed
        )
    }

    /// Health checks may change this status.
    pub fn accepts_health(self) -> bool {
        matches!(
            self,
            ProxyStatus::Fetched
                | ProxyStatus::Checking
                | ProxyStatus::Available
                | ProxyStatus::Suspect
                | ProxyStatus::Unhealthy
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProxyStatus::Fetched => "FETCHED",
            ProxyStatus::Checking => "CHECKING",
            ProxyStatus::Available => "AVAILABLE",
            ProxyStatus::Suspect => "SUSPECT",
            ProxyStatus::Unhealthy => "UNHEALTHY",
            ProxyStatus::Extracted => "EXTRACTED",
            ProxyStatus::Expired => "EXPIRED",
            ProxyStatus::Removed => "REMOVED",
        }
    }
}

/// Result of the latest health checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub checked_at_ms: Option<UnixMillis>,
    pub succeeded_at_ms: Option<UnixMillis>,
    pub latency_ms: Option<u32>,
    /// Consecutive failures since the last success.
    pub failures: u32,
    /// A short error kind (never a message that could echo a credential).
    pub last_error: Option<String>,
}

/// One proxy, as the pool stores it for one lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyRecord {
    pub id: ProxyId,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub credentials: Option<Credentials>,
    pub upstream: UpstreamId,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub labels: BTreeMap<String, String>,
    pub status: ProxyStatus,
    pub health: Health,
    pub fetched_at_ms: UnixMillis,
    pub hard_expiry_ms: UnixMillis,
    /// `hard_expiry_ms` minus the upstream's safety margin: nothing is handed out after it.
    pub usable_until_ms: UnixMillis,
    /// How many concurrent gateway sessions this proxy may carry.
    pub max_sessions: u32,
    /// When the vendor says it issued the proxy (vendor data, when it gives it).
    #[serde(default)]
    pub issued_at_ms: Option<UnixMillis>,
    /// Set when the record was first stored while the store recovered from a loss and
    /// nothing proves it new: it is neither handed out nor leased until the sweep releases
    /// it at this time (`crate::store_mark::Recovery`).
    #[serde(default)]
    pub withheld_until_ms: Option<UnixMillis>,
}

impl ProxyRecord {
    /// True while the record may be handed out or assigned: AVAILABLE, not withheld and
    /// before `usable_until_ms`. Ownership is checked separately.
    pub fn is_usable(&self, now: UnixMillis) -> bool {
        self.status == ProxyStatus::Available
            && self.withheld_until_ms.is_none()
            && now < self.usable_until_ms
    }

    /// True when the last success is at least as recent as `now - freshness_ms`.
    pub fn is_fresh(&self, now: UnixMillis, freshness_ms: u64) -> bool {
        self.health
            .succeeded_at_ms
            .is_some_and(|at| at.saturating_add(freshness_ms) >= now)
    }
}

/// The stable id of a proxy: a digest of what makes it the same proxy at the vendor
/// (protocol, host, port, username). The password is deliberately not part of it, so a
/// vendor rotating a password refreshes the same proxy.
pub fn proxy_id_for(protocol: Protocol, host: &str, port: u16, username: Option<&str>) -> ProxyId {
    let host = host.to_ascii_lowercase();
    let port = port.to_be_bytes();
    let hex = digest_hex(
        &[
            protocol.as_str().as_bytes(),
            host.as_bytes(),
            &port,
            username.unwrap_or("").as_bytes(),
        ],
        16,
    );
    ProxyId::from_digest_hex(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_id_depends_on_identity_not_password_or_case() {
        let a = proxy_id_for(Protocol::Http, "Example.com", 8080, Some("u"));
        assert_eq!(
            a,
            proxy_id_for(Protocol::Http, "example.com", 8080, Some("u"))
        );
        assert_ne!(
            a,
            proxy_id_for(Protocol::Socks5, "example.com", 8080, Some("u"))
        );
        assert_ne!(
            a,
            proxy_id_for(Protocol::Http, "example.com", 8081, Some("u"))
        );
        assert_ne!(a, proxy_id_for(Protocol::Http, "example.com", 8080, None));
        assert!(ProxyId::new(a.as_str()).is_ok());
    }

    #[test]
    fn status_sets_are_consistent() {
        for status in ProxyStatus::ALL {
            if status.is_managed() {
                assert!(status.is_unextracted(), "{status:?}");
                assert!(status.accepts_health(), "{status:?}");
            }
        }
        assert!(!ProxyStatus::Unhealthy.is_managed());
        assert!(ProxyStatus::Unhealthy.is_unextracted());
    }
}
