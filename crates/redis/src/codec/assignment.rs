//! Assignments as stored in the `owners` hash: `worker \t epoch \t assigned_at \t
//! lease_until \t upstream`; a draining one also has its drain epoch in `drain-tickets`. The
//! Lua constants (`A_WORKER`, ...) are generated from the layout below.

use super::layout::tab_layout;
use super::{corrupt, parse_u64};
use proxypool_core::{Assignment, AssignmentState, PoolResult, ProxyId, UpstreamId, WorkerId};

tab_layout! {
    count A_FIELDS;
    WORKER => A_WORKER,
    EPOCH => A_EPOCH,
    ASSIGNED_AT => A_ASSIGNED,
    LEASE_UNTIL => A_LEASE,
    UPSTREAM => A_UP,
}

/// Decodes an assignment of `proxy` from its stored value and drain ticket ('' = active).
pub(crate) fn decode(proxy: &str, value: &str, ticket: &str) -> PoolResult<Assignment> {
    let what = "assignment";
    let f: Vec<&str> = value.split('\t').collect();
    if f.len() != FIELDS {
        return Err(corrupt(what));
    }
    let state = if ticket.is_empty() {
        AssignmentState::Active
    } else {
        AssignmentState::Draining {
            drain_epoch: parse_u64(ticket, what)?,
        }
    };
    Ok(Assignment {
        proxy_id: ProxyId::new(proxy).map_err(|_| corrupt(what))?,
        upstream: UpstreamId::new(f[UPSTREAM]).map_err(|_| corrupt(what))?,
        worker: WorkerId::new(f[WORKER]).map_err(|_| corrupt(what))?,
        epoch: parse_u64(f[EPOCH], what)?,
        assigned_at_ms: parse_u64(f[ASSIGNED_AT], what)?,
        lease_until_ms: parse_u64(f[LEASE_UNTIL], what)?,
        state,
    })
}
