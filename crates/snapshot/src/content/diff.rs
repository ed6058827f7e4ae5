//! [`SnapshotContent::delta_to`]: the delta between two contents of one session, which
//! the controller sends when it read the worker's snapshot whole.

use super::{SnapshotContent, same_but_lease};
use crate::delta::{LeaseEnd, ProxyCooldowns, SnapshotDelta};
use proxypool_core::WorkerId;
use proxypool_core::ticket::TicketKey;

impl SnapshotContent {
    /// The delta that turns this content into `next` (same session), from this content's
    /// reference to `next`'s; parts equal in both are left out. A listed proxy whose
    /// every field but its lease end and epoch is unchanged travels as a [`LeaseEnd`].
    pub fn delta_to(&self, worker: &WorkerId, next: &SnapshotContent) -> SnapshotDelta {
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
                    delta.leases.push(LeaseEnd {
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
                delta.cooldowns.push(ProxyCooldowns {
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
}
