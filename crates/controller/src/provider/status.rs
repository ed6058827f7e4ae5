//! Per-upstream provider status, for the client API and operators.
//!
//! The board is a small map behind a std mutex: writers (one reconciler task per upstream)
//! and readers (API handlers) hold it for a copy, never across an `.await`.

use proxypool_core::{LockExt, UnixMillis, UpstreamId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// What the last fetch of one upstream did, and running totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpstreamStatus {
    pub upstream: Option<UpstreamId>,
    pub last_attempt_ms: Option<UnixMillis>,
    pub last_success_ms: Option<UnixMillis>,
    /// A short kind (`connect`, `timeout`, `http_status`, `too_large`, `malformed_body`,
    /// `store_unavailable`, `store_rejected`); `None` after a success.
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    /// Entries in the last successful list.
    pub last_fetched: u32,
    pub last_inserted: u32,
    pub last_refreshed: u32,
    /// Dropped entries of the last successful list, by reason (parse and validation).
    pub last_dropped: BTreeMap<String, u32>,
    pub last_over_max_size: u32,
    pub last_foreign_duplicates: u32,
    /// Entries of the last list refused by the host policy (also in `last_dropped`, as
    /// `host_not_allowed` and `private_host`): never upserted, never given credentials.
    pub last_refused: u32,
    pub total_refused: u64,
    pub total_fetches: u64,
    pub total_failures: u64,
    pub total_inserted: u64,
    pub total_dropped: u64,
}

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

    pub(crate) fn update(&self, upstream: &UpstreamId, change: impl FnOnce(&mut UpstreamStatus)) {
        let mut entries = self.entries.lock_or_recover();
        let entry = entries
            .entry(upstream.clone())
            .or_insert_with(|| UpstreamStatus {
                upstream: Some(upstream.clone()),
                ..UpstreamStatus::default()
            });
        change(entry);
    }
}

/// One configured upstream with its provider status, as an API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamOverview {
    pub id: UpstreamId,
    /// `http_list` or `static`.
    pub provider: &'static str,
    pub fetch_interval_ms: u64,
    pub proxy_ttl_ms: u64,
    pub max_size: u64,
    /// `None` until the first round ran.
    pub status: Option<UpstreamStatus>,
}
