//! Operator state every controller on one store must agree on: whether a worker is
//! cordoned or drained, and how each upstream's vendor fetches went.
//!
//! It lives in the store, not in a controller's memory, so behind a load balancer every
//! controller answers the same, a cordon sent to a standby is honoured by the leader, and a
//! failover forgets nothing.

use crate::error::{PoolError, PoolResult};
use crate::ids::{ClientId, UpstreamId, WorkerId};
use crate::time::UnixMillis;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;

/// Most workers with a non-default mode (each is one small record).
pub const MAX_WORKER_MODES: usize = 10_000;

/// Most keyed admin answers a store holds at once (admin actions are an operator's, rare;
/// the bound keeps a runaway script from growing the store).
pub const MAX_KEYED_ADMIN_CALLS: usize = 10_000;

/// An admin action sent with an `Idempotency-Key`: the store keeps its answer for
/// `held_ms`, so a reuse of the key by the same client replays that answer instead of
/// acting again (a retried drain must not undo an uncordon sent since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedCall {
    pub client: ClientId,
    /// A validated idempotency key (`crate::extract::validate_idempotency_key`).
    pub key: String,
    pub held_ms: u64,
}

/// What a keyed mode change did: the record it answered with, and whether that answer is
/// the stored one of an earlier call with the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedModeSet {
    pub record: WorkerModeRecord,
    pub replayed: bool,
}
/// Most upstreams with a stored status.
pub const MAX_PROVIDER_STATUSES: usize = 1_000;

/// What the ownership manager may do with a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMode {
    /// Gets leases as capacity and balance allow (the default; not stored).
    Active,
    /// Gets no new leases; keeps (and renews) what it holds.
    Cordoned,
    /// Gets no new leases and gives every lease back through the drain protocol, so its
    /// open connections finish first.
    Draining,
}

impl WorkerMode {
    /// Whether the ownership manager may give this worker new leases.
    pub fn takes_new_leases(self) -> bool {
        self == WorkerMode::Active
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkerMode::Active => "active",
            WorkerMode::Cordoned => "cordoned",
            WorkerMode::Draining => "draining",
        }
    }

    pub fn parse(s: &str) -> Option<WorkerMode> {
        match s {
            "active" => Some(WorkerMode::Active),
            "cordoned" => Some(WorkerMode::Cordoned),
            "draining" => Some(WorkerMode::Draining),
            _ => None,
        }
    }
}

/// A worker whose mode is not `Active`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerModeRecord {
    pub worker: WorkerId,
    pub mode: WorkerMode,
    pub since_ms: UnixMillis,
}

/// What the last fetches of one upstream did, and running totals (written by the leader's
/// reconciler after every round, read by every controller).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderStatus {
    pub upstream: Option<UpstreamId>,
    pub last_attempt_ms: Option<UnixMillis>,
    pub last_success_ms: Option<UnixMillis>,
    /// A short kind (`connect`, `timeout`, `http_status`, `too_large`, `malformed_body`,
    /// `foreign_host`, `too_many_pages`, ..., `store_unavailable`, `store_rejected`: the
    /// controller's `provider::failure`); `None` after a success.
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    /// Entries in the last successful list.
    pub last_fetched: u32,
    pub last_inserted: u32,
    pub last_refreshed: u32,
    /// Dropped entries of the last successful list, by reason (parse and validation).
    pub last_dropped: BTreeMap<String, u32>,
    /// Fields of kept entries of the last successful list that could not be read and were
    /// left out, by reason (`invalid_issued_at`): the entries are in the pool without them.
    pub last_ignored: BTreeMap<String, u32>,
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
    pub total_ignored: u64,
}

/// Longest encoded status the stores take (the reason map is a fixed set of kinds, so a
/// real status is a few hundred bytes).
pub const MAX_PROVIDER_STATUS_BYTES: usize = 8 * 1024;

impl ProviderStatus {
    /// The status as stored: JSON, checked against its size bound.
    pub fn encode(&self) -> PoolResult<String> {
        if self.upstream.is_none() {
            return Err(PoolError::invalid("a provider status names its upstream"));
        }
        let text = serde_json::to_string(self)
            .map_err(|e| PoolError::invalid(format!("provider status: {e}")))?;
        if text.len() > MAX_PROVIDER_STATUS_BYTES {
            return Err(PoolError::invalid(format!(
                "provider status is {} bytes, over {MAX_PROVIDER_STATUS_BYTES}",
                text.len()
            )));
        }
        Ok(text)
    }

    pub fn decode(text: &str) -> PoolResult<ProviderStatus> {
        serde_json::from_str(text).map_err(|e| PoolError::corrupt(format!("provider status: {e}")))
    }
}

/// Cluster-wide operator state (implemented by every activity-pool adapter).
#[async_trait]
pub trait AdminStore: Send + Sync + Debug {
    /// Sets a worker's mode (`Active` forgets the record) and returns the record now in
    /// force. Setting the mode a worker already has keeps its `since_ms`. Refused
    /// (`Invalid`) when `MAX_WORKER_MODES` other workers already have a record.
    async fn set_worker_mode(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
    ) -> PoolResult<WorkerModeRecord>;

    /// [`set_worker_mode`](Self::set_worker_mode) under `call`'s key, atomically: the first
    /// call with the key acts and keeps its answer for `held_ms`; a later one with the same
    /// worker and mode gets that answer back (`replayed`) and changes nothing; one with
    /// another worker or mode is `Conflict::IdempotencyDigest`. Refused (`Invalid`) when
    /// `MAX_KEYED_ADMIN_CALLS` answers are already held.
    async fn set_worker_mode_keyed(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        mode: WorkerMode,
        call: &KeyedCall,
    ) -> PoolResult<KeyedModeSet>;

    /// Every worker whose mode is not `Active`, ordered by worker id (at most
    /// `MAX_WORKER_MODES`).
    async fn worker_modes(&self) -> PoolResult<Vec<WorkerModeRecord>>;

    /// Replaces the stored status of `status.upstream`.
    async fn put_provider_status(&self, now: UnixMillis, status: &ProviderStatus)
    -> PoolResult<()>;

    /// Every stored provider status, ordered by upstream id.
    async fn provider_statuses(&self) -> PoolResult<Vec<ProviderStatus>>;
}
