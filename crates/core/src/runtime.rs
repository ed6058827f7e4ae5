//! Gateway worker sessions, snapshot references and runtime reports.
//!
//! A worker opens a session (a new session fences the old one's writes), is issued
//! snapshots and acknowledges them, and reports per-proxy active/reserved counts with a
//! strictly increasing sequence. A missing, expired or fenced runtime means the worker's
//! capacity is unknown, which the inventory counts as zero free slots (fail closed).

use crate::cooldown::{CooldownChange, validate_changes};
use crate::error::PoolError;
use crate::fleet::FleetEndpoint;
use crate::ids::{ProxyId, WorkerId, digest_hex};
use crate::time::UnixMillis;
use crate::usage::GatewayUsage;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Most entries one runtime report may carry.
pub const MAX_REPORT_ENTRIES: usize = 100_000;

/// Names one snapshot issued to one worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotRef {
    pub version: u64,
    /// The global ownership epoch the snapshot was built at.
    pub epoch: u64,
    pub checksum: String,
}

/// Counters that move whenever a write may have changed what the worker's next snapshot
/// would list, so a waiting long-poll reads them instead of rebuilding the snapshot. Only
/// their movement means anything: equal counters mean no such write happened in between
/// (changes that come from time alone, a lease or a cooldown running out, move nothing).
/// What each counter orders, and what not, is in the glossary of the protocol's owner,
/// `proxypool_snapshot`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotVersion {
    /// Moved by every write to the worker's assignments (assign, renew, drain, release,
    /// expiry, removal), to the record or the cooldowns of a proxy it holds (beyond the
    /// health bookkeeping a snapshot does not carry), to its session (a new session, a
    /// close) and by a runtime report that had stale entries.
    pub worker: u64,
    /// Moved by every new session feedback: it is kept per client, and every worker's
    /// snapshot carries it.
    pub feedback: u64,
}

/// How far back a store remembers which proxies changed for each worker: past this many
/// distinct proxies since a version, a delta from it is refused (`changed: None`) and the
/// snapshot is rebuilt whole, which then costs about as much anyway.
pub const SNAPSHOT_JOURNAL_CAP: usize = 16_384;

/// What a worker holds of a proxy, read the way a snapshot build reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Holding {
    /// Listed: an unexpired, non-draining lease on a usable record (`owned_by`'s rule).
    Serving(Box<crate::ownership::OwnedProxy>),
    /// Held while draining, with an unexpired lease (`draining_of`'s rule).
    Draining(crate::ownership::Assignment),
    /// Neither (released, expired, moved to another worker, gone).
    Nothing,
}

/// The proxies whose snapshot entries may have changed for a worker since a version of its
/// counter, each read as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotChanges {
    /// The counters when the changes were read: a later call from `version.worker` sees
    /// every change after this one.
    pub version: SnapshotVersion,
    /// Each changed (or asked for) proxy once, by id, with what the worker holds of it;
    /// `None` when the store no longer remembers back to the asked version or more than
    /// the asked limit changed: rebuild whole.
    pub changed: Option<Vec<(ProxyId, Holding)>>,
}

/// The current session of one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSession {
    pub worker: WorkerId,
    pub session_id: String,
    pub opened_at_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
    /// The latest snapshot issued to this session and not yet acknowledged.
    pub issued_snapshot: Option<SnapshotRef>,
    /// The latest snapshot this session acknowledged (applied).
    pub acked_snapshot: Option<SnapshotRef>,
    /// The sequence of the last accepted runtime report.
    pub last_report_sequence: Option<u64>,
}

impl WorkerSession {
    pub fn is_live(&self, now: UnixMillis) -> bool {
        now < self.expires_at_ms
    }
}

/// One proxy's load on one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyRuntime {
    pub proxy_id: ProxyId,
    pub active: u32,
    pub reserved: u32,
    /// Removed from the worker's snapshot but still busy.
    #[serde(default)]
    pub draining: bool,
}

/// A full, sparse runtime report: proxies not listed have zero active and reserved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeReport {
    pub worker: WorkerId,
    pub session_id: String,
    pub sequence: u64,
    /// Must be exactly the snapshot the session acknowledged.
    pub snapshot: SnapshotRef,
    /// Where the gateway's fleet peers reach it, when it has a fleet listener. Declared
    /// before `entries`: the Redis store splices the kept entries into the JSON it stores
    /// and relies on `entries` being the last field serialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetEndpoint>,
    pub entries: Vec<ProxyRuntime>,
    /// The gateway's cumulative usage per (client, upstream), accounted by the store when
    /// it accepts the report (`crate::usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<GatewayUsage>,
    /// Cooldowns the gateway learned since its last accepted report (bans it saw, client
    /// feedback on its sessions), merged into the store when the report is accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cooldowns: Vec<CooldownChange>,
}

impl RuntimeReport {
    pub fn validate(&self) -> Result<(), PoolError> {
        validate_session_id(&self.session_id)?;
        if self.entries.len() > MAX_REPORT_ENTRIES {
            return Err(PoolError::invalid(format!(
                "a runtime report carries at most {MAX_REPORT_ENTRIES} entries"
            )));
        }
        let mut seen = HashSet::with_capacity(self.entries.len());
        for entry in &self.entries {
            if !seen.insert(&entry.proxy_id) {
                return Err(PoolError::invalid(format!(
                    "proxy {} appears twice in the report",
                    entry.proxy_id
                )));
            }
        }
        if let Some(usage) = &self.usage {
            usage.validate()?;
        }
        validate_changes(&self.cooldowns)?;
        if let Some(endpoint) = &self.fleet {
            endpoint.validate()?;
        }
        Ok(())
    }

    /// A digest of the content, to tell an idempotent replay from a conflicting report.
    pub fn digest(&self) -> String {
        let body = serde_json::to_string(self).unwrap_or_default();
        digest_hex(&[body.as_bytes()], 16)
    }
}

/// A report the store accepted, as it keeps it until it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRuntime {
    pub report: RuntimeReport,
    pub received_at_ms: UnixMillis,
    pub expires_at_ms: UnixMillis,
}

/// Whether a report was new or a replay of the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    Accepted,
    Replayed,
}

/// What the store did with a report it took (new or replayed).
///
/// A report is never refused whole for an entry the worker no longer owns: one tunnel
/// still open through a proxy whose lease lapsed (or that moved on) would otherwise get
/// every later report of the gateway refused. Such entries are left out of what is stored
/// and named here, so the gateway can stop using them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportReceipt {
    pub outcome: ReportOutcome,
    /// Busy entries on proxies the worker does not own with a live lease at or before the
    /// snapshot's epoch, in report order. A replay names the same ones as the first time.
    pub stale_proxies: Vec<ProxyId>,
    /// The end of the session, renewed by the report.
    pub session_expires_at_ms: UnixMillis,
}

/// Session ids are opaque, printable and short.
pub fn validate_session_id(session_id: &str) -> Result<(), PoolError> {
    if session_id.is_empty()
        || session_id.len() > 128
        || !session_id.chars().all(|c| c.is_ascii_graphic())
    {
        return Err(PoolError::invalid(
            "session_id must be 1-128 printable ASCII characters",
        ));
    }
    Ok(())
}
