//! `GET /v1/usage`: who used how much, per client and upstream (`proxypool_core::usage`).
//!
//! A client sees its own usage; an admin sees every configured client's, or one with
//! `?client=ID`. The numbers live in the activity pool, accounted there when it accepted
//! the gateways' runtime reports and made the extractions, so every controller answers
//! the same. Charged to the `inspect` quota.

use crate::admission::auth::Principal;
use crate::admission::quota::{charge, refund_unserved, request_receipt};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::state::ApiState;
use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::response::{IntoResponse, Response};
use proxypool_core::ClientId;
use proxypool_core::usage::{HOUR_MS, MINUTE_MS};
use proxypool_quota::Operation;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    client: Option<String>,
}

pub(crate) async fn usage(
    State(state): State<ApiState>,
    Principal(caller): Principal,
    Extension(request_id): Extension<RequestId>,
    query: Result<Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) =
        query.map_err(|_| ApiError::invalid("query: only client=ID is understood"))?;
    let clients: Vec<ClientId> = match (&query.client, caller.admin) {
        (None, false) => vec![caller.id.clone()],
        (None, true) => state
            .clients()
            .clients()
            .iter()
            .map(|client| client.id.clone())
            .collect(),
        (Some(raw), admin) => {
            let id =
                ClientId::new(raw).map_err(|_| ApiError::invalid("client: not a client id"))?;
            if !admin && id != caller.id {
                return Err(ApiError::forbidden("a client sees only its own usage"));
            }
            vec![id]
        }
    };
    let receipt = request_receipt(request_id.as_str());
    let grant = charge(&state, &caller, Operation::Inspect, &receipt).await?;
    let now = state.now();
    let read = crate::metrics::timed("usage", "usage", state.ports().usage.usage(now, &clients))
        .await
        .map_err(|error| {
            ApiError::from_pool(error, state.retry_after()).with_headers(grant.headers.clone())
        });
    let usage = refund_unserved(&state, &grant, read).await?;
    let mut response = Json(json!({
        "as_of_ms": now,
        "minute_ms": MINUTE_MS,
        "hour_ms": HOUR_MS,
        "clients": usage,
    }))
    .into_response();
    for (name, value) in grant.headers {
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}
