//! `GET /v1/me`, `GET /v1/upstreams` and `GET /v1/upstreams/{id}/inventory`.
//!
//! The status list comes from the controller's in-memory reconciler state, so it is not
//! quota-metered; the inventory is a bounded scan in the store, so it is (`inspect`).
//! A client restricted to some upstreams sees only those.

use crate::admission::auth::Principal;
use crate::admission::authorize::authorize_upstream;
use crate::admission::quota::{charge, refund_unserved, request_receipt};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::state::ApiState;
use crate::wire::{InventoryBody, MeBody};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use proxypool_core::UpstreamId;
use proxypool_quota::Operation;
use serde_json::json;

pub(crate) async fn me(Principal(client): Principal) -> Json<MeBody> {
    Json(MeBody {
        client: client.id.to_string(),
        project: client.project.clone(),
        admin: client.admin,
        allowed_upstreams: client.allowed_upstreams.clone(),
        allowed_regions: client.allowed_regions.clone(),
    })
}

pub(crate) async fn list(
    State(state): State<ApiState>,
    Principal(client): Principal,
) -> Result<Response, ApiError> {
    let upstreams = crate::metrics::timed(
        "upstreams",
        "upstreams",
        state.ports().upstreams.upstreams(),
    )
    .await
    .map_err(|error| ApiError::from_pool(error, state.retry_after()))?;
    let visible: Vec<_> = upstreams
        .into_iter()
        .filter(|upstream| client.may_use_upstream(&upstream.id))
        .collect();
    let store = state.ports().upstreams.store_status();
    Ok(Json(json!({ "upstreams": visible, "store": store })).into_response())
}

pub(crate) async fn inventory(
    State(state): State<ApiState>,
    Principal(client): Principal,
    Extension(request_id): Extension<RequestId>,
    Path(raw_id): Path<String>,
) -> Result<Response, ApiError> {
    let unknown = || ApiError::not_found("no such upstream");
    let id = UpstreamId::new(&raw_id).map_err(|_| unknown())?;
    // Authorization before existence: a forbidden client learns nothing about which
    // upstreams exist.
    authorize_upstream(&client, &id)?;
    let known = state
        .ports()
        .upstreams
        .upstream(&id)
        .await
        .map_err(|error| ApiError::from_pool(error, state.retry_after()))?;
    if known.is_none() {
        return Err(unknown());
    }
    let receipt = request_receipt(request_id.as_str());
    let grant = charge(&state, &client, Operation::Inspect, &receipt).await?;
    let now = state.now();
    let view = crate::metrics::timed(
        "inventory",
        "inventory",
        state.ports().inventory.inventory(now, &id),
    )
    .await
    .map_err(|error| {
        ApiError::from_pool(error, state.retry_after()).with_headers(grant.headers.clone())
    });
    let view = refund_unserved(&state, &grant, view).await?;
    let mut response = Json(InventoryBody::from(view)).into_response();
    for (name, value) in grant.headers {
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}
