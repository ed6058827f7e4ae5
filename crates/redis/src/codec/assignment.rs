//! Assignments as stored in the `owners` hash: `worker \t epoch \t assigned_at \t
//! lease_until \t upstream`; a draining one also has its drain epoch in `drain-tickets`.

use super::{corrupt, parse_u64};
use proxypool_core::{Assignment, AssignmentState, PoolResult, ProxyId, UpstreamId, WorkerId};

/// Decodes an assignment of `proxy` from its stored value and drain ticket ('' = active).
pub(crate) fn decode(proxy: &str, value: &str, ticket: &str) -> PoolResult<Assignment> {
    let what = "assignment";
    let f: Vec<&str> = value.split('\t').collect();
    if f.len() != 5 {
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
        upstream: UpstreamId::new(f[4]).map_err(|_| corrupt(what))?,
        worker: WorkerId::new(f[0]).map_err(|_| corrupt(what))?,
        epoch: parse_u64(f[1], what)?,
        assigned_at_ms: parse_u64(f[2], what)?,
        lease_until_ms: parse_u64(f[3], what)?,
        state,
    })
}
