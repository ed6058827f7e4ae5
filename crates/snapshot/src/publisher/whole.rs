//! A whole read of a worker's snapshot (its owned and draining leases, the advisories, the
//! ticket key and the local inputs) turned into the content to issue, with when time alone
//! ends each part of it.

use super::changes::{forgotten_at, listing_ends_at, snapshot_proxy};
use super::{Horizons, Issued};
use crate::content::{ContentError, SnapshotContent};
use proxypool_core::control::{
    Advisories, GatewayClient, HeldLease, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use proxypool_core::{
    Assignment, AssignmentState, OwnedProxy, ProxyId, SnapshotRef, SnapshotVersion, TicketKey,
    UnixMillis, WorkerId,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Everything one whole read gathered, in the order it was read: the counters first, the
/// epoch before the content (a snapshot at epoch E never lists a proxy whose drain moved
/// the epoch to E or less).
#[derive(Debug)]
pub struct WholeRead<'a> {
    pub worker: &'a WorkerId,
    pub session_id: &'a str,
    pub counters: SnapshotVersion,
    pub epoch: u64,
    pub now: UnixMillis,
    pub owned: &'a [OwnedProxy],
    pub draining: &'a [Assignment],
    pub clients: Arc<Vec<GatewayClient>>,
    pub advisories: Advisories,
    pub ticket_key: TicketKey,
    pub upstream_tls: Vec<UpstreamTls>,
}

/// The ids whose cooldowns a snapshot listing `owned` carries, sorted and once each.
pub fn listed_ids(owned: &[OwnedProxy]) -> Vec<ProxyId> {
    let mut ids: Vec<ProxyId> = owned.iter().map(|o| o.record.id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}

impl WholeRead<'_> {
    /// The content read, not yet at a version (see `issue::decide`). Fails when the store
    /// lists a proxy or a client twice.
    pub fn into_issued(self) -> Result<Issued, ContentError> {
        let proxies: Vec<SnapshotProxy> = self.owned.iter().map(snapshot_proxy).collect();
        let mut held: Vec<HeldLease> = self
            .draining
            .iter()
            .map(|a| HeldLease {
                id: a.proxy_id.clone(),
                lease_until_ms: a.lease_until_ms,
            })
            .collect();
        held.sort_by(|a, b| a.id.cmp(&b.id));
        let whole = WorkerSnapshot {
            advisories: self.advisories,
            worker: self.worker.clone(),
            session_id: self.session_id.to_owned(),
            reference: SnapshotRef {
                version: 0,
                epoch: self.epoch,
                checksum: String::new(),
            },
            // The content keeps neither; the answer sets both.
            generated_at_ms: self.now,
            max_staleness_ms: 0,
            proxies,
            clients: self.clients.as_ref().clone(),
            held,
            ticket_key: Some(self.ticket_key),
            upstream_tls: self.upstream_tls,
        };
        let content = SnapshotContent::of(&whole)?;
        let mut horizons = Horizons::default();
        for o in self.owned {
            let ends = listing_ends_at(o).min(forgotten_at(content.cooldowns(&o.record.id)));
            horizons.set(&o.record.id, ends);
        }
        let mut drain_epochs = HashMap::new();
        for a in self.draining {
            horizons.set(&a.proxy_id, a.lease_until_ms);
            if let AssignmentState::Draining { drain_epoch } = a.state {
                drain_epochs.insert(a.proxy_id.clone(), drain_epoch);
            }
        }
        Ok(Issued {
            content,
            counter: self.counters.worker,
            feedback: self.counters.feedback,
            clients: self.clients,
            horizons,
            drain_epochs,
            read_whole_at_ms: self.now,
        })
    }
}
