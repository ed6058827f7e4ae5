//! The content of a worker snapshot as a set of items, with a checksum that a delta can
//! update in time proportional to the delta.
//!
//! The checksum is a sum (modulo 2^128) of one digest per item: each listed proxy, held
//! lease, cooldown entry, client, session feedback and upstream TLS setting, the cooldown
//! policy and the ticket key's id, each the first 16 bytes of SHA-256 over a kind tag and
//! the item's JSON. Order does not matter, so the controller and the gateway agree on the
//! checksum of the same content however each holds it, and replacing one item costs two
//! digests, not a pass over the snapshot. (It detects accidents: a lost or misapplied
//! delta, two controllers' different content under one version. The parties are
//! authenticated; it is not meant to resist a forger.)
//!
//! [`SnapshotContent`] is that content held by proxy id: the controller keeps the content
//! it last issued to each session and turns store changes into a [`SnapshotDelta`]; the
//! gateway keeps what it applied and applies the next delta with the same
//! [`SnapshotContent::apply`], which checks the delta whole before it changes anything.

use crate::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use crate::cooldown::{CooldownPolicy, DomainCooldown, SessionFeedback};
use crate::ids::ProxyId;
use crate::runtime::SnapshotRef;
use crate::snapshot_delta::SnapshotDelta;
use crate::ticket::TicketKey;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};

/// Why content could not be built or a delta applied (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("the snapshot lists proxy {0} twice")]
    DuplicateProxy(ProxyId),
    #[error("the snapshot lists client {0} twice")]
    DuplicateClient(String),
    #[error("the delta applies to version {base} of session {session}, not to the held {held}")]
    WrongBase {
        session: String,
        base: u64,
        held: String,
    },
    #[error("the delta changes proxy {0}, which is not listed")]
    NotListed(ProxyId),
    #[error("the delta names proxy {0} twice")]
    Repeated(ProxyId),
    #[error("the content after the delta has checksum {got}, not the announced {expected}")]
    Checksum { got: String, expected: String },
}

/// Item kinds, one tag byte each, so equal JSON of two kinds never digests alike.
mod tag {
    pub(super) const PROXY: u8 = b'p';
    pub(super) const HELD: u8 = b'h';
    pub(super) const COOLDOWN: u8 = b'c';
    pub(super) const CLIENT: u8 = b'g';
    pub(super) const FEEDBACK: u8 = b'f';
    pub(super) const POLICY: u8 = b'P';
    pub(super) const TICKET_KEY: u8 = b'k';
    pub(super) const UPSTREAM_TLS: u8 = b't';
}

/// The digest of one item.
fn item_digest<T: Serialize + ?Sized>(kind: u8, item: &T) -> u128 {
    let json = serde_json::to_vec(item).expect("snapshot items serialize");
    let mut hasher = Sha256::new();
    hasher.update([kind]);
    hasher.update(&json);
    let full = hasher.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&full[..16]);
    u128::from_le_bytes(first)
}

fn sum_of<T: Serialize>(kind: u8, items: &[T]) -> u128 {
    items
        .iter()
        .fold(0u128, |sum, item| sum.wrapping_add(item_digest(kind, item)))
}

fn ticket_digest(key: Option<&TicketKey>) -> u128 {
    key.map_or(0, |k| item_digest(tag::TICKET_KEY, &k.id()))
}

fn policy_digest(policy: Option<&CooldownPolicy>) -> u128 {
    policy.map_or(0, |p| item_digest(tag::POLICY, p))
}

/// `sum` with the item digested `old` replaced by one digested `new`.
fn swap(sum: u128, old: u128, new: u128) -> u128 {
    sum.wrapping_sub(old).wrapping_add(new)
}

/// The checksum text of a digest sum.
fn checksum_text(sum: u128) -> String {
    format!("{sum:032x}")
}

/// The checksum of a whole snapshot's content given as lists (see the module doc).
pub fn content_checksum(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
    advisories: &Advisories,
    ticket_key: Option<&TicketKey>,
    upstream_tls: &[UpstreamTls],
) -> String {
    let sum = sum_of(tag::PROXY, proxies)
        .wrapping_add(sum_of(tag::HELD, held))
        .wrapping_add(sum_of(tag::CLIENT, clients))
        .wrapping_add(sum_of(tag::COOLDOWN, &advisories.cooldowns))
        .wrapping_add(policy_digest(advisories.policy.as_ref()))
        .wrapping_add(sum_of(tag::FEEDBACK, &advisories.session_feedback))
        .wrapping_add(ticket_digest(ticket_key))
        .wrapping_add(sum_of(tag::UPSTREAM_TLS, upstream_tls));
    checksum_text(sum)
}

/// The checksum of a snapshot's content (proxies and clients, every field of each,
/// including a client's `allowed_ports`), so a worker and the controller can agree on
/// exactly what was applied.
pub fn snapshot_checksum(proxies: &[SnapshotProxy], clients: &[GatewayClient]) -> String {
    snapshot_checksum_with_held(proxies, &[], clients)
}

/// The checksum of a snapshot that also holds draining leases; with none it is
/// [`snapshot_checksum`], so snapshots without drains keep the checksum they always had.
pub fn snapshot_checksum_with_held(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
) -> String {
    snapshot_checksum_of(proxies, held, clients, &Advisories::default())
}

/// The checksum of a snapshot's content without a ticket key (see [`snapshot_checksum_keyed`]).
pub fn snapshot_checksum_of(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
    advisories: &Advisories,
) -> String {
    snapshot_checksum_keyed(proxies, held, clients, advisories, None)
}

/// The checksum of a whole snapshot's content (`crate::snapshot_content`: a sum of one
/// digest per item, so a delta can update it). The ticket key counts by its
/// [`TicketKey::id`], never the key itself.
pub fn snapshot_checksum_keyed(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
    advisories: &Advisories,
    ticket_key: Option<&TicketKey>,
) -> String {
    snapshot_checksum_full(proxies, held, clients, advisories, ticket_key, &[])
}

/// [`snapshot_checksum_keyed`] with the upstreams' TLS settings, which count only when
/// some upstream has any.
pub fn snapshot_checksum_full(
    proxies: &[SnapshotProxy],
    held: &[HeldLease],
    clients: &[GatewayClient],
    advisories: &Advisories,
    ticket_key: Option<&TicketKey>,
    upstream_tls: &[UpstreamTls],
) -> String {
    content_checksum(proxies, held, clients, advisories, ticket_key, upstream_tls)
}

/// An item with its digest, so replacing it needs no second serialization of the old one.
#[derive(Debug, Clone, PartialEq)]
struct Digested<T> {
    item: T,
    digest: u128,
}

/// A snapshot's content by proxy id, with its running digest sum.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotContent {
    reference: SnapshotRef,
    session_id: String,
    proxies: BTreeMap<ProxyId, Digested<SnapshotProxy>>,
    held: BTreeMap<ProxyId, Digested<HeldLease>>,
    /// Per proxy: its entries (by domain) and their digest sum.
    cooldowns: BTreeMap<ProxyId, Digested<Vec<DomainCooldown>>>,
    clients: Digested<Vec<GatewayClient>>,
    policy: Option<CooldownPolicy>,
    session_feedback: Digested<Vec<SessionFeedback>>,
    ticket_key: Option<TicketKey>,
    upstream_tls: Digested<Vec<UpstreamTls>>,
    sum: u128,
}

impl SnapshotContent {
    /// The content of a whole snapshot; its checksum is not compared here (see
    /// [`checksum`](Self::checksum)).
    pub fn of(snapshot: &WorkerSnapshot) -> Result<Self, ContentError> {
        let mut seen = HashSet::with_capacity(snapshot.clients.len());
        for client in &snapshot.clients {
            if !seen.insert(&client.id) {
                return Err(ContentError::DuplicateClient(client.id.to_string()));
            }
        }
        let mut proxies = BTreeMap::new();
        for proxy in &snapshot.proxies {
            let digest = item_digest(tag::PROXY, proxy);
            let item = proxy.clone();
            if proxies
                .insert(proxy.id.clone(), Digested { item, digest })
                .is_some()
            {
                return Err(ContentError::DuplicateProxy(proxy.id.clone()));
            }
        }
        let held = snapshot
            .held
            .iter()
            .map(|h| {
                let digest = item_digest(tag::HELD, h);
                (
                    h.id.clone(),
                    Digested {
                        item: h.clone(),
                        digest,
                    },
                )
            })
            .collect();
        let mut grouped: BTreeMap<ProxyId, Vec<DomainCooldown>> = BTreeMap::new();
        for entry in &snapshot.advisories.cooldowns {
            grouped
                .entry(entry.proxy_id.clone())
                .or_default()
                .push(entry.clone());
        }
        let cooldowns = grouped
            .into_iter()
            .map(|(id, entries)| (id, digested_list(tag::COOLDOWN, entries)))
            .collect();
        let mut content = SnapshotContent {
            reference: snapshot.reference.clone(),
            session_id: snapshot.session_id.clone(),
            proxies,
            held,
            cooldowns,
            clients: digested_list(tag::CLIENT, snapshot.clients.clone()),
            policy: snapshot.advisories.policy,
            session_feedback: digested_list(
                tag::FEEDBACK,
                snapshot.advisories.session_feedback.clone(),
            ),
            ticket_key: snapshot.ticket_key.clone(),
            upstream_tls: digested_list(tag::UPSTREAM_TLS, snapshot.upstream_tls.clone()),
            sum: 0,
        };
        content.sum = content.full_sum();
        Ok(content)
    }

    fn full_sum(&self) -> u128 {
        let listed = self
            .proxies
            .values()
            .map(|p| p.digest)
            .chain(self.held.values().map(|h| h.digest))
            .chain(self.cooldowns.values().map(|c| c.digest))
            .fold(0u128, u128::wrapping_add);
        listed
            .wrapping_add(self.clients.digest)
            .wrapping_add(policy_digest(self.policy.as_ref()))
            .wrapping_add(self.session_feedback.digest)
            .wrapping_add(ticket_digest(self.ticket_key.as_ref()))
            .wrapping_add(self.upstream_tls.digest)
    }

    /// The checksum of the content (what a snapshot's reference must carry).
    pub fn checksum(&self) -> String {
        checksum_text(self.sum)
    }

    /// The snapshot the content is at.
    pub fn reference(&self) -> &SnapshotRef {
        &self.reference
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Records that the content is now the snapshot `reference` (its checksum is this
    /// content's): what the controller does after issuing it.
    pub fn set_reference(&mut self, reference: SnapshotRef) {
        self.reference = reference;
    }

    pub fn proxy_count(&self) -> usize {
        self.proxies.len()
    }

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    pub fn proxy(&self, id: &ProxyId) -> Option<&SnapshotProxy> {
        self.proxies.get(id).map(|p| &p.item)
    }

    pub fn held(&self, id: &ProxyId) -> Option<&HeldLease> {
        self.held.get(id).map(|h| &h.item)
    }

    /// A listed proxy's cooldown entries (empty when it has none).
    pub fn cooldowns(&self, id: &ProxyId) -> &[DomainCooldown] {
        self.cooldowns.get(id).map_or(&[], |c| &c.item)
    }

    pub fn proxies(&self) -> impl Iterator<Item = &SnapshotProxy> {
        self.proxies.values().map(|p| &p.item)
    }

    pub fn held_leases(&self) -> impl Iterator<Item = &HeldLease> {
        self.held.values().map(|h| &h.item)
    }

    pub fn clients(&self) -> &[GatewayClient] {
        &self.clients.item
    }

    pub fn policy(&self) -> Option<&CooldownPolicy> {
        self.policy.as_ref()
    }

    pub fn session_feedback(&self) -> &[SessionFeedback] {
        &self.session_feedback.item
    }

    pub fn ticket_key(&self) -> Option<&TicketKey> {
        self.ticket_key.as_ref()
    }

    pub fn upstream_tls(&self) -> &[UpstreamTls] {
        &self.upstream_tls.item
    }

    /// Every cooldown entry, by proxy id then domain (a snapshot's `advisories.cooldowns`).
    pub fn all_cooldowns(&self) -> impl Iterator<Item = &DomainCooldown> {
        self.cooldowns.values().flat_map(|c| c.item.iter())
    }

    /// The whole snapshot this content is, for `worker`.
    pub fn to_snapshot(
        &self,
        worker: &crate::ids::WorkerId,
        generated_at_ms: crate::time::UnixMillis,
        max_staleness_ms: u64,
    ) -> WorkerSnapshot {
        WorkerSnapshot {
            worker: worker.clone(),
            session_id: self.session_id.clone(),
            reference: self.reference.clone(),
            generated_at_ms,
            max_staleness_ms,
            proxies: self.proxies().cloned().collect(),
            clients: self.clients().to_vec(),
            held: self.held_leases().cloned().collect(),
            advisories: Advisories {
                policy: self.policy,
                cooldowns: self.all_cooldowns().cloned().collect(),
                session_feedback: self.session_feedback().to_vec(),
            },
            ticket_key: self.ticket_key.clone(),
            upstream_tls: self.upstream_tls().to_vec(),
        }
    }

    /// The delta that turns this content into `next` (same session), from this content's
    /// reference to `next`'s; parts equal in both are left out. A listed proxy whose
    /// every field but its lease end and epoch is unchanged travels as a [`LeaseEnd`].
    ///
    /// [`LeaseEnd`]: crate::snapshot_delta::LeaseEnd
    pub fn delta_to(&self, worker: &crate::ids::WorkerId, next: &SnapshotContent) -> SnapshotDelta {
        let mut delta = SnapshotDelta::empty(
            worker.clone(),
            next.session_id.clone(),
            self.reference.clone(),
        );
        delta.reference = next.reference.clone();
        for (id, proxy) in &next.proxies {
            match self.proxies.get(id) {
                Some(old) if old.digest == proxy.digest => {}
                Some(old) if same_but_lease(&old.item, &proxy.item) => {
                    delta.leases.push(crate::snapshot_delta::LeaseEnd {
                        id: id.clone(),
                        lease_until_ms: proxy.item.lease_until_ms,
                        epoch: proxy.item.epoch,
                    });
                }
                _ => delta.upsert.push(proxy.item.clone()),
            }
        }
        delta.remove = self
            .proxies
            .keys()
            .filter(|id| !next.proxies.contains_key(*id))
            .cloned()
            .collect();
        for (id, held) in &next.held {
            if self
                .held
                .get(id)
                .is_none_or(|old| old.digest != held.digest)
            {
                delta.held.push(held.item.clone());
            }
        }
        delta.unhold = self
            .held
            .keys()
            .filter(|id| !next.held.contains_key(*id))
            .cloned()
            .collect();
        for id in next.proxies.keys() {
            let after = next.cooldowns.get(id).map_or(0, |c| c.digest);
            // A removed proxy's entries went with it; a listed one keeps its own.
            let before = if self.proxies.contains_key(id) {
                self.cooldowns.get(id).map_or(0, |c| c.digest)
            } else {
                0
            };
            if after != before {
                delta.cooldowns.push(crate::snapshot_delta::ProxyCooldowns {
                    proxy_id: id.clone(),
                    entries: next.cooldowns(id).to_vec(),
                });
            }
        }
        if self.clients.digest != next.clients.digest {
            delta.clients = Some(next.clients.item.clone());
        }
        if self.policy != next.policy {
            delta.policy = next.policy;
        }
        if self.session_feedback.digest != next.session_feedback.digest {
            delta.session_feedback = Some(next.session_feedback.item.clone());
        }
        if self.ticket_key.as_ref().map(TicketKey::id)
            != next.ticket_key.as_ref().map(TicketKey::id)
        {
            delta.ticket_key = next.ticket_key.clone();
        }
        if self.upstream_tls.digest != next.upstream_tls.digest {
            delta.upstream_tls = Some(next.upstream_tls.item.clone());
        }
        delta
    }

    /// Applies `delta` when it is made for this content and leads to its announced
    /// checksum; otherwise changes nothing.
    pub fn apply(&mut self, delta: &SnapshotDelta) -> Result<(), ContentError> {
        if delta.session_id != self.session_id || delta.base != self.reference {
            return Err(ContentError::WrongBase {
                session: delta.session_id.clone(),
                base: delta.base.version,
                held: format!("{} of session {}", self.reference.version, self.session_id),
            });
        }
        let plan = self.plan(delta)?;
        let got = checksum_text(plan.sum);
        if got != delta.reference.checksum {
            return Err(ContentError::Checksum {
                got,
                expected: delta.reference.checksum.clone(),
            });
        }
        self.commit(delta, plan);
        self.reference = delta.reference.clone();
        Ok(())
    }

    /// Applies `delta` without comparing checksums and returns the checksum the content
    /// has after it: how the controller makes the content its delta describes. The base
    /// must still be this content's.
    pub fn apply_unchecked(&mut self, delta: &SnapshotDelta) -> Result<String, ContentError> {
        let plan = self.plan(delta)?;
        let sum = plan.sum;
        self.commit(delta, plan);
        Ok(checksum_text(sum))
    }

    /// Checks the delta against the content and computes every new digest and the sum
    /// after it, changing nothing.
    fn plan(&self, delta: &SnapshotDelta) -> Result<Plan, ContentError> {
        let mut sum = self.sum;
        // Each id at most once among upserts, lease moves and removals.
        let mut named: HashSet<&ProxyId> = HashSet::new();
        let mut plan = Plan::default();
        for proxy in &delta.upsert {
            if !named.insert(&proxy.id) {
                return Err(ContentError::Repeated(proxy.id.clone()));
            }
            let digest = item_digest(tag::PROXY, proxy);
            if let Some(old) = self.proxies.get(&proxy.id) {
                sum = sum.wrapping_sub(old.digest);
            }
            sum = sum.wrapping_add(digest);
            plan.upsert.push(digest);
        }
        for lease in &delta.leases {
            if !named.insert(&lease.id) {
                return Err(ContentError::Repeated(lease.id.clone()));
            }
            let old = self
                .proxies
                .get(&lease.id)
                .ok_or_else(|| ContentError::NotListed(lease.id.clone()))?;
            let moved = SnapshotProxy {
                lease_until_ms: lease.lease_until_ms,
                epoch: lease.epoch,
                ..old.item.clone()
            };
            let digest = item_digest(tag::PROXY, &moved);
            sum = sum.wrapping_sub(old.digest).wrapping_add(digest);
            plan.leases.push(digest);
        }
        let mut dropped_cooldowns: HashSet<&ProxyId> = HashSet::new();
        for id in &delta.remove {
            if !named.insert(id) {
                return Err(ContentError::Repeated(id.clone()));
            }
            let old = self
                .proxies
                .get(id)
                .ok_or_else(|| ContentError::NotListed(id.clone()))?;
            sum = sum.wrapping_sub(old.digest);
            if let Some(c) = self.cooldowns.get(id) {
                sum = sum.wrapping_sub(c.digest);
                dropped_cooldowns.insert(id);
            }
        }
        let mut held_named: HashSet<&ProxyId> = HashSet::new();
        for held in &delta.held {
            if !held_named.insert(&held.id) {
                return Err(ContentError::Repeated(held.id.clone()));
            }
            let digest = item_digest(tag::HELD, held);
            if let Some(old) = self.held.get(&held.id) {
                sum = sum.wrapping_sub(old.digest);
            }
            sum = sum.wrapping_add(digest);
            plan.held.push(digest);
        }
        for id in &delta.unhold {
            if !held_named.insert(id) {
                return Err(ContentError::Repeated(id.clone()));
            }
            let old = self
                .held
                .get(id)
                .ok_or_else(|| ContentError::NotListed(id.clone()))?;
            sum = sum.wrapping_sub(old.digest);
        }
        let mut cooldown_named: HashSet<&ProxyId> = HashSet::new();
        for group in &delta.cooldowns {
            if !cooldown_named.insert(&group.proxy_id) {
                return Err(ContentError::Repeated(group.proxy_id.clone()));
            }
            let listed_after = delta.upsert.iter().any(|p| p.id == group.proxy_id)
                || (self.proxies.contains_key(&group.proxy_id)
                    && !delta.remove.contains(&group.proxy_id));
            if !listed_after {
                return Err(ContentError::NotListed(group.proxy_id.clone()));
            }
            if let Some(old) = self.cooldowns.get(&group.proxy_id)
                && !dropped_cooldowns.contains(&group.proxy_id)
            {
                sum = sum.wrapping_sub(old.digest);
            }
            let digest = sum_of(tag::COOLDOWN, &group.entries);
            sum = sum.wrapping_add(digest);
            plan.cooldowns.push(digest);
        }
        if let Some(clients) = &delta.clients {
            let mut seen = HashSet::with_capacity(clients.len());
            for client in clients {
                if !seen.insert(&client.id) {
                    return Err(ContentError::DuplicateClient(client.id.to_string()));
                }
            }
            let digest = sum_of(tag::CLIENT, clients);
            sum = swap(sum, self.clients.digest, digest);
            plan.clients = digest;
        }
        if let Some(policy) = &delta.policy {
            sum = swap(
                sum,
                policy_digest(self.policy.as_ref()),
                policy_digest(Some(policy)),
            );
        }
        if let Some(feedback) = &delta.session_feedback {
            let digest = sum_of(tag::FEEDBACK, feedback);
            sum = swap(sum, self.session_feedback.digest, digest);
            plan.session_feedback = digest;
        }
        if let Some(key) = &delta.ticket_key {
            sum = swap(
                sum,
                ticket_digest(self.ticket_key.as_ref()),
                ticket_digest(Some(key)),
            );
        }
        if let Some(tls) = &delta.upstream_tls {
            let digest = sum_of(tag::UPSTREAM_TLS, tls);
            sum = swap(sum, self.upstream_tls.digest, digest);
            plan.upstream_tls = digest;
        }
        plan.sum = sum;
        Ok(plan)
    }

    /// Makes the planned changes (cannot fail).
    fn commit(&mut self, delta: &SnapshotDelta, plan: Plan) {
        for (proxy, digest) in delta.upsert.iter().zip(plan.upsert) {
            self.proxies.insert(
                proxy.id.clone(),
                Digested {
                    item: proxy.clone(),
                    digest,
                },
            );
        }
        for (lease, digest) in delta.leases.iter().zip(plan.leases) {
            if let Some(listed) = self.proxies.get_mut(&lease.id) {
                listed.item.lease_until_ms = lease.lease_until_ms;
                listed.item.epoch = lease.epoch;
                listed.digest = digest;
            }
        }
        for id in &delta.remove {
            self.proxies.remove(id);
            self.cooldowns.remove(id);
        }
        for (held, digest) in delta.held.iter().zip(plan.held) {
            self.held.insert(
                held.id.clone(),
                Digested {
                    item: held.clone(),
                    digest,
                },
            );
        }
        for id in &delta.unhold {
            self.held.remove(id);
        }
        for (group, digest) in delta.cooldowns.iter().zip(plan.cooldowns) {
            if group.entries.is_empty() {
                self.cooldowns.remove(&group.proxy_id);
            } else {
                self.cooldowns.insert(
                    group.proxy_id.clone(),
                    Digested {
                        item: group.entries.clone(),
                        digest,
                    },
                );
            }
        }
        if let Some(clients) = &delta.clients {
            self.clients = Digested {
                item: clients.clone(),
                digest: plan.clients,
            };
        }
        if let Some(policy) = delta.policy {
            self.policy = Some(policy);
        }
        if let Some(feedback) = &delta.session_feedback {
            self.session_feedback = Digested {
                item: feedback.clone(),
                digest: plan.session_feedback,
            };
        }
        if let Some(key) = &delta.ticket_key {
            self.ticket_key = Some(key.clone());
        }
        if let Some(tls) = &delta.upstream_tls {
            self.upstream_tls = Digested {
                item: tls.clone(),
                digest: plan.upstream_tls,
            };
        }
        self.sum = plan.sum;
    }
}

/// The digests a checked delta computed, in the delta's order.
#[derive(Debug, Default)]
struct Plan {
    upsert: Vec<u128>,
    leases: Vec<u128>,
    held: Vec<u128>,
    cooldowns: Vec<u128>,
    clients: u128,
    session_feedback: u128,
    upstream_tls: u128,
    sum: u128,
}

/// Whether two listings of one proxy differ in nothing but the lease (end and epoch):
/// such a change travels as a [`LeaseEnd`](crate::snapshot_delta::LeaseEnd).
pub fn same_but_lease(old: &SnapshotProxy, new: &SnapshotProxy) -> bool {
    let moved = SnapshotProxy {
        lease_until_ms: new.lease_until_ms,
        epoch: new.epoch,
        ..old.clone()
    };
    moved == *new
}

fn digested_list<T: Serialize>(kind: u8, items: Vec<T>) -> Digested<Vec<T>> {
    let digest = sum_of(kind, &items);
    Digested {
        item: items,
        digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ClientRotation;
    use crate::ids::ClientId;
    use crate::port_set::PortSet;
    use crate::secret_hash::SecretHash;

    fn client() -> GatewayClient {
        GatewayClient {
            id: ClientId::new("acme").unwrap(),
            project: "acme".into(),
            password_hash: SecretHash::derive("pw", "salt").unwrap(),
            allowed_upstreams: Vec::new(),
            allowed_regions: Vec::new(),
            ip_allowlist: Vec::new(),
            rate_limit: None,
            max_connections: 8,
            allowed_ports: None,
            ban_statuses: None,
            rotation: None,
        }
    }

    #[test]
    fn the_checksum_covers_a_client_s_port_override() {
        let plain = snapshot_checksum(&[], &[client()]);
        let ports = GatewayClient {
            allowed_ports: Some(PortSet::only([443])),
            ..client()
        };
        let with_ports = snapshot_checksum(&[], std::slice::from_ref(&ports));
        assert_ne!(plain, with_ports);
        let other = GatewayClient {
            allowed_ports: Some(PortSet::only([443, 8443])),
            ..client()
        };
        assert_ne!(with_ports, snapshot_checksum(&[], &[other]));
        // Without an override the JSON (and so the checksum) is what it was before the
        // field existed, and a client sent without it reads back as `None`.
        let json = serde_json::to_value(client()).unwrap();
        assert!(json.get("allowed_ports").is_none());
        let back: GatewayClient = serde_json::from_value(json).unwrap();
        assert_eq!(back.allowed_ports, None);
        let back: GatewayClient =
            serde_json::from_value(serde_json::to_value(&ports).unwrap()).unwrap();
        assert_eq!(back, ports);
    }

    #[test]
    fn a_client_s_rotation_is_in_the_checksum_only_when_set() {
        let plain = client();
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("rotation").is_none(), "{json}");
        let cases = [
            (ClientRotation::PerRequest, serde_json::json!("per_request")),
            (ClientRotation::LeastUsed, serde_json::json!("least_used")),
            (
                ClientRotation::EveryRequests(5),
                serde_json::json!({ "every_requests": 5 }),
            ),
            (
                ClientRotation::EveryMs(30_000),
                serde_json::json!({ "every_ms": 30_000 }),
            ),
        ];
        let mut checksums = vec![snapshot_checksum(&[], std::slice::from_ref(&plain))];
        for (rotation, expected) in cases {
            let with = GatewayClient {
                rotation: Some(rotation),
                ..client()
            };
            let json = serde_json::to_value(&with).unwrap();
            assert_eq!(json["rotation"], expected);
            let back: GatewayClient = serde_json::from_value(json).unwrap();
            assert_eq!(back, with);
            checksums.push(snapshot_checksum(&[], &[with]));
        }
        let distinct: std::collections::HashSet<_> = checksums.iter().collect();
        assert_eq!(
            distinct.len(),
            checksums.len(),
            "every rotation changes the checksum"
        );
    }
}
