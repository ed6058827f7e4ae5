//! Turns what the store says changed for a worker into a delta against the content last
//! issued to it: each changed proxy read as it is now ([`Holding`]) becomes an upsert, a
//! lease move, a removal, a held lease or nothing, and its cooldowns are compared with the
//! issued ones; the controller's own inputs (clients, policy, ticket key, upstream TLS) are
//! compared with what the content holds of them. Pure: the publisher's driver does the reads.

use super::Issued;
use crate::content::same_but_lease;
use crate::delta::{LeaseEnd, ProxyCooldowns, SnapshotDelta};
use proxypool_core::GeoValues;
use proxypool_core::control::{GatewayClient, HeldLease, SnapshotProxy, UpstreamTls};
use proxypool_core::{
    AssignmentState, CooldownPolicy, DomainCooldown, Holding, OwnedProxy, ProxyId, TicketKey,
    UnixMillis,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The listing of an owned proxy in a snapshot.
pub(crate) fn snapshot_proxy(owned: &OwnedProxy) -> SnapshotProxy {
    let record = &owned.record;
    SnapshotProxy {
        id: record.id.clone(),
        protocol: record.protocol,
        host: record.host.clone(),
        port: record.port,
        credentials: record.credentials.clone(),
        upstream: record.upstream.clone(),
        region: record.region.clone(),
        carrier: record.carrier.clone(),
        geo: GeoValues::of_labels(&record.labels),
        max_sessions: record.max_sessions,
        usable_until_ms: record.usable_until_ms,
        lease_until_ms: owned.assignment.lease_until_ms,
        epoch: owned.assignment.epoch,
    }
}

/// When time alone ends an owned proxy's listing: its lease, usable-until or hard expiry.
pub(crate) fn listing_ends_at(owned: &OwnedProxy) -> UnixMillis {
    owned
        .assignment
        .lease_until_ms
        .min(owned.record.usable_until_ms)
        .min(owned.record.hard_expiry_ms)
}

/// The earliest time a proxy's cooldown entries are forgotten.
pub(crate) fn forgotten_at(entries: &[DomainCooldown]) -> UnixMillis {
    entries
        .iter()
        .map(|c| c.forget_at_ms)
        .min()
        .unwrap_or(UnixMillis::MAX)
}

/// Adds the proxies' changes to `delta` and returns the proxies listed after it, each with
/// when its listing ends (its cooldowns are compared next, by [`add_cooldowns`]). Keeps
/// `issued`'s drain epochs and the horizons of held and dropped proxies in step.
pub fn add_proxies(
    issued: &mut Issued,
    changed: Vec<(ProxyId, Holding)>,
    delta: &mut SnapshotDelta,
) -> HashMap<ProxyId, UnixMillis> {
    let mut listed = HashMap::new();
    for (id, holding) in changed {
        let was_listed = issued.content.proxy(&id).is_some();
        let was_held = issued.content.held(&id).is_some();
        match holding {
            Holding::Serving(owned) => {
                let proxy = snapshot_proxy(&owned);
                match issued.content.proxy(&id) {
                    Some(old) if *old == proxy => {}
                    Some(old) if same_but_lease(old, &proxy) => delta.leases.push(LeaseEnd {
                        id: id.clone(),
                        lease_until_ms: proxy.lease_until_ms,
                        epoch: proxy.epoch,
                    }),
                    _ => delta.upsert.push(proxy),
                }
                if was_held {
                    delta.unhold.push(id.clone());
                }
                issued.drain_epochs.remove(&id);
                listed.insert(id, listing_ends_at(&owned));
            }
            Holding::Draining(assignment) => {
                if was_listed {
                    delta.remove.push(id.clone());
                }
                let held = HeldLease {
                    id: id.clone(),
                    lease_until_ms: assignment.lease_until_ms,
                };
                if issued.content.held(&id) != Some(&held) {
                    delta.held.push(held);
                }
                match assignment.state {
                    AssignmentState::Draining { drain_epoch } => {
                        issued.drain_epochs.insert(id.clone(), drain_epoch);
                    }
                    AssignmentState::Active => {
                        issued.drain_epochs.remove(&id);
                    }
                }
                issued.horizons.set(&id, assignment.lease_until_ms);
            }
            Holding::Nothing => {
                if was_listed {
                    delta.remove.push(id.clone());
                }
                if was_held {
                    delta.unhold.push(id.clone());
                }
                issued.drain_epochs.remove(&id);
                issued.horizons.remove(&id);
            }
        }
    }
    listed
}

/// Adds the cooldown changes of the `listed` proxies (their entries as the store has them
/// now, by proxy then domain) and sets each one's horizon.
pub fn add_cooldowns(
    issued: &mut Issued,
    listed: &HashMap<ProxyId, UnixMillis>,
    cooldowns: Vec<DomainCooldown>,
    delta: &mut SnapshotDelta,
) {
    let mut by_proxy: HashMap<ProxyId, Vec<DomainCooldown>> = HashMap::new();
    for entry in cooldowns {
        by_proxy
            .entry(entry.proxy_id.clone())
            .or_default()
            .push(entry);
    }
    let mut ids: Vec<&ProxyId> = listed.keys().collect();
    ids.sort();
    for id in ids {
        let entries = by_proxy.remove(id).unwrap_or_default();
        let ends = listed[id].min(forgotten_at(&entries));
        if issued.content.cooldowns(id) != entries.as_slice() {
            delta.cooldowns.push(ProxyCooldowns {
                proxy_id: id.clone(),
                entries,
            });
        }
        issued.horizons.set(id, ends);
    }
}

/// The inputs of a snapshot that are the controller's own (its configuration) or read
/// apart from the proxies: each goes into `delta` whole when it differs from the issued.
#[derive(Debug)]
pub struct Inputs<'a> {
    pub clients: &'a Arc<Vec<GatewayClient>>,
    pub policy: CooldownPolicy,
    pub ticket_key: TicketKey,
    pub upstream_tls: &'a [UpstreamTls],
}

/// Adds the changed inputs to `delta`.
pub fn add_inputs(issued: &Issued, inputs: Inputs<'_>, delta: &mut SnapshotDelta) {
    // The same `Arc` is the same list: no compare needed.
    if !Arc::ptr_eq(inputs.clients, &issued.clients)
        && inputs.clients.as_slice() != issued.content.clients()
    {
        delta.clients = Some(inputs.clients.as_ref().clone());
    }
    if issued.content.policy() != Some(&inputs.policy) {
        delta.policy = Some(inputs.policy);
    }
    if issued.content.ticket_key().map(TicketKey::id) != Some(inputs.ticket_key.id()) {
        delta.ticket_key = Some(inputs.ticket_key);
    }
    if issued.content.upstream_tls() != inputs.upstream_tls {
        delta.upstream_tls = Some(inputs.upstream_tls.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::SnapshotContent;
    use crate::publisher::Horizons;
    use proxypool_core::control::{Advisories, WorkerSnapshot};
    use proxypool_core::{
        Assignment, Domain, Health, Protocol, ProxyRecord, ProxyStatus, SnapshotRef,
        SnapshotVersion, UpstreamId, WorkerId,
    };
    use std::collections::BTreeMap;

    fn id(i: u32) -> ProxyId {
        ProxyId::new(format!("{i:032x}")).unwrap()
    }

    fn assignment(i: u32, lease: UnixMillis, state: AssignmentState) -> Assignment {
        Assignment {
            proxy_id: id(i),
            upstream: UpstreamId::new("vendor").unwrap(),
            worker: WorkerId::new("gw-1").unwrap(),
            epoch: 1,
            assigned_at_ms: 0,
            lease_until_ms: lease,
            state,
        }
    }

    fn owned(i: u32, lease: UnixMillis, host: &str) -> OwnedProxy {
        OwnedProxy {
            record: ProxyRecord {
                id: id(i),
                protocol: Protocol::Http,
                host: host.to_owned(),
                port: 8080,
                credentials: None,
                upstream: UpstreamId::new("vendor").unwrap(),
                region: None,
                carrier: None,
                labels: BTreeMap::new(),
                status: ProxyStatus::Available,
                health: Health::default(),
                fetched_at_ms: 0,
                hard_expiry_ms: 5_000,
                usable_until_ms: 4_000,
                max_sessions: 4,
                issued_at_ms: None,
                withheld_until_ms: None,
            },
            assignment: assignment(i, lease, AssignmentState::Active),
        }
    }

    fn cooldown(i: u32, forget_at_ms: UnixMillis) -> DomainCooldown {
        DomainCooldown {
            proxy_id: id(i),
            domain: Domain::of_host("example.com").unwrap(),
            project: None,
            until_ms: forget_at_ms / 2,
            strikes: 1,
            forget_at_ms,
        }
    }

    /// The content of a whole read listing `owned`, holding `held`.
    fn content(
        owned: &[OwnedProxy],
        held: &[(u32, UnixMillis)],
        cooldowns: Vec<DomainCooldown>,
    ) -> SnapshotContent {
        let snapshot = WorkerSnapshot {
            worker: WorkerId::new("gw-1").unwrap(),
            session_id: "s1".to_owned(),
            reference: SnapshotRef {
                version: 1,
                epoch: 1,
                checksum: String::new(),
            },
            generated_at_ms: 0,
            max_staleness_ms: 0,
            proxies: owned.iter().map(snapshot_proxy).collect(),
            clients: Vec::new(),
            held: held
                .iter()
                .map(|(i, lease)| HeldLease {
                    id: id(*i),
                    lease_until_ms: *lease,
                })
                .collect(),
            advisories: Advisories {
                policy: None,
                cooldowns,
                session_feedback: Vec::new(),
            },
            ticket_key: None,
            upstream_tls: Vec::new(),
        };
        SnapshotContent::of(&snapshot).unwrap()
    }

    #[test]
    fn store_changes_become_the_delta_a_whole_read_would_give() {
        let before = [owned(1, 500, "a"), owned(2, 500, "b"), owned(3, 500, "c")];
        let mut issued = Issued {
            content: content(&before, &[(4, 700)], vec![cooldown(1, 3_000)]),
            counter: 4,
            feedback: 0,
            clients: Arc::new(Vec::new()),
            horizons: Horizons::default(),
            drain_epochs: HashMap::from([(id(4), 2)]),
            read_whole_at_ms: 0,
        };
        let changed = vec![
            // Renewed: a lease move.
            (id(1), Holding::Serving(Box::new(owned(1, 900, "a")))),
            // Changed beyond its lease: replaced whole.
            (id(2), Holding::Serving(Box::new(owned(2, 500, "b2")))),
            // Draining now: removed, held.
            (
                id(3),
                Holding::Draining(assignment(
                    3,
                    800,
                    AssignmentState::Draining { drain_epoch: 7 },
                )),
            ),
            // Released: no longer held.
            (id(4), Holding::Nothing),
            // New.
            (id(5), Holding::Serving(Box::new(owned(5, 600, "e")))),
        ];
        let base = issued.content.reference().clone();
        let mut delta = SnapshotDelta::empty(WorkerId::new("gw-1").unwrap(), "s1".into(), base);
        let listed = add_proxies(&mut issued, changed, &mut delta);
        assert_eq!(delta.leases.len(), 1);
        assert_eq!(delta.leases[0].id, id(1));
        let upserted: Vec<_> = delta.upsert.iter().map(|p| p.id.clone()).collect();
        assert_eq!(upserted, vec![id(2), id(5)]);
        assert_eq!(delta.remove, vec![id(3)]);
        assert_eq!(
            delta.held,
            vec![HeldLease {
                id: id(3),
                lease_until_ms: 800
            }]
        );
        assert_eq!(delta.unhold, vec![id(4)]);
        assert_eq!(issued.drain_epochs, HashMap::from([(id(3), 7)]));
        assert_eq!(issued.needed_epoch(), 7);
        let mut keys: Vec<_> = listed.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, vec![id(1), id(2), id(5)]);
        assert_eq!(listed[&id(5)], 600, "the lease ends first");

        // Proxy 1's cooldown was forgotten, proxy 2 has a new one.
        add_cooldowns(&mut issued, &listed, vec![cooldown(2, 450)], &mut delta);
        let groups: Vec<_> = delta
            .cooldowns
            .iter()
            .map(|g| (g.proxy_id.clone(), g.entries.len()))
            .collect();
        assert_eq!(groups, vec![(id(1), 0), (id(2), 1)]);
        assert!(issued.horizons.due(449).is_empty());
        assert_eq!(
            issued.horizons.due(450),
            vec![id(2)],
            "its cooldown is forgotten before its lease ends"
        );

        let counters = SnapshotVersion {
            worker: 9,
            feedback: 0,
        };
        let next = issued
            .advance(&delta, counters, Arc::new(Vec::new()), 10)
            .unwrap();
        assert_eq!(next.counter, 9);
        let after = [owned(1, 900, "a"), owned(2, 500, "b2"), owned(5, 600, "e")];
        let whole = content(&after, &[(3, 800)], vec![cooldown(2, 450)]);
        assert_eq!(
            next.content.checksum(),
            whole.checksum(),
            "the same content as a whole read"
        );
    }

    #[test]
    fn a_record_s_geo_labels_are_listed_and_a_changed_one_is_an_upsert() {
        let labelled = |city: &str| {
            let mut owned = owned(1, 500, "a");
            owned.record.labels = BTreeMap::from([
                ("city".to_owned(), city.to_owned()),
                ("asn".to_owned(), "AS7922".to_owned()),
                ("zip".to_owned(), "10001".to_owned()),
            ]);
            owned
        };
        let listed = snapshot_proxy(&labelled("new_york"));
        assert_eq!(listed.geo.city.as_deref(), Some("new_york"));
        assert_eq!(listed.geo.asn.as_deref(), Some("7922"), "canonical");
        assert_eq!(listed.geo.state, None);
        let mut issued = Issued {
            content: content(&[labelled("new_york")], &[], Vec::new()),
            counter: 4,
            feedback: 0,
            clients: Arc::new(Vec::new()),
            horizons: Horizons::default(),
            drain_epochs: HashMap::new(),
            read_whole_at_ms: 0,
        };
        let mut delta = SnapshotDelta::empty(
            WorkerId::new("gw-1").unwrap(),
            "s1".into(),
            issued.content.reference().clone(),
        );
        // Renewed and moved to another city: more than a lease end.
        let mut moved = labelled("boston");
        moved.assignment.lease_until_ms = 900;
        add_proxies(
            &mut issued,
            vec![(id(1), Holding::Serving(Box::new(moved)))],
            &mut delta,
        );
        assert!(delta.leases.is_empty(), "{delta:?}");
        assert_eq!(delta.upsert.len(), 1);
        assert_eq!(delta.upsert[0].geo.city.as_deref(), Some("boston"));
    }

    #[test]
    fn a_result_past_the_limit_is_not_served() {
        let issued = Issued {
            content: content(&[owned(1, 500, "a")], &[], Vec::new()),
            counter: 4,
            feedback: 0,
            clients: Arc::new(Vec::new()),
            horizons: Horizons::default(),
            drain_epochs: HashMap::new(),
            read_whole_at_ms: 0,
        };
        let mut delta = SnapshotDelta::empty(
            WorkerId::new("gw-1").unwrap(),
            "s1".into(),
            issued.content.reference().clone(),
        );
        delta.upsert.push(snapshot_proxy(&owned(2, 500, "b")));
        let counters = SnapshotVersion::default();
        assert!(
            issued
                .advance(&delta, counters, Arc::new(Vec::new()), 1)
                .is_none()
        );
    }
}
