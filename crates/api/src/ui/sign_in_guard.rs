//! Failed dashboard sign-ins, counted per address group, and the lockout they earn.
//!
//! A sign-in is an admin token guessed over the network, so every failure costs the
//! guesser time: after [`FREE_FAILURES`] failures from one address group
//! (`proxypool_core::address_group`: an IPv4 address, or an IPv6 network of the API's
//! `ipv6_prefix`) every further failure doubles a lockout, up to [`MAX_LOCKOUT_MS`]. While
//! locked out, every sign-in from the group is refused before its token is looked at, the
//! right token too, so the lockout cannot be used to test guesses. A success forgets the
//! group's failures; a group quiet for [`FORGET_AFTER_MS`] past its lockout is forgotten.
//!
//! The table is bounded ([`MAX_GROUPS`]): when full it drops forgotten groups, then the
//! group whose last failure is oldest, so many addresses cannot grow it.

use proxypool_core::{LockExt, UnixMillis};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Failures from one group before the first lockout.
pub const FREE_FAILURES: u32 = 5;
/// The first lockout; each further failure doubles it.
const FIRST_LOCKOUT_MS: u64 = 1_000;
/// The longest lockout.
pub(crate) const MAX_LOCKOUT_MS: u64 = 15 * 60 * 1000;
/// How long after its lockout ends a quiet group's failures are kept.
const FORGET_AFTER_MS: u64 = 15 * 60 * 1000;
/// Most address groups remembered at once.
pub(crate) const MAX_GROUPS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last_ms: UnixMillis,
    locked_until_ms: UnixMillis,
}

impl Failures {
    fn forgotten(&self, now: UnixMillis) -> bool {
        now >= self
            .locked_until_ms
            .max(self.last_ms)
            .saturating_add(FORGET_AFTER_MS)
    }
}

/// The failed sign-ins per address group.
#[derive(Debug, Default)]
pub(crate) struct SignInGuard {
    groups: Mutex<HashMap<IpAddr, Failures>>,
}

impl SignInGuard {
    /// Milliseconds until `group` may try again; `None` when it may now.
    pub(crate) fn locked_for(&self, now: UnixMillis, group: IpAddr) -> Option<u64> {
        let groups = self.groups.lock_or_recover();
        let failures = groups.get(&group)?;
        (failures.locked_until_ms > now).then(|| failures.locked_until_ms - now)
    }

    /// Counts a failure of `group`.
    pub(crate) fn failed(&self, now: UnixMillis, group: IpAddr) {
        let mut groups = self.groups.lock_or_recover();
        if groups.len() >= MAX_GROUPS && !groups.contains_key(&group) {
            groups.retain(|_, f| !f.forgotten(now));
            if groups.len() >= MAX_GROUPS
                && let Some(oldest) = groups
                    .iter()
                    .min_by_key(|(_, f)| f.last_ms)
                    .map(|(key, _)| *key)
            {
                groups.remove(&oldest);
            }
        }
        let entry = groups.entry(group).or_insert(Failures {
            count: 0,
            last_ms: now,
            locked_until_ms: 0,
        });
        if entry.forgotten(now) {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last_ms = now;
        if let Some(over) = entry.count.checked_sub(FREE_FAILURES + 1) {
            let lockout = FIRST_LOCKOUT_MS
                .checked_shl(over.min(32))
                .unwrap_or(MAX_LOCKOUT_MS)
                .min(MAX_LOCKOUT_MS);
            entry.locked_until_ms = now.saturating_add(lockout);
        }
    }

    /// A success: the group's failures are forgotten.
    pub(crate) fn succeeded(&self, group: IpAddr) {
        self.groups.lock_or_recover().remove(&group);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.groups.lock_or_recover().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn failures_past_the_free_ones_lock_out_with_a_doubling_wait() {
        let guard = SignInGuard::default();
        let (a, b) = (ip("203.0.113.7"), ip("198.51.100.1"));
        for _ in 0..FREE_FAILURES {
            assert_eq!(guard.locked_for(1_000, a), None);
            guard.failed(1_000, a);
        }
        assert_eq!(guard.locked_for(1_000, a), None, "the free failures");
        guard.failed(1_000, a);
        assert_eq!(guard.locked_for(1_000, a), Some(FIRST_LOCKOUT_MS));
        assert_eq!(guard.locked_for(1_000, b), None, "another address");
        assert_eq!(guard.locked_for(1_000 + FIRST_LOCKOUT_MS, a), None);
        guard.failed(2_000, a);
        assert_eq!(guard.locked_for(2_000, a), Some(2 * FIRST_LOCKOUT_MS));
        for _ in 0..64 {
            guard.failed(3_000, a);
        }
        assert_eq!(guard.locked_for(3_000, a), Some(MAX_LOCKOUT_MS), "capped");
        let quiet = 3_000 + MAX_LOCKOUT_MS + FORGET_AFTER_MS;
        guard.failed(quiet, a);
        assert_eq!(guard.locked_for(quiet, a), None, "forgotten when quiet");
        guard.succeeded(a);
        assert_eq!(guard.len(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let guard = SignInGuard::default();
        for i in 0..(MAX_GROUPS as u32 + 10) {
            guard.failed(u64::from(i), IpAddr::V4(i.into()));
        }
        assert_eq!(guard.len(), MAX_GROUPS);
        assert!(
            !guard
                .groups
                .lock_or_recover()
                .contains_key(&IpAddr::V4(0.into()))
        );
    }
}
