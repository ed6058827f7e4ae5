//! Inventory views and maintenance reports.

use crate::ids::UpstreamId;
use crate::proxy::ProxyStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One upstream's inventory, computed exactly (or not at all: over budget is unavailable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryView {
    pub upstream: UpstreamId,
    /// FETCHED, CHECKING, AVAILABLE and SUSPECT records (draining ones are AVAILABLE).
    pub managed: u64,
    /// Sum of `max_sessions - active - reserved` over usable proxies whose capacity is known:
    /// unowned proxies give `max_sessions`, owned ones what their owner's fresh runtime
    /// report leaves, owned ones with unknown runtime give zero.
    pub available_slots: u64,
    /// Records that count against `max_size`.
    pub unextracted: u64,
    /// Live records by status (expired records not yet swept count as EXPIRED).
    pub by_status: BTreeMap<ProxyStatus, u64>,
}

/// What one maintenance sweep removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    pub records_removed: u32,
    pub assignments_removed: u32,
    pub sessions_removed: u32,
    pub results_removed: u32,
    /// Withheld records released (their recovery hold ended, or the recovery did).
    #[serde(default)]
    pub records_released: u32,
    /// More expired state is waiting: call again.
    pub more_pending: bool,
}

/// How much the store holds, for boundedness checks and operators.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    pub records: u64,
    pub assignments: u64,
    pub sessions: u64,
    pub runtimes: u64,
    /// Stored idempotency responses and operation results.
    pub results: u64,
    /// Index entries (filter, expiry and ownership indexes), for leak detection.
    pub index_entries: u64,
}
