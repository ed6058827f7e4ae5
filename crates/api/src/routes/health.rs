//! `GET /healthz` (the process answers) and `GET /readyz` (its stores answer).
//!
//! Readiness probes the activity pool with a one-session read and the quota with a real
//! decision on a dedicated bucket whose receipt never changes: within a window that is a
//! replay (no second charge), so the bucket stays at one admission per window, and the
//! probe goes through the same statement every request does. Each probe has its own
//! timeout; either failing is 503 `unavailable` naming which one.

use crate::error::ApiError;
use crate::state::ApiState;
use axum::Json;
use axum::extract::State;
use proxypool_quota::{Operation, QuotaCommand, QuotaConfig, QuotaDecision};
use serde_json::{Value, json};

/// The quota bucket readiness probes decide on (a project no client may have: clients'
/// projects are theirs, this one is reserved by name).
pub const READINESS_PROJECT: &str = "proxypool-readiness";

pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

pub(crate) async fn readyz(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let timeout = state.limits().readiness_timeout.as_duration();
    let now = state.now();
    let store = tokio::time::timeout(timeout, state.ports().runtime.live_sessions(now, 1)).await;
    let store_ok = matches!(store, Ok(Ok(_)));
    let probe = QuotaCommand::new(READINESS_PROJECT, "readyz", Operation::Inspect, "readyz");
    // The probe bucket belongs to no client, so it decides under the default limits.
    let limits = QuotaConfig::default().limits(probe.operation);
    let quota = tokio::time::timeout(timeout, state.ports().quota.consume(&probe, limits)).await;
    let quota_ok = matches!(
        quota,
        Ok(Ok(
            QuotaDecision::Admitted { .. } | QuotaDecision::Exceeded { .. }
        ))
    );
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
