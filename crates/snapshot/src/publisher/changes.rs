//! Turns what the store says changed for a worker into a delta against the content last
//! issued to it: each changed proxy read as it is now ([`Holding`]) becomes an upsert, a
//! lease move, a removal, a held lease or nothing, and its cooldowns are compared with the
//! issued ones; the controller's own inputs (clients, policy, ticket key, upstream TLS) are
//! compared with what the content holds of them. Pure: the publisher's driver does the reads.

use super::Issued;
use crate::content::same_but_lease;
use crate::delta::{LeaseEnd, ProxyCooldowns, SnapshotDelta};
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
