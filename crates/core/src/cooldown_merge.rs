//! The merge every store runs on one proxy's cooldowns (the rule in the `cooldown` module's
//! documentation: keyed by proxy, scope and domain, bounded per scope and in project
//! scopes), and the filter that keeps a runtime report to the scopes that exist.

use crate::cooldown::{
    CooldownChange, DomainCooldown, MAX_COOLDOWNS_PER_PROXY, MAX_PROJECT_SCOPES_PER_PROXY,
};
use crate::ids::ProjectId;
use crate::time::UnixMillis;
use std::collections::BTreeSet;

/// What [`drop_unknown_scopes`] took out of a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownScopes {
    /// Changes dropped.
    pub dropped: usize,
    /// The scopes they named, at most [`UnknownScopes::NAMED`] of them (for a log line).
    pub named: BTreeSet<ProjectId>,
}

impl UnknownScopes {
    /// Most distinct scopes named.
    pub const NAMED: usize = 8;
}

/// Drops from `changes` every change in a project scope that `known` does not name (the
/// shared scope is always known), keeping the others in their order.
pub fn drop_unknown_scopes(
    changes: &mut Vec<CooldownChange>,
    known: impl Fn(&ProjectId) -> bool,
) -> UnknownScopes {
    let mut unknown = UnknownScopes::default();
    changes.retain(|change| match change.project() {
        Some(project) if !known(project) => {
            unknown.dropped += 1;
            if unknown.named.len() < UnknownScopes::NAMED {
                unknown.named.insert(project.clone());
            }
            false
        }
        _ => true,
    });
    unknown
}

/// Applies `changes` to one proxy's stored entries by the module's rule, at `now`: what
/// `MemoryPool` runs, and what the Redis script does in Lua.
pub fn merge_cooldowns(
    stored: &mut Vec<DomainCooldown>,
    changes: &[&CooldownChange],
    now: UnixMillis,
) {
    for change in changes {
        match change {
            CooldownChange::Set(entry) => {
                let same = |e: &&mut DomainCooldown| {
                    e.domain == entry.domain && e.project == entry.project
                };
                match stored.iter_mut().find(same) {
                    Some(existing) => existing.merge(entry),
                    None => stored.push(entry.clone()),
                }
            }
            CooldownChange::Clear {
                domain, project, ..
            } => stored.retain(|e| !(&e.domain == domain && &e.project == project)),
        }
    }
    stored.retain(|e| e.forget_at_ms > now);
    // By scope (shared first), then forgotten latest first; ties by domain, so every
    // store keeps the same ones. Each scope keeps its first MAX_COOLDOWNS_PER_PROXY.
    stored.sort_by(|a, b| {
        a.project
            .cmp(&b.project)
            .then_with(|| b.forget_at_ms.cmp(&a.forget_at_ms))
            .then_with(|| a.domain.cmp(&b.domain))
    });
    let mut kept = 0;
    let mut scope: Option<Option<ProjectId>> = None;
    // Each project scope's latest forget_at_ms: its first entry in this order.
    let mut projects: Vec<(ProjectId, UnixMillis)> = Vec::new();
    stored.retain(|e| {
        if scope.as_ref() != Some(&e.project) {
            scope = Some(e.project.clone());
            kept = 0;
            if let Some(project) = &e.project {
                projects.push((project.clone(), e.forget_at_ms));
            }
        }
        kept += 1;
        kept <= MAX_COOLDOWNS_PER_PROXY
    });
    if projects.len() > MAX_PROJECT_SCOPES_PER_PROXY {
        // The project scopes remembered longest stay, ties by project; shared always stays.
        projects.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let staying: BTreeSet<ProjectId> = projects
            .into_iter()
            .take(MAX_PROJECT_SCOPES_PER_PROXY)
            .map(|(project, _)| project)
            .collect();
        stored.retain(|e| e.project.as_ref().is_none_or(|p| staying.contains(p)));
    }
    stored.sort_by(|a, b| {
        a.domain
            .cmp(&b.domain)
            .then_with(|| a.project.cmp(&b.project))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cooldown::Domain;
    use crate::ids::ProxyId;

    fn domain(s: &str) -> Domain {
        Domain::new(s).unwrap()
    }

    #[test]
    fn merging_is_order_free_and_bounded() {
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let entry = |d: &str, until: u64, strikes: u32| DomainCooldown {
            proxy_id: proxy.clone(),
            domain: domain(d),
            project: None,
            until_ms: until,
            strikes,
            forget_at_ms: until + 1_000,
        };
        let a = CooldownChange::Set(entry("a.test", 500, 1));
        let b = CooldownChange::Set(entry("a.test", 300, 3));
        let (mut one, mut two) = (Vec::new(), Vec::new());
        merge_cooldowns(&mut one, &[&a, &b], 0);
        merge_cooldowns(&mut two, &[&b, &a], 0);
        assert_eq!(one, two);
        assert_eq!((one[0].until_ms, one[0].strikes), (500, 3));
        let changes: Vec<CooldownChange> = (0..20)
            .map(|i| CooldownChange::Set(entry(&format!("d{i:02}.test"), 1_000 + i, 1)))
            .collect();
        let refs: Vec<&CooldownChange> = changes.iter().collect();
        merge_cooldowns(&mut one, &refs, 0);
        assert_eq!(one.len(), MAX_COOLDOWNS_PER_PROXY);
        assert!(one.iter().all(|e| e.domain != domain("a.test")));
        let clear = CooldownChange::Clear {
            proxy_id: proxy.clone(),
            domain: domain("d19.test"),
            project: None,
        };
        merge_cooldowns(&mut one, &[&clear], 0);
        assert_eq!(one.len(), MAX_COOLDOWNS_PER_PROXY - 1);
        merge_cooldowns(&mut one, &[], 10_000);
        assert!(one.is_empty());
    }

    #[test]
    fn scopes_are_merged_bounded_and_cleared_apart() {
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let acme = ProjectId::new("acme").unwrap();
        let beta = ProjectId::new("beta").unwrap();
        let entry = |d: &str, project: Option<&ProjectId>, until: u64| DomainCooldown {
            proxy_id: proxy.clone(),
            domain: domain(d),
            project: project.cloned(),
            until_ms: until,
            strikes: 1,
            forget_at_ms: until + 1_000,
        };
        let mut stored = Vec::new();
        let shared = CooldownChange::Set(entry("a.test", None, 500));
        let acme_a = CooldownChange::Set(entry("a.test", Some(&acme), 900));
        merge_cooldowns(&mut stored, &[&shared, &acme_a], 0);
        assert_eq!(stored.len(), 2, "one entry per scope: {stored:?}");
        // A flood of beta's reports on other domains fills beta's scope only.
        let flood: Vec<CooldownChange> = (0..40)
            .map(|i| CooldownChange::Set(entry(&format!("f{i:02}.test"), Some(&beta), 5_000)))
            .collect();
        let refs: Vec<&CooldownChange> = flood.iter().collect();
        merge_cooldowns(&mut stored, &refs, 0);
        fn count(stored: &[DomainCooldown], scope: Option<&ProjectId>) -> usize {
            stored.iter().filter(|e| e.in_scope(scope)).count()
        }
        assert_eq!(count(&stored, Some(&beta)), MAX_COOLDOWNS_PER_PROXY);
        assert_eq!((count(&stored, None), count(&stored, Some(&acme))), (1, 1));
        // beta's `ok` clears nothing of acme's nor the shared entry.
        let beta_ok = CooldownChange::Clear {
            proxy_id: proxy.clone(),
            domain: domain("a.test"),
            project: Some(beta.clone()),
        };
        merge_cooldowns(&mut stored, &[&beta_ok], 0);
        assert_eq!((count(&stored, None), count(&stored, Some(&acme))), (1, 1));
        // Who is bound by what.
        let a: Vec<&DomainCooldown> = stored
            .iter()
            .filter(|e| e.domain == domain("a.test"))
            .collect();
        assert!(a.iter().all(|e| e.binds(Some(&acme))));
        assert_eq!(a.iter().filter(|e| e.binds(Some(&beta))).count(), 1);
        assert_eq!(a.iter().filter(|e| e.binds(None)).count(), 1);
        let acme_ok = CooldownChange::Clear {
            proxy_id: proxy,
            domain: domain("a.test"),
            project: Some(acme.clone()),
        };
        merge_cooldowns(&mut stored, &[&acme_ok], 0);
        assert_eq!((count(&stored, None), count(&stored, Some(&acme))), (1, 0));
    }

    #[test]
    fn a_proxy_keeps_a_bounded_number_of_project_scopes_the_longest_remembered() {
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let project = |i: usize| ProjectId::new(format!("p{i:02}")).unwrap();
        let set = |scope: Option<ProjectId>, forget: u64| {
            CooldownChange::Set(DomainCooldown {
                proxy_id: proxy.clone(),
                domain: domain("a.test"),
                project: scope,
                until_ms: 100,
                strikes: 1,
                forget_at_ms: forget,
            })
        };
        // The shared entry is the one forgotten first of all, and stays all the same.
        let mut flood = vec![set(None, 1_000)];
        flood.extend(
            (0..MAX_PROJECT_SCOPES_PER_PROXY + 5).map(|i| set(Some(project(i)), 2_000 + i as u64)),
        );
        let refs: Vec<&CooldownChange> = flood.iter().collect();
        let mut stored = Vec::new();
        merge_cooldowns(&mut stored, &refs, 0);
        let scopes: Vec<Option<ProjectId>> = stored.iter().map(|e| e.project.clone()).collect();
        let mut expected = vec![None];
        expected.extend((5..MAX_PROJECT_SCOPES_PER_PROXY + 5).map(|i| Some(project(i))));
        assert_eq!(
            scopes, expected,
            "shared, then the latest-forgotten project scopes"
        );
        // Merged the other way round, the same scopes stay.
        let reversed: Vec<&CooldownChange> = flood.iter().rev().collect();
        let mut other = Vec::new();
        merge_cooldowns(&mut other, &reversed, 0);
        assert_eq!(other, stored);
    }

    #[test]
    fn changes_in_unknown_scopes_are_dropped_and_named() {
        let proxy = ProxyId::new("0123456789abcdef0123456789abcdef").unwrap();
        let clear = |scope: Option<&str>| CooldownChange::Clear {
            proxy_id: proxy.clone(),
            domain: domain("a.test"),
            project: scope.map(|p| ProjectId::new(p).unwrap()),
        };
        let mut changes = vec![clear(None), clear(Some("acme")), clear(Some("made-up"))];
        changes.extend((0..20).map(|i| clear(Some(&format!("fake-{i:02}")))));
        let unknown = drop_unknown_scopes(&mut changes, |p| p.as_str() == "acme");
        assert_eq!(changes, vec![clear(None), clear(Some("acme"))]);
        assert_eq!(unknown.dropped, 21);
        assert_eq!(unknown.named.len(), UnknownScopes::NAMED);
        assert!(unknown.named.contains(&ProjectId::new("made-up").unwrap()));
    }
}
