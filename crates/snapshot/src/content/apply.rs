//! [`SnapshotContent::apply`]: a delta checked whole (its base, every id it names, the
//! checksum it leads to) before anything changes, then committed; the gateway and the
//! controller apply deltas with the same code.

use super::{ContentError, Digested, SnapshotContent};
use crate::checksum::{
    checksum_text, item_digest, policy_digest, sum_of, swap, tag, ticket_digest,
};
use crate::delta::SnapshotDelta;
use proxypool_core::ProxyId;
use proxypool_core::control::SnapshotProxy;
use std::collections::HashSet;

impl SnapshotContent {
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
