//! Per-upstream provider status, for the client API and operators.
//!
//! The board is the leader's working copy: a small map behind a std mutex that the
//! reconcilers update (held for a copy, never across an `.await`). After every round the
//! reconciler writes its upstream's entry to the store (fenced with its term), and every
//! controller answers `/v1/upstreams` from the store, so all of them say the same and a
//! new leader carries on the totals.

use proxypool_core::{LockExt, UpstreamId};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// What the last fetches of one upstream did, and running totals: the store's type, so
/// the board and the shared copy are the same thing.
pub type UpstreamStatus = proxypool_core::ProviderStatus;

/// Status of every upstream.
#[derive(Debug, Default)]
pub struct StatusBoard {
    entries: Mutex<HashMap<UpstreamId, UpstreamStatus>>,
}

impl StatusBoard {
    pub fn get(&self, upstream: &UpstreamId) -> Option<UpstreamStatus> {
        self.entries.lock_or_recover().get(upstream).cloned()
    }

    /// Every upstream's status, ordered by id.
    pub fn all(&self) -> Vec<UpstreamStatus> {
        let mut all: Vec<UpstreamStatus> =
            self.entries.lock_or_recover().values().cloned().collect();
        all.sort_by(|a, b| a.upstream.cmp(&b.upstream));
        all
    }

    /// Takes the stored copy when it is at least as recent as this board's (a new term:
    /// another controller may have fetched since this one last led).
    pub(crate) fn adopt(&self, stored: UpstreamStatus) {
        let Some(upstream) = stored.upstream.clone() else {
            return;
        };
        let mut entries = self.entries.lock_or_recover();
        let newer = entries
            .get(&upstream)
            .is_none_or(|local| stored.last_attempt_ms >= local.last_attempt_ms);
        if newer {
            entries.insert(upstream, stored);
        }
    }

    /// Updates one upstream's entry and returns the result.
    pub(crate) fn update(
        &self,
        upstream: &UpstreamId,
        change: impl FnOnce(&mut UpstreamStatus),
    ) -> UpstreamStatus {
        let mut entries = self.entries.lock_or_recover();
        let entry = entries
            .entry(upstream.clone())
            .or_insert_with(|| UpstreamStatus {
                upstream: Some(upstream.clone()),
                ..UpstreamStatus::default()
            });
        change(entry);
        entry.clone()
    }
}

/// One configured upstream with its provider status, as an API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamOverview {
    pub id: UpstreamId,
    /// `http_list`, `static` or `backconnect`.
    pub provider: &'static str,
    pub fetch_interval_ms: u64,
    pub proxy_ttl_ms: u64,
    pub max_size: u64,
    /// `None` until the first round ran.
    pub status: Option<UpstreamStatus>,
}
