//! API clients and bearer-token lookup.
//!
//! Tokens are stored only as salted hashes ([`SecretHash`]) and compared in constant time.
//! A salted hash cannot be looked up by value, so finding the client of a token means
//! verifying it against each client's hash. To keep that off the steady-state path, a
//! token that verified once is remembered under a keyed (per-process random) hash of the
//! token; the next request with it verifies against that one client only. The cache holds
//! only tokens that verified, so unknown tokens cannot fill it, and a cache hit is still
//! confirmed by the salted constant-time check, so a collision can never authenticate.

use crate::config::ApiConfigError;
use proxypool_config::Cidrs;
use proxypool_core::{ClientId, Label, LockExt, ProjectId, SecretHash, UpstreamId};
use proxypool_quota::QuotaConfig;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// One API client (a tenant's credential) as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiClient {
    pub id: ClientId,
    /// The tenant the client belongs to; quota buckets are per (project, client, operation).
    pub project: String,
    /// Salted hash of the bearer token.
    pub token_hash: SecretHash,
    /// May call the admin routes.
    #[serde(default)]
    pub admin: bool,
    /// Trusted for shared feedback: its reports bind every client (else its project's).
    #[serde(default)]
    pub shared_feedback: bool,
    /// Upstreams this client may extract from or inspect. Empty = all.
    #[serde(default)]
    pub allowed_upstreams: Vec<UpstreamId>,
    /// Regions this client may extract from. Empty = all.
    #[serde(default)]
    pub allowed_regions: Vec<Label>,
    /// This client's quota window and limit per operation, passed with every charge (one
    /// quota backend serves all clients). Not part of the serialized form: whoever builds
    /// the client from its configuration fills it in; left out, it is the defaults.
    #[serde(skip)]
    pub quota: QuotaConfig,
    /// Source address blocks the client may call from. Empty = any.
    #[serde(skip)]
    pub ip_allowlist: Cidrs,
    /// The client's rate-limit policy (the one the gateway applies to it too), checked on
    /// every authenticated request before the quota. `None` = no policy limit.
    #[serde(skip)]
    pub rate_limit: Option<proxypool_throttle::Policy>,
}

impl ApiClient {
    /// The client's project as an id (`None` only for a project the configuration would
    /// have refused).
    pub fn project_id(&self) -> Option<ProjectId> {
        ProjectId::new(&self.project).ok()
    }

    /// The scope the client's reports on proxies go to: shared for a client trusted for
    /// shared feedback, else its project's (`proxypool_core::cooldown`).
    pub fn feedback_scope(&self) -> Option<ProjectId> {
        if self.shared_feedback {
            None
        } else {
            self.project_id()
        }
    }

    /// Whether the client may use `upstream`.
    pub fn may_use_upstream(&self, upstream: &UpstreamId) -> bool {
        self.allowed_upstreams.is_empty() || self.allowed_upstreams.contains(upstream)
    }

    /// Whether the client may call from `ip` (an IPv4-mapped IPv6 address counts as its
    /// IPv4 address).
    pub fn may_call_from(&self, ip: IpAddr) -> bool {
        self.ip_allowlist.is_empty() || self.ip_allowlist.contains(ip)
    }

    /// Whether the client may use `region`.
    pub fn may_use_region(&self, region: &Label) -> bool {
        self.allowed_regions.is_empty() || self.allowed_regions.contains(region)
    }

    fn validate(&self) -> Result<(), ApiConfigError> {
        // The quota's project rule, checked here so a misconfigured client fails at startup
        // instead of turning every one of its requests into a quota error.
        let mut chars = self.project.chars();
        let valid = self.project.len() <= 128
            && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if valid {
            Ok(())
        } else {
            Err(ApiConfigError::Client {
                client: self.id.to_string(),
                problem: "project must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit".into(),
            })
        }
    }
}

/// Longest bearer token considered; longer ones are rejected without hashing.
const MAX_TOKEN_LEN: usize = 512;

/// The configured clients and the verified-token cache.
#[derive(Debug)]
pub struct ClientDirectory {
    clients: Vec<Arc<ApiClient>>,
    hasher: RandomState,
    verified: Mutex<HashMap<u64, usize>>,
}

impl ClientDirectory {
    pub fn new(clients: Vec<ApiClient>) -> Result<Self, ApiConfigError> {
        let mut seen = std::collections::HashSet::new();
        for client in &clients {
            client.validate()?;
            if !seen.insert(client.id.clone()) {
                return Err(ApiConfigError::DuplicateClient(client.id.to_string()));
            }
        }
        Ok(ClientDirectory {
            clients: clients.into_iter().map(Arc::new).collect(),
            hasher: RandomState::new(),
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// The client whose token this is, if any.
    pub fn authenticate(&self, token: &str) -> Option<Arc<ApiClient>> {
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return None;
        }
        let key = self.hasher.hash_one(token);
        let cached = self.verified.lock_or_recover().get(&key).copied();
        if let Some(index) = cached {
            let client = &self.clients[index];
            if client.token_hash.verify(token) {
                return Some(client.clone());
            }
        }
        let index = self
            .clients
            .iter()
            .position(|client| client.token_hash.verify(token))?;
        let mut verified = self.verified.lock_or_recover();
        // Bounded: one entry per client is the steady state; rotated tokens may leave stale
        // entries, so start over well before the map could grow with them.
        if verified.len() >= self.clients.len().saturating_mul(4).max(64) {
            verified.clear();
        }
        verified.insert(key, index);
        Some(self.clients[index].clone())
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Every configured client.
    pub(crate) fn clients(&self) -> &[Arc<ApiClient>] {
        &self.clients
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, token: &str) -> ApiClient {
        ApiClient {
            id: ClientId::new(id).unwrap(),
            project: "proj".into(),
            token_hash: SecretHash::derive(token, "salt1").unwrap(),
            admin: false,
            shared_feedback: false,
            allowed_upstreams: vec![],
            allowed_regions: vec![],
            quota: QuotaConfig::default(),
            ip_allowlist: Cidrs::default(),
            rate_limit: None,
        }
    }

    #[test]
    fn allowlists_match_blocks_of_either_family() {
        let mut c = client("c", "token-c-0123456789");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(c.may_call_from(ip("203.0.113.9")), "empty = any");
        c.ip_allowlist = Cidrs::parse(&["10.1.0.0/16", "2001:db8::/32", "192.0.2.7"]).unwrap();
        assert!(c.may_call_from(ip("10.1.200.3")));
        assert!(c.may_call_from(ip("::ffff:10.1.0.1")), "mapped form");
        assert!(c.may_call_from(ip("2001:db8:1::5")));
        assert!(c.may_call_from(ip("192.0.2.7")));
        assert!(!c.may_call_from(ip("10.2.0.1")));
        assert!(!c.may_call_from(ip("192.0.2.8")));
        assert!(!c.may_call_from(ip("2001:db9::1")));
        c.ip_allowlist = Cidrs::parse(&["0.0.0.0/0"]).unwrap();
        assert!(c.may_call_from(ip("198.51.100.1")), "/0 is everything");
        assert!(!c.may_call_from(ip("::1")), "of its own family");
    }

    #[test]
    fn finds_the_client_of_a_token_and_nothing_else() {
        let directory =
            ClientDirectory::new(vec![client("a", "token-a"), client("b", "token-b")]).unwrap();
        for _ in 0..2 {
            assert_eq!(directory.authenticate("token-b").unwrap().id.as_str(), "b");
            assert_eq!(directory.authenticate("token-a").unwrap().id.as_str(), "a");
        }
        assert!(directory.authenticate("token-c").is_none());
        assert!(directory.authenticate("").is_none());
        assert!(directory.authenticate(&"x".repeat(600)).is_none());
        assert_eq!(
            directory.verified.lock_or_recover().len(),
            2,
            "only verified tokens are cached"
        );
    }

    #[test]
    fn rejects_duplicate_ids_and_bad_projects() {
        assert!(matches!(
            ClientDirectory::new(vec![client("a", "1"), client("a", "2")]),
            Err(ApiConfigError::DuplicateClient(_))
        ));
        let mut bad = client("a", "1");
        bad.project = "has space".into();
        assert!(ClientDirectory::new(vec![bad]).is_err());
    }
}
