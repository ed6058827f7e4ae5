//! A read-only listing of the pool's proxies, for operators (the dashboard's Proxies page
//! and `GET /v1/admin/proxies`).
//!
//! The listing is bounded twice: by the caller's `limit` (at most [`MAX_LIST_LIMIT`]) and
//! by the store's scan budget (a pool larger than it answers `Unavailable`, never a
//! silently partial page). Pages are ordered by proxy id and continue after a cursor, so an
//! operator can walk the whole pool page by page. Credentials never leave the store here.

use crate::error::{PoolError, PoolResult};
use crate::health::CheckFailure;
use crate::ids::{ClientId, Label, ProxyId, UpstreamId, WorkerId};
use crate::ownership::Assignment;
use crate::proxy::{Protocol, ProxyRecord, ProxyStatus};
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// The largest page a caller may ask for.
pub const MAX_LIST_LIMIT: usize = 1000;

/// Which proxies a listing returns. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyListFilter {
    pub upstream: Option<UpstreamId>,
    /// The status as of `now` (a record past its hard expiry is `Expired`).
    pub status: Option<ProxyStatus>,
    /// Only ids strictly after this one (the previous page's `next`).
    pub after: Option<ProxyId>,
}

/// One proxy as the listing shows it (never its credentials).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedProxy {
    pub id: ProxyId,
    pub upstream: UpstreamId,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub status: ProxyStatus,
    /// The worker leasing it, while the lease runs.
    pub owner: Option<WorkerId>,
    /// The client an extraction handed it to (EXTRACTED records only).
    pub extracted_by: Option<ClientId>,
    pub draining: bool,
    pub lease_until_ms: Option<UnixMillis>,
    pub usable_until_ms: UnixMillis,
    pub hard_expiry_ms: UnixMillis,
    pub checked_at_ms: Option<UnixMillis>,
    pub latency_ms: Option<u32>,
    pub failures: u32,
    /// Why the last check failed; `None` after a success or before any check. A kind
    /// stored by an older version that is no reason of today's shows as `Other` until the
    /// next check.
    pub last_check_error: Option<CheckFailure>,
}

impl ListedProxy {
    /// The listed view of a record, its assignment and its extracting client (if any), as
    /// of `now`. Both stores build their entries here, so they cannot disagree on what a
    /// row shows.
    pub fn new(
        now: UnixMillis,
        record: &ProxyRecord,
        assignment: Option<&Assignment>,
        extracted_by: Option<&ClientId>,
    ) -> Self {
        let assignment = assignment.filter(|a| now < a.lease_until_ms);
        ListedProxy {
            id: record.id.clone(),
            upstream: record.upstream.clone(),
            protocol: record.protocol,
            host: record.host.clone(),
            port: record.port,
            region: record.region.clone(),
            carrier: record.carrier.clone(),
            status: status_at(now, record),
            owner: assignment.map(|a| a.worker.clone()),
            extracted_by: extracted_by
                .filter(|_| record.status == ProxyStatus::Extracted)
                .cloned(),
            draining: assignment.is_some_and(Assignment::is_draining),
            lease_until_ms: assignment.map(|a| a.lease_until_ms),
            usable_until_ms: record.usable_until_ms,
            hard_expiry_ms: record.hard_expiry_ms,
            checked_at_ms: record.health.checked_at_ms,
            latency_ms: record.health.latency_ms,
            failures: record.health.failures,
            last_check_error: record
                .health
                .last_error
                .as_deref()
                .map(|kind| CheckFailure::parse(kind).unwrap_or(CheckFailure::Other)),
        }
    }
}

/// A record's status as of `now`: past its hard expiry it is `Expired` whatever is stored.
pub fn status_at(now: UnixMillis, record: &ProxyRecord) -> ProxyStatus {
    if record.hard_expiry_ms <= now {
        ProxyStatus::Expired
    } else {
        record.status
    }
}

impl ProxyListFilter {
    /// Whether a record (with its status as of `now`) passes the filter, cursor included.
    pub fn matches(&self, now: UnixMillis, record: &ProxyRecord) -> bool {
        self.after.as_ref().is_none_or(|after| &record.id > after)
            && self.upstream.as_ref().is_none_or(|u| &record.upstream == u)
            && self.status.is_none_or(|s| status_at(now, record) == s)
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyPage {
    /// In ascending id order.
    pub proxies: Vec<ListedProxy>,
    /// The cursor of the next page, when more proxies match.
    pub next: Option<ProxyId>,
}

/// Refuses a limit the listing cannot serve (zero, or over [`MAX_LIST_LIMIT`]).
pub fn check_limit(limit: usize) -> PoolResult<()> {
    if limit == 0 || limit > MAX_LIST_LIMIT {
        return Err(PoolError::invalid(format!(
            "limit must be between 1 and {MAX_LIST_LIMIT}"
        )));
    }
    Ok(())
}
