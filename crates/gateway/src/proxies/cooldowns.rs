//! Cooldowns per target domain on each proxy's slot: the request's registrable domain
//! (found only when needed) and one proxy's table of cooldowns by domain, merged by the
//! store's rule (`proxypool_core::cooldown`) so every gateway and the store agree.
//!
//! A pick asks each candidate "cooling for this domain?": one atomic load when the proxy
//! has no cooldown still running, a short lock of its few entries otherwise.

use proxypool_core::cooldown_merge::merge_cooldowns;
use proxypool_core::{CooldownChange, Domain, DomainCooldown, LockExt, ProjectId, UnixMillis};
use proxypool_proto::TargetAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A request's target domain, found only when something needs it (a pick that meets a
/// proxy with a cooldown running, or a ban): most requests never pay for the public
/// suffix look-up.
#[derive(Debug)]
pub(crate) struct TargetDomain<'t> {
    target: &'t TargetAddr,
    domain: OnceLock<Option<Domain>>,
}

impl<'t> TargetDomain<'t> {
    pub(crate) fn new(target: &'t TargetAddr) -> Self {
        Self {
            target,
            domain: OnceLock::new(),
        }
    }

    /// The registrable domain; `None` for a host that is not a valid name.
    pub(crate) fn get(&self) -> Option<&Domain> {
        self.domain
            .get_or_init(|| match self.target {
                TargetAddr::Ip(addr) => Some(Domain::of_ip(addr.ip())),
                TargetAddr::Domain(host, _) => Domain::of_host(host),
            })
            .as_ref()
    }
}

/// One proxy's cooldowns, by domain and scope (shared, or one project's).
#[derive(Debug, Default)]
pub(crate) struct DomainCooldowns {
    /// The latest `until_ms` of the entries: at or after it nothing is cooling, and a pick
    /// needs no lock.
    cooling_until: AtomicU64,
    entries: Mutex<Vec<DomainCooldown>>,
}

impl DomainCooldowns {
    /// Whether a client of `project` must not use the proxy for the target's domain at
    /// `now_ms`: a shared entry or one of that project's is cooling.
    pub(crate) fn is_cooling(
        &self,
        target: &TargetDomain<'_>,
        project: Option<&ProjectId>,
        now_ms: UnixMillis,
    ) -> bool {
        self.cooling_end(target, project, now_ms).is_some()
    }

    /// The latest end of the cooldowns that bind a client of `project` for the target's
    /// domain and still run at `now_ms`, if any.
    pub(crate) fn cooling_end(
        &self,
        target: &TargetDomain<'_>,
        project: Option<&ProjectId>,
        now_ms: UnixMillis,
    ) -> Option<UnixMillis> {
        if now_ms >= self.cooling_until.load(Ordering::Acquire) {
            return None;
        }
        let domain = target.get()?;
        self.entries
            .lock_or_recover()
            .iter()
            .filter(|e| &e.domain == domain && e.binds(project) && e.is_cooling(now_ms))
            .map(|e| e.until_ms)
            .max()
    }

    /// The remembered entry for `domain` in `scope` (`None` = shared), if any.
    pub(crate) fn get(
        &self,
        domain: &Domain,
        scope: Option<&ProjectId>,
        now_ms: UnixMillis,
    ) -> Option<DomainCooldown> {
        self.entries
            .lock_or_recover()
            .iter()
            .find(|e| &e.domain == domain && e.in_scope(scope) && e.forget_at_ms > now_ms)
            .cloned()
    }

    /// Merges `changes` by the store's rule (so every gateway and the store agree).
    pub(crate) fn apply(&self, changes: &[&CooldownChange], now_ms: UnixMillis) {
        let mut entries = self.entries.lock_or_recover();
        merge_cooldowns(&mut entries, changes, now_ms);
        self.publish_end(&entries);
    }

    /// Replaces the table with `changes` merged into nothing: a snapshot's entries for the
    /// proxy followed by what this gateway made and the snapshot may not show yet. What
    /// the store cleared or shortened is thereby gone here too.
    pub(crate) fn replace(&self, changes: &[&CooldownChange], now_ms: UnixMillis) {
        let mut fresh = Vec::new();
        merge_cooldowns(&mut fresh, changes, now_ms);
        let mut entries = self.entries.lock_or_recover();
        *entries = fresh;
        self.publish_end(&entries);
    }

    fn publish_end(&self, entries: &[DomainCooldown]) {
        let latest = entries.iter().map(|e| e.until_ms).max().unwrap_or(0);
        self.cooling_until.store(latest, Ordering::Release);
    }

    /// Entries still cooling at `now_ms` (for `/status` and tests).
    pub(crate) fn cooling(&self, now_ms: UnixMillis) -> Vec<DomainCooldown> {
        self.entries
            .lock_or_recover()
            .iter()
            .filter(|e| e.is_cooling(now_ms))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proxypool_core::ProxyId;

    /// A cooldown of one fixed proxy for `domain` until `until_ms`, forgotten a second later.
    pub(crate) fn entry(domain: &str, until_ms: u64) -> DomainCooldown {
        DomainCooldown {
            proxy_id: ProxyId::new("0123456789abcdef0123456789abcdef").unwrap(),
            domain: Domain::new(domain).unwrap(),
            project: None,
            until_ms,
            strikes: 1,
            forget_at_ms: until_ms + 1_000,
        }
    }

    #[test]
    fn a_cooldown_holds_for_its_domain_only_and_until_its_end() {
        let table = DomainCooldowns::default();
        let a = Domain::new("a.test").unwrap();
        let (target_a, target_b) = (
            TargetAddr::domain("www.a.test", 80).unwrap(),
            TargetAddr::domain("b.test", 80).unwrap(),
        );
        let (on_a, on_b) = (TargetDomain::new(&target_a), TargetDomain::new(&target_b));
        assert!(!table.is_cooling(&on_a, None, 0));
        table.apply(&[&CooldownChange::Set(entry("a.test", 500))], 0);
        assert!(table.is_cooling(&on_a, None, 499));
        assert!(!table.is_cooling(&on_b, None, 499));
        assert!(!table.is_cooling(&on_a, None, 500));
        // Remembered past the end (strikes), forgotten after.
        assert!(table.get(&a, None, 1_000).is_some());
        assert!(table.get(&a, None, 1_500).is_none());
    }

    #[test]
    fn a_replaced_table_holds_only_what_it_was_given() {
        let table = DomainCooldowns::default();
        let target = TargetAddr::domain("a.test", 80).unwrap();
        let on_a = TargetDomain::new(&target);
        table.apply(&[&CooldownChange::Set(entry("a.test", 500))], 0);
        table.replace(&[&CooldownChange::Set(entry("b.test", 900))], 0);
        assert!(!table.is_cooling(&on_a, None, 100));
        assert_eq!(table.cooling(100).len(), 1);
        table.replace(&[], 0);
        assert!(table.cooling(100).is_empty());
    }

    #[test]
    fn a_project_s_cooldown_binds_its_clients_only() {
        let table = DomainCooldowns::default();
        let (acme, beta) = (
            ProjectId::new("acme").unwrap(),
            ProjectId::new("beta").unwrap(),
        );
        let target = TargetAddr::domain("a.test", 80).unwrap();
        let on_a = TargetDomain::new(&target);
        let mut reported = entry("a.test", 500);
        reported.project = Some(beta.clone());
        table.apply(&[&CooldownChange::Set(reported)], 0);
        assert!(table.is_cooling(&on_a, Some(&beta), 100));
        assert!(!table.is_cooling(&on_a, Some(&acme), 100));
        assert!(!table.is_cooling(&on_a, None, 100));
        // A shared entry binds everyone; the latest end that binds a client counts.
        table.apply(&[&CooldownChange::Set(entry("a.test", 300))], 0);
        assert_eq!(table.cooling_end(&on_a, Some(&acme), 100), Some(300));
        assert_eq!(table.cooling_end(&on_a, Some(&beta), 100), Some(500));
        let domain = Domain::new("a.test").unwrap();
        assert_eq!(table.get(&domain, None, 100).unwrap().until_ms, 300);
        assert_eq!(table.get(&domain, Some(&beta), 100).unwrap().until_ms, 500);
        assert!(table.get(&domain, Some(&acme), 100).is_none());
    }
}
