//! A proxy's generation in MemoryPool: who holds it from an extraction, whether its client
//! gave it back, and the lease epoch the gateways' tickets are bound to.
//!
//! Extraction is terminal for a generation: a proxy given back stays EXTRACTED, so it is
//! neither extracted nor leased nor checked again, while the client that gave it back may
//! still hold its credentials, until its hard expiry or until the vendor re-issues it (new
//! credentials or a later issue time: `proxypool_core::extract::renews_given_back`), which
//! the upsert stores as a new generation, FETCHED. The lease epoch of a record is set by
//! every lease and cleared when the record leaves the pool's hands (extracted) or goes, so
//! a ticket of an earlier generation never matches a later one.

use super::state::State;
use proxypool_core::{ClientId, ProxyId, ProxyRecord, ProxyStatus, UnixMillis};

impl State {
    /// Whether `client` holds `id` from a live extraction (and has not given it back).
    pub(crate) fn holds(&self, client: &ClientId, id: &ProxyId, now: UnixMillis) -> bool {
        self.live_record(id, now)
            .is_some_and(|r| r.status == ProxyStatus::Extracted)
            && self.extracted_by.get(id) == Some(client)
    }

    /// `client`'s extraction of `id` ends: the record stays EXTRACTED, held by nobody.
    /// False, and nothing changes, when `client` does not hold it.
    pub(crate) fn give_back(&mut self, client: &ClientId, id: &ProxyId, now: UnixMillis) -> bool {
        if !self.holds(client, id, now) {
            return false;
        }
        self.extracted_by.remove(id);
        self.given_back.insert(id.clone());
        true
    }

    /// The epoch of `id`'s latest lease since it last entered the pool.
    pub(crate) fn lease_epoch(&self, id: &ProxyId) -> Option<u64> {
        self.lease_epochs.get(id).copied()
    }

    /// Keeps the generation in step with `record`'s new status (`replace_record`): outside
    /// EXTRACTED nobody holds it and it is not given back; an extraction ends its lease
    /// generation.
    pub(crate) fn follow_generation(&mut self, record: &ProxyRecord) {
        if record.status == ProxyStatus::Extracted {
            self.lease_epochs.remove(&record.id);
        } else {
            self.extracted_by.remove(&record.id);
            self.given_back.remove(&record.id);
        }
    }

    /// Forgets `id`'s generation with its record.
    pub(crate) fn forget_generation(&mut self, id: &ProxyId) {
        self.extracted_by.remove(id);
        self.given_back.remove(id);
        self.lease_epochs.remove(id);
    }
}
