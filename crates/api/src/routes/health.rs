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
//!
//! A ready answer's `extraction` shows how the pool is split between the gateways and
//! extraction, as the leading controller's last ownership round saw it (null elsewhere):
//! when the gateways hold every usable proxy, it says since when, with a `warning`. That
//! is a state of the inventory, not of this process, so readiness does not fail on it
//! (like an extraction that finds nothing, which answers 200 with no proxies): a balancer
//! taking the API out of rotation would not give extraction a single proxy back.

use crate::controller_view::ExtractionShare;
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
        let extraction = state.ports().upstreams.extraction().map(extraction_detail);
        return Ok(Json(json!({
            "status": "ready",
            "checks": { "store": "ok", "quota": "ok" },
            "store": identity,
            "extraction": extraction,
        })));
    }
    tracing::warn!(down = ?down, "not ready");
    Err(ApiError::unavailable(
        format!("not ready: {} unreachable", down.join(" and ")),
        state.retry_after(),
    ))
}

/// The `extraction` detail: the split, and a warning while the gateways hold everything.
fn extraction_detail(share: ExtractionShare) -> Value {
    let mut detail = json!(share);
    if share.gateways_hold_all_since_ms.is_some() {
        let warning = if share.share > 0.0 {
            "the gateways hold every usable proxy: extraction has taken its share and finds \
             none until more proxies come or leases end"
        } else {
            "the gateways hold every usable proxy: extraction finds none; set [ownership] \
             extraction_share (or lower per_worker_target) to keep part of the pool for it"
        };
        detail["warning"] = json!(warning);
    }
    detail
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
