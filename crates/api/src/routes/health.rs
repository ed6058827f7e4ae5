//! `GET /healthz` (the process answers) and `GET /readyz` (its stores answer).
//!
//! Readiness probes the activity pool with a one-session read and the quota with a
//! read-only query (`QuotaPort::ready`): a probe writes nothing, however often a load
//! balancer asks. Each probe has its own timeout; either failing is 503 `unavailable`
//! naming which one. The result is shared and at most a second old
//! ([`crate::readiness`]), so probes cannot turn into a load on the stores. A pool store
//! that lost its memory (or whose identity is not established yet) is 503 `store_lost`
//! before any probe; a recovering one is ready, with the recovery in the answer's `store`.
//! Neither route
//! needs authentication; `/readyz` is behind the per-IP shield (a probe every few seconds
//! stays far below it), `/healthz` is not.

use crate::error::{ApiError, ErrorCode};
use crate::readiness::Down;
use crate::state::ApiState;
use axum::Json;
use axum::extract::State;
use proxypool_core::StoreStatus;
use serde_json::{Value, json};

pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

pub(crate) async fn readyz(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    // A lost store (or one not established yet) refuses every call: not ready, and the
    // answer says why. A recovering one serves, so it is ready and says until when.
    let identity = state.ports().upstreams.store_status();
    if let Some(status) = identity.as_ref().filter(|s| !s.is_serving()) {
        tracing::warn!(?status, "not ready: the pool store is not established");
        let what = match status {
            StoreStatus::Lost { reason, .. } => {
                format!("the pool store lost its memory ({reason})")
            }
            _ => "the pool store's identity is not established yet".to_owned(),
        };
        return Err(
            ApiError::new(ErrorCode::StoreLost, format!("not ready: {what}"))
                .retry_after(state.retry_after()),
        );
    }
    let checking = state.clone();
    let down = state.readiness().get(|| check(checking)).await;
    if down.is_empty() {
        return Ok(Json(json!({
            "status": "ready",
            "checks": { "store": "ok", "quota": "ok" },
            "store": identity,
        })));
    }
    tracing::warn!(down = ?down, "not ready");
    Err(ApiError::unavailable(
        format!("not ready: {} unreachable", down.join(" and ")),
        state.retry_after(),
    ))
}

/// Probes the activity pool with a one-session read and the quota with a read-only query,
/// each under the readiness timeout; the names of those that did not answer.
async fn check(state: ApiState) -> Down {
    let timeout = state.limits().readiness_timeout.as_duration();
    let now = state.now();
    let store = tokio::time::timeout(timeout, state.ports().runtime.live_sessions(now, 1)).await;
    let quota = tokio::time::timeout(timeout, state.ports().quota.ready()).await;
    [
        ("store", matches!(store, Ok(Ok(_)))),
        ("quota", matches!(quota, Ok(true))),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(name, _)| name)
    .collect()
}
