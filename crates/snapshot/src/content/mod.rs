//! [`SnapshotContent`]: a worker snapshot's content held by proxy id, each item with its
//! digest, and the running checksum (`crate::checksum`). The controller keeps the content
//! it last issued to each session and turns store changes into a [`SnapshotDelta`]; the
//! gateway keeps what it applied and applies the next delta with the same
//! [`SnapshotContent::apply`] (`apply.rs`), which checks the delta whole before it changes
//! anything. `diff.rs` makes the delta between two contents.
//!
//! [`SnapshotDelta`]: crate::SnapshotDelta

mod apply;
mod diff;

use crate::checksum::{checksum_text, item_digest, policy_digest, sum_of, tag, ticket_digest};
use proxypool_core::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use proxypool_core::cooldown::{CooldownPolicy, DomainCooldown, SessionFeedback};
use proxypool_core::ticket::TicketKey;
use proxypool_core::{ProxyId, SnapshotRef, UnixMillis, WorkerId};
use serde::Serialize;
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
        worker: &WorkerId,
        generated_at_ms: UnixMillis,
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
}

/// Whether two listings of one proxy differ in nothing but the lease (end and epoch):
/// such a change travels as a [`LeaseEnd`](crate::LeaseEnd).
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
