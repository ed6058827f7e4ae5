//! Cooldowns per target domain on each proxy's slot: the request's registrable domain
//! (found only when needed) and one proxy's table of cooldowns by domain, merged by the
//! store's rule (`proxypool_core::cooldown`) so every gateway and the store agree.
//!
//! A pick asks each candidate "cooling for this domain?": one atomic load when the proxy
//! has no cooldown still running, a short lock of its few entries otherwise.

use proxypool_core::cooldown::merge_cooldowns;
use proxypool_core::{CooldownChange, Domain, DomainCooldown, LockExt, UnixMillis};
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

/// One proxy's cooldowns, by domain.
#[derive(Debug, Default)]
pub(crate) struct DomainCooldowns {
    /// The latest `until_ms` of the entries: at or after it nothing is cooling, and a pick
    /// needs no lock.
    cooling_until: AtomicU64,
    entries: Mutex<Vec<DomainCooldown>>,
}

impl DomainCooldowns {
    /// Whether the proxy must not be used for the target's domain at `now_ms`.
    pub(crate) fn is_cooling(&self, target: &TargetDomain<'_>, now_ms: UnixMillis) -> bool {
        if now_ms >= self.cooling_until.load(Ordering::Acquire) {
            return false;
        }
        let Some(domain) = target.get() else {
            return false;
        };
        self.entries
            .lock_or_recover()
            .iter()
            .any(|e| &e.domain == domain && e.is_cooling(now_ms))
    }

    /// The remembered entry for `domain`, if any.
    pub(crate) fn get(&self, domain: &Domain, now_ms: UnixMillis) -> Option<DomainCooldown> {
        self.entries
            .lock_or_recover()
            .iter()
            .find(|e| &e.domain == domain && e.forget_at_ms > now_ms)
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
        assert!(!table.is_cooling(&on_a, 0));
        table.apply(&[&CooldownChange::Set(entry("a.test", 500))], 0);
        assert!(table.is_cooling(&on_a, 499));
        assert!(!table.is_cooling(&on_b, 499));
        assert!(!table.is_cooling(&on_a, 500));
        // Remembered past the end (strikes), forgotten after.
        assert!(table.get(&a, 1_000).is_some());
        assert!(table.get(&a, 1_500).is_none());
    }

    #[test]
    fn a_replaced_table_holds_only_what_it_was_given() {
        let table = DomainCooldowns::default();
        let target = TargetAddr::domain("a.test", 80).unwrap();
        let on_a = TargetDomain::new(&target);
        table.apply(&[&CooldownChange::Set(entry("a.test", 500))], 0);
        table.replace(&[&CooldownChange::Set(entry("b.test", 900))], 0);
        assert!(!table.is_cooling(&on_a, 100));
        assert_eq!(table.cooling(100).len(), 1);
        table.replace(&[], 0);
        assert!(table.cooling(100).is_empty());
    }
}
