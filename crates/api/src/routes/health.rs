//! `GET /healthz` (the process answers) and `GET /readyz` (its stores answer).
//!
//! Readiness probes the activity pool with a one-session read and the quota with a
//! read-only query (`QuotaPort::ready`): a probe writes nothing, however often a load
//! balancer asks. Each probe has its own timeout; either failing is 503 `unavailable`
//! naming which one. Neither route is behind the per-IP shield (probes come from a few
//! addresses, often), nor behind authentication.

use crate::error::ApiError;
use crate::state::ApiState;
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

pub(crate) async fn readyz(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let timeout = state.limits().readiness_timeout.as_duration();
    let now = state.now();
    let store = tokio::time::timeout(timeout, state.ports().runtime.live_sessions(now, 1)).await;
    let store_ok = matches!(store, Ok(Ok(_)));
    let quota = tokio::time::timeout(timeout, state.ports().quota.ready()).await;
    let quota_ok = matches!(quota, Ok(true));
    match (store_ok, quota_ok) {
        (true, true) => Ok(Json(json!({
            "status": "ready",
            "checks": { "store": "ok", "quota": "ok" }
        }))),
        _ => {
            let down: Vec<&str> = [("store", store_ok), ("quota", quota_ok)]
                .into_iter()
                .filter(|(_, ok)| !ok)
                .map(|(name, _)| name)
                .collect();
            tracing::warn!(?down, "not ready");
            Err(ApiError::unavailable(
                format!("not ready: {} unreachable", down.join(" and ")),
                state.retry_after(),
            ))
        }
    }
}
