//! Cooldowns per (proxy, registrable domain): a site that bans a proxy says nothing about
//! the other sites, so the proxy is kept off that one domain for a while and stays in use
//! for every other.
//!
//! Where they come from: a gateway that sees a ban status from the origin (plain HTTP),
//! and clients' feedback (`POST /v1/feedback`, the only way to learn about bans inside
//! tunnels). Where they go: the gateway that saw the ban applies it at once; it sends it
//! in its next runtime report; the store merges it (the rule below) and every gateway's
//! next snapshot carries it; extraction with `for_domain` skips proxies cooling down for
//! that domain.
//!
//! Whose they are: every entry has a scope. A ban the gateway saw itself (an origin's
//! status) is a fact about the proxy and is **shared**: every client skips the proxy for
//! that domain. A client's report is an opinion of one tenant, so it is kept in the
//! reporting client's **project** scope (`project: Some(..)`): that project's clients skip
//! the proxy, the others never see the entry, and nothing a tenant reports can block,
//! shorten or clear what another tenant or the gateway recorded. An operator may mark a
//! client as trusted for shared feedback; its reports (and its `ok`) are shared.
//!
//! The merge rule, the same in every store: entries are keyed by (proxy, scope, domain);
//! a `Set` keeps the latest `until_ms`, the highest `strikes` and the latest
//! `forget_at_ms` of the stored and the new entry, so merging is commutative and a
//! replayed report changes nothing; `Clear` drops the entry of its scope only; an entry
//! whose `forget_at_ms` has passed is gone. A proxy keeps at most
//! [`MAX_COOLDOWNS_PER_PROXY`] entries per scope: beyond that, the scope's entries to be
//! forgotten first are dropped, so one project's reports never push out another's or the
//! shared ones. It keeps at most [`MAX_PROJECT_SCOPES_PER_PROXY`] project scopes beside the
//! shared one: beyond that, the scopes whose latest entry is forgotten first go whole, so
//! a flood of made-up scopes cannot grow a proxy's entries (and every snapshot listing it)
//! without bound. Entries on proxies the pool does not hold are ignored.
//!
//! Which scopes may be written at all is the writer's business: a client writes only its
//! own project's (or, trusted, the shared one); a gateway's runtime report may name only
//! the shared scope and the configured projects, and the controller drops the rest
//! ([`drop_unknown_scopes`](crate::cooldown_merge::drop_unknown_scopes)) before the store
//! sees them. The merge itself is [`crate::cooldown_merge`].

use crate::error::{PoolError, PoolResult};
use crate::ids::{ClientId, ProjectId, ProxyId};
use crate::time::UnixMillis;
use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt::{self, Debug};
use std::net::IpAddr;

/// Most domains one proxy is remembered cooling down for, per scope (shared, or one
/// project's).
pub const MAX_COOLDOWNS_PER_PROXY: usize = 16;
/// Most project scopes one proxy keeps entries in, besides the shared scope: with
/// [`MAX_COOLDOWNS_PER_PROXY`], at most `(1 + 8) * 16` entries per proxy.
pub const MAX_PROJECT_SCOPES_PER_PROXY: usize = 8;
/// Most cooldown changes one call (a runtime report, a feedback batch) may carry.
pub const MAX_COOLDOWN_CHANGES: usize = 10_000;
/// The longest cooldown anyone may ask for (one day).
pub const MAX_COOLDOWN_MS: u64 = 86_400_000;
/// Most session feedback entries the store keeps at once (newest kept).
pub const MAX_SESSION_FEEDBACK: usize = 4_096;
/// How long session feedback waits in the store for the gateway that holds the session.
pub const SESSION_FEEDBACK_TTL_MS: u64 = 60_000;

/// A registrable domain (`example.co.uk` for `www.shop.example.co.uk`), lower-case, as the
/// public suffix list cuts it; an IP literal stands for itself, and a name with no
/// registrable part (`localhost`, a bare public suffix) is kept whole.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Domain(String);

impl Domain {
    /// Validates an already-registrable domain as stored and sent: 1-253 characters of
    /// `[a-z0-9.:-]` (`:` for IPv6 literals), no empty label.
    pub fn new(value: impl AsRef<str>) -> Result<Self, PoolError> {
        let value = value.as_ref();
        let valid = !value.is_empty()
            && value.len() <= 253
            && value.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | ':')
            })
            && (value.contains(':') || value.split('.').all(|label| !label.is_empty()));
        if valid {
            Ok(Domain(value.to_owned()))
        } else {
            Err(PoolError::invalid(
                "domain must be 1-253 characters of [a-z0-9.-] with no empty label",
            ))
        }
    }

    /// The registrable domain of a request's target host (`WWW.Example.COM.` →
    /// `example.com`, `[::1]` → `::1`). `None` for a host that is not a valid name.
    pub fn of_host(host: &str) -> Option<Domain> {
        let host = host.trim_end_matches('.');
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Domain::of_ip(ip));
        }
        // Most hosts come lower-case already: no copy for them.
        let lowered: std::borrow::Cow<'_, str> = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            host.to_ascii_lowercase().into()
        } else {
            host.into()
        };
        let registrable = psl::domain_str(&lowered).unwrap_or(&lowered);
        Domain::new(registrable).ok()
    }

    /// An IP literal's domain: the address itself.
    pub fn of_ip(ip: IpAddr) -> Domain {
        Domain(ip.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Domain({:?})", self.0)
    }
}

impl<'de> Deserialize<'de> for Domain {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Domain::new(&raw).map_err(serde::de::Error::custom)
    }
}

/// One proxy's cooldown for one domain, in one scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DomainCooldown {
    pub proxy_id: ProxyId,
    pub domain: Domain,
    /// The project whose clients reported it; `None` = shared (seen by the gateway, or
    /// reported by a client trusted for shared feedback). Left out of the JSON when shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectId>,
    /// The proxy is not used for the domain before this time.
    pub until_ms: UnixMillis,
    /// Bans in a row; the next ban's cooldown grows from it.
    pub strikes: u32,
    /// When the entry (its strikes too) is forgotten; at or after `until_ms`.
    pub forget_at_ms: UnixMillis,
}

impl DomainCooldown {
    pub fn is_cooling(&self, now: UnixMillis) -> bool {
        now < self.until_ms
    }

    /// Whether a client of `project` is bound by the entry: shared entries bind every
    /// client, a project's entries only that project's clients.
    pub fn binds(&self, project: Option<&ProjectId>) -> bool {
        self.project.is_none() || self.project.as_ref() == project
    }

    /// Whether the entry is in `scope` (`None` = shared).
    pub fn in_scope(&self, scope: Option<&ProjectId>) -> bool {
        self.project.as_ref() == scope
    }

    pub fn validate(&self) -> Result<(), PoolError> {
        if self.forget_at_ms < self.until_ms {
            return Err(PoolError::invalid(
                "a cooldown's forget_at_ms must not be before its until_ms",
            ));
        }
        Ok(())
    }

    /// Merges `other` (same proxy, scope and domain) into `self` by the module's rule.
    pub fn merge(&mut self, other: &DomainCooldown) {
        self.until_ms = self.until_ms.max(other.until_ms);
        self.strikes = self.strikes.max(other.strikes);
        self.forget_at_ms = self.forget_at_ms.max(other.forget_at_ms);
    }
}

/// One change to the cooldown state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CooldownChange {
    /// Merge this entry in.
    Set(DomainCooldown),
    /// The domain works through the proxy again: forget the entry of this scope
    /// (`project: None` = the shared one).
    Clear {
        proxy_id: ProxyId,
        domain: Domain,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        project: Option<ProjectId>,
    },
}

impl CooldownChange {
    pub fn proxy_id(&self) -> &ProxyId {
        match self {
            CooldownChange::Set(entry) => &entry.proxy_id,
            CooldownChange::Clear { proxy_id, .. } => proxy_id,
        }
    }

    /// The scope the change writes (`None` = shared).
    pub fn project(&self) -> Option<&ProjectId> {
        match self {
            CooldownChange::Set(entry) => entry.project.as_ref(),
            CooldownChange::Clear { project, .. } => project.as_ref(),
        }
    }
}

/// How long a ban keeps a proxy off a domain: `base` for the first strike, doubling per
/// further strike up to `cap`; the strikes are remembered `memory` past the cooldown's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CooldownPolicy {
    pub base_ms: u64,
    pub cap_ms: u64,
    pub memory_ms: u64,
}

impl CooldownPolicy {
    /// The cooldown of the `strikes`th ban in a row (1 = the first).
    pub fn ttl_ms(&self, strikes: u32) -> u64 {
        let doublings = strikes.saturating_sub(1).min(40);
        self.base_ms
            .saturating_mul(1u64 << doublings)
            .min(self.cap_ms)
            .max(1)
    }

    /// The entry a new ban makes, given what is known of the proxy and domain. With
    /// `ttl_ms` (a client's own estimate) the strikes still grow but the cooldown is that.
    pub fn ban(
        &self,
        key: CooldownKey,
        previous: Option<&DomainCooldown>,
        ttl_ms: Option<u64>,
        now: UnixMillis,
    ) -> DomainCooldown {
        let strikes = remembered_strikes(previous, now).saturating_add(1);
        let ttl = ttl_ms.unwrap_or_else(|| self.ttl_ms(strikes));
        self.entry(key, now.saturating_add(ttl), strikes)
    }

    /// A cooldown that is not a ban (a slow answer): `ttl_ms` or `base`, strikes unchanged.
    pub fn hold(
        &self,
        key: CooldownKey,
        previous: Option<&DomainCooldown>,
        ttl_ms: Option<u64>,
        now: UnixMillis,
    ) -> DomainCooldown {
        let until_ms = now.saturating_add(ttl_ms.unwrap_or(self.base_ms));
        self.entry(key, until_ms, remembered_strikes(previous, now))
    }

    /// An entry cooling until `until_ms`, remembered `memory_ms` past it.
    fn entry(&self, key: CooldownKey, until_ms: UnixMillis, strikes: u32) -> DomainCooldown {
        DomainCooldown {
            proxy_id: key.proxy_id,
            domain: key.domain,
            project: key.project,
            until_ms,
            strikes,
            forget_at_ms: until_ms.saturating_add(self.memory_ms),
        }
    }
}

/// What a cooldown entry is about: a proxy, a domain and a scope (`project: None` =
/// shared).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CooldownKey {
    pub proxy_id: ProxyId,
    pub domain: Domain,
    pub project: Option<ProjectId>,
}

impl CooldownKey {
    /// A shared entry's key (a ban the gateway saw).
    pub fn shared(proxy_id: ProxyId, domain: Domain) -> Self {
        CooldownKey {
            proxy_id,
            domain,
            project: None,
        }
    }

    /// Whether `entry` is the one this key names.
    pub fn names(&self, entry: &DomainCooldown) -> bool {
        entry.proxy_id == self.proxy_id
            && entry.domain == self.domain
            && entry.project == self.project
    }
}

/// The strikes of `previous` if it is still remembered at `now`, else none.
fn remembered_strikes(previous: Option<&DomainCooldown>, now: UnixMillis) -> u32 {
    previous
        .filter(|p| p.forget_at_ms > now)
        .map_or(0, |p| p.strikes)
}

/// What a client says about a proxy and a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The site refused the proxy: a ban (strikes grow).
    Banned,
    /// The site asked for a captcha: handled as a ban.
    Captcha,
    /// The site answered slowly: a short cooldown, strikes unchanged.
    Slow,
    /// The site works through the proxy: any cooldown for it ends.
    Ok,
}

impl Verdict {
    /// The change this verdict makes, given what is known of the proxy and domain.
    /// `previous` is the stored entry of the same key (proxy, domain and scope).
    pub fn change(
        self,
        policy: &CooldownPolicy,
        key: CooldownKey,
        previous: Option<&DomainCooldown>,
        ttl_ms: Option<u64>,
        now: UnixMillis,
    ) -> CooldownChange {
        match self {
            Verdict::Banned | Verdict::Captcha => {
                CooldownChange::Set(policy.ban(key, previous, ttl_ms, now))
            }
            Verdict::Slow => CooldownChange::Set(policy.hold(key, previous, ttl_ms, now)),
            Verdict::Ok => CooldownChange::Clear {
                proxy_id: key.proxy_id,
                domain: key.domain,
                project: key.project,
            },
        }
    }
}

/// Feedback about a gateway sticky session (a SOCKS5 or CONNECT client that knows its
/// session id, not the proxy): kept briefly and shipped in every snapshot, so the gateway
/// that holds the session applies it to the session's proxy and reports the result.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionFeedback {
    /// Unique per feedback, so a gateway applies each once.
    pub id: String,
    pub client: ClientId,
    pub session: String,
    pub domain: Domain,
    /// The scope of the cooldown it makes: the client's project, or `None` (shared) for a
    /// client trusted for shared feedback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectId>,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Dropped from the store and from snapshots after this.
    pub expires_at_ms: UnixMillis,
}

/// What the store did with a batch of cooldown changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CooldownReport {
    /// Changes applied to proxies the pool holds.
    pub applied: usize,
    /// Changes on proxies the pool does not hold (ignored).
    pub unknown: usize,
}

/// An extracted proxy its client gave back as bad.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReturnOutcome {
    /// The client's extraction of it ended; the proxy stays withheld from everyone until
    /// its hard expiry or a new generation from the vendor (`crate::extract`).
    Returned,
}

/// Cooldowns and client feedback (the control API's, the client API's and the snapshot
/// publisher's port).
#[async_trait]
pub trait CooldownStore: Send + Sync + Debug {
    /// Applies `changes` atomically by the module's merge rule. More than
    /// [`MAX_COOLDOWN_CHANGES`], or an invalid entry, is `InvalidInput` and changes nothing.
    async fn apply_cooldowns(
        &self,
        now: UnixMillis,
        changes: &[CooldownChange],
    ) -> PoolResult<CooldownReport>;

    /// The remembered entries (`forget_at_ms` after `now`) of `proxies`, by proxy in the
    /// given order, each proxy's by domain.
    async fn cooldowns_of(
        &self,
        now: UnixMillis,
        proxies: &[ProxyId],
    ) -> PoolResult<Vec<DomainCooldown>>;

    /// Keeps session feedback until its `expires_at_ms` (at most
    /// [`MAX_SESSION_FEEDBACK`]; the oldest are dropped first). The same id again is a
    /// no-op.
    async fn add_session_feedback(
        &self,
        now: UnixMillis,
        feedback: SessionFeedback,
    ) -> PoolResult<()>;

    /// The live session feedback, oldest first, at most `limit`.
    async fn session_feedback(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> PoolResult<Vec<SessionFeedback>>;

    /// Who `client` is to `proxy`, in one read: `Holder` when it holds it from a live
    /// extraction, `Unheld` when the pool holds it and no live extraction does, with the
    /// epoch of its latest lease since it last entered the pool (a gateway's ticket bound
    /// to that lease then decides, `crate::ticket`), `No` for a proxy the pool does not
    /// hold, for one another client holds and for one given back alike (an extracted proxy
    /// is its holder's alone), so the answer tells a client nothing about proxies that are
    /// not its to report.
    async fn may_report(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<crate::ticket::Reporter>;

    /// `client` gives back `proxy`, which it holds from a live extraction, as bad: the
    /// client's hold ends, and since it may still hold the credentials, the proxy stays
    /// EXTRACTED, held by nobody: never extracted, leased or checked again until its hard
    /// expiry, unless the vendor re-issues it (new credentials or a later issue time,
    /// `crate::extract::renews_given_back`: a new generation, FETCHED). Reads and replays
    /// of the extraction then show it returned, without credentials
    /// (`ExtractResponse::without_given_back`). A proxy the client does not hold is
    /// `NotFound`, and nothing changes.
    async fn return_extracted(
        &self,
        now: UnixMillis,
        client: &ClientId,
        proxy: &ProxyId,
    ) -> PoolResult<ReturnOutcome>;
}

/// Checks a batch before any store work.
pub fn validate_changes(changes: &[CooldownChange]) -> PoolResult<()> {
    if changes.len() > MAX_COOLDOWN_CHANGES {
        return Err(PoolError::invalid(format!(
            "at most {MAX_COOLDOWN_CHANGES} cooldown changes per call"
        )));
    }
    for change in changes {
        if let CooldownChange::Set(entry) = change {
            entry.validate()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(s: &str) -> Domain {
        Domain::new(s).unwrap()
    }

    #[test]
    fn the_registrable_domain_of_a_host() {
        let cases = [
            ("www.example.com", "example.com"),
            ("WWW.Shop.Example.CO.UK.", "example.co.uk"),
            ("example.com", "example.com"),
            ("a.b.c.github.io", "c.github.io"),
            ("localhost", "localhost"),
            ("127.0.0.1", "127.0.0.1"),
            ("[::1]", "::1"),
            ("host-a.test", "host-a.test"),
        ];
        for (host, expected) in cases {
            assert_eq!(Domain::of_host(host).unwrap().as_str(), expected, "{host}");
        }
        assert!(Domain::of_host("").is_none());
        assert!(Domain::of_host("bad host").is_none());
        assert!(Domain::of_host("a..b").is_none());
        assert!(Domain::new("Example.com").is_err());
    }

    #[test]
    fn strikes_double_the_cooldown_up_to_the_cap() {
        let policy = CooldownPolicy {
            base_ms: 1_000,
            cap_ms: 5_000,
            memory_ms: 10_000,
        };
        let ttls: Vec<u64> = (1..=5).map(|s| policy.ttl_ms(s)).collect();
        assert_eq!(ttls, [1_000, 2_000, 4_000, 5_000, 5_000]);
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let key = CooldownKey::shared(proxy, domain("a.test"));
        let first = policy.ban(key.clone(), None, None, 100);
        assert_eq!(
            (first.until_ms, first.strikes, first.forget_at_ms),
            (1_100, 1, 11_100)
        );
        let second = policy.ban(key.clone(), Some(&first), None, 2_000);
        assert_eq!((second.until_ms, second.strikes), (4_000, 2));
        // Once forgotten, a ban starts over.
        let fresh = policy.ban(key, Some(&first), None, 11_100);
        assert_eq!(fresh.strikes, 1);
    }
}
