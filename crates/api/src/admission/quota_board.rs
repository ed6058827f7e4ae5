//! What this API replica last saw of each client's quota and rate limit, for the
//! dashboard's Clients page (`GET /v1/admin/clients`).
//!
//! The durable quota port only consumes and settles; it has no read that would not itself
//! be a charge. So every charge leaves its decision here: the admissions left in the
//! window and when it resets, or that the client was refused (quota exceeded, or locked
//! out by its rate-limit policy) and until when. Bounded: one entry per (client,
//! operation) of the configured clients, pruned on reload.

use proxypool_core::{ClientId, LockExt, UnixMillis};
use proxypool_quota::Operation;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// The last decision for one (client, operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Seen {
    /// Admissions left in the window after the last admitted request.
    pub(crate) remaining: Option<u32>,
    /// When the window of the last decision ends (store clock).
    pub(crate) reset_at_ms: Option<UnixMillis>,
    /// Refused until then (quota exceeded or rate-limit lockout), if the last decision
    /// was a refusal.
    pub(crate) refused_until_ms: Option<UnixMillis>,
    /// `quota_exceeded` or `rate_limited`, with `refused_until_ms`.
    pub(crate) refused_by: Option<&'static str>,
    pub(crate) at_ms: UnixMillis,
}

#[derive(Debug, Default)]
pub(crate) struct QuotaBoard {
    seen: Mutex<HashMap<(ClientId, Operation), Seen>>,
}

/// Entries beyond this are not recorded (a safety net: the clients are configured, so
/// the real bound is their number times three).
const MAX_ENTRIES: usize = 30_000;

impl QuotaBoard {
    pub(crate) fn record(&self, client: &ClientId, operation: Operation, seen: Seen) {
        let mut map = self.seen.lock_or_recover();
        if map.len() >= MAX_ENTRIES && !map.contains_key(&(client.clone(), operation)) {
            return;
        }
        map.insert((client.clone(), operation), seen);
    }

    pub(crate) fn get(&self, client: &ClientId, operation: Operation) -> Option<Seen> {
        self.seen
            .lock_or_recover()
            .get(&(client.clone(), operation))
            .copied()
    }

    /// Forgets clients a reload removed.
    pub(crate) fn retain(&self, clients: &[ClientId]) {
        self.seen
            .lock_or_recover()
            .retain(|(client, _), _| clients.contains(client));
    }
}
