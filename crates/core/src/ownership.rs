//! Worker ownership of proxies: leases fenced by a global epoch.

use crate::ids::{ProxyId, UpstreamId, WorkerId};
use crate::proxy::ProxyRecord;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// Whether the owner may still hand out new sessions on the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AssignmentState {
    Active,
    /// Leaving the worker: no new sessions; released once the worker reports it idle.
    /// `drain_epoch` is the global epoch the drain bumped to; a snapshot at or after it no
    /// longer lists the proxy.
    Draining {
        drain_epoch: u64,
    },
}

/// One proxy's lease to one gateway worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub proxy_id: ProxyId,
    pub upstream: UpstreamId,
    pub worker: WorkerId,
    /// The global epoch at assignment; renew/drain/ack must name it.
    pub epoch: u64,
    pub assigned_at_ms: UnixMillis,
    /// Never later than the proxy's `usable_until_ms`.
    pub lease_until_ms: UnixMillis,
    #[serde(flatten)]
    pub state: AssignmentState,
}

impl Assignment {
    pub fn is_draining(&self) -> bool {
        matches!(self.state, AssignmentState::Draining { .. })
    }
}

/// A proxy owned by a worker, with the record the snapshot publisher needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedProxy {
    pub record: ProxyRecord,
    pub assignment: Assignment,
}
