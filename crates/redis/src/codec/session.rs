//! Worker sessions (`worker-sessions`: `session id \t opened_at \t expires_at \t acked
//! snapshot \t last sequence \t last report digest \t last report's stale ids`; the last
//! field is missing in sessions stored before it existed) and snapshot references (canonical
//! JSON, compared as strings by the scripts; u64 values never pass through Lua numbers). The Lua
//! constants (`S_ID`, ...) are generated from the layout below.

use super::layout::tab_layout;
use super::{corrupt, parse_opt_u64, parse_u64};
use proxypool_core::{PoolResult, SnapshotRef, WorkerId, WorkerSession};

tab_layout! {
    count S_FIELDS;
    SESSION_ID => S_ID,
    OPENED_AT => S_OPENED,
    EXPIRES_AT => S_EXPIRES,
    ACKED => S_ACKED,
    SEQUENCE => S_SEQ,
    DIGEST => S_DIGEST,
    // The stale entries of the last report (ids joined by ','), so a replay answers the
    // same; the last field, missing in sessions stored before it existed.
    STALE => S_STALE,
}

pub(crate) fn snapshot_json(snapshot: &SnapshotRef) -> String {
    serde_json::to_string(snapshot).unwrap_or_default()
}

fn snapshot(field: &str) -> PoolResult<Option<SnapshotRef>> {
    if field.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(field)
        .map(Some)
        .map_err(|_| corrupt("snapshot reference"))
}

/// Decodes the stored session of `worker` and its issued snapshot ('' = none).
pub(crate) fn decode(worker: &WorkerId, value: &str, issued: &str) -> PoolResult<WorkerSession> {
    let what = "session";
    let f: Vec<&str> = value.split('\t').collect();
    if f.len() != STALE && f.len() != FIELDS {
        return Err(corrupt(what));
    }
    Ok(WorkerSession {
        worker: worker.clone(),
        session_id: f[SESSION_ID].to_owned(),
        opened_at_ms: parse_u64(f[OPENED_AT], what)?,
        expires_at_ms: parse_u64(f[EXPIRES_AT], what)?,
        issued_snapshot: snapshot(issued)?,
        acked_snapshot: snapshot(f[ACKED])?,
        last_report_sequence: parse_opt_u64(f[SEQUENCE], what)?,
    })
}
