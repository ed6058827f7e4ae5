//! `POST /v1/extractions` and `GET /v1/extractions/{id}`.
//!
//! Creating runs the whole chain: authentication (the `Principal` extractor), input checks
//! (the `Idempotency-Key` header, the JSON body, `count`), authorization of the filters, the
//! client's rate-limit policy and its cap on extractions in flight, the `extract` quota and
//! the atomic extraction. Once a request is admitted, the quota charge, the extraction and
//! the settling of the charge run to completion ([`RunToCompletion`]): a client that drops
//! the connection (or a request that times out) cannot cancel them halfway, so the stored
//! result is there for the replay with the same key, which the quota does not charge again.
//!
//! How a charge is settled (`admission::quota`): an extraction the service could not make
//! (store unavailable, or a scan out of budget on a request without filters) is refunded.
//! A scan out of budget on the client's own filters is charged. A keyed one that found too
//! little (or ran out of budget on its filters) is spent, so the next try with the key is
//! charged again instead of scanning for free. A key stays held in the pool for the
//! client's quota window, so once its response can no longer be replayed a reuse is refused
//! (`idempotency_key_expired`) rather than bought again as a replay.

use crate::admission::auth::Principal;
use crate::admission::authorize::authorize_filter;
use crate::admission::quota::{
    QuotaGrant, charge, key_receipt, refund_unserved, request_receipt, settle, spent_receipt,
};
use crate::body::read_json;
use crate::clients::ApiClient;
use crate::completion::RunToCompletion;
use crate::error::{ApiError, ErrorCode};
use crate::request_id::RequestId;
use crate::routes::domain::domain_of;
use crate::routes::idempotency::{REPLAYED, idempotency_key, replayed_value};
use crate::state::ApiState;
use crate::wire::{ExtractionRequestBody, ExtractionView};
use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use proxypool_core::{ExtractOutcome, ExtractRequest, ExtractionId, PoolError, Unavailable};
use proxypool_quota::{Operation, Settlement};
use std::sync::Arc;

/// How far this host's clock (the pool's time) may trail the quota store's, whose clock
/// decides when a receipt's window ends.
pub(crate) const KEY_HOLD_SKEW_MS: u64 = 10_000;

pub(crate) async fn create(
    State(state): State<ApiState>,
    Principal(client): Principal,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let body: ExtractionRequestBody =
        read_json(&headers, body, state.limits().max_body_bytes).await?;
    let prepared = prepare(&state, &client, key, &request_id, body)?;
    let (grant, outcome) = run(&state, client, prepared).await?;
    let view = view_of(&outcome);
    let mut response = Json(view).into_response();
    let headers = response.headers_mut();
    for (name, value) in grant.headers {
        headers.insert(name, value);
    }
    headers.insert(REPLAYED, replayed_value(outcome.replayed));
    Ok(response)
}

/// An extraction whose input is checked and authorized: what is left costs quota.
#[derive(Debug)]
pub(crate) struct Prepared {
    request: ExtractRequest,
    receipt: String,
}

/// The input checks of an extraction (count, filters the client may use, `for_domain`,
/// the request's own rules), before any quota is touched: input errors cost nothing.
pub(crate) fn prepare(
    state: &ApiState,
    client: &ApiClient,
    key: Option<String>,
    request_id: &RequestId,
    body: ExtractionRequestBody,
) -> Result<Prepared, ApiError> {
    let settings = state.extraction();
    if !(1..=settings.max_count).contains(&body.count) {
        return Err(ApiError::invalid(format!(
            "count: must be between 1 and {}",
            settings.max_count
        )));
    }
    let for_domain = body
        .for_domain
        .as_deref()
        .map(|raw| domain_of("for_domain", raw))
        .transpose()?;
    let mut filter = body.filters;
    authorize_filter(client, &mut filter)?;

    let request = ExtractRequest {
        project: client.project_id(),
        for_domain,
        client: client.id.clone(),
        idempotency_key: key.clone(),
        request_id: request_id.to_string(),
        count: body.count,
        mode: body.mode,
        filter,
        min_health_freshness_ms: body.min_health_freshness_ms,
        reserve_for_gateway: settings.reserve_for_gateway,
        idempotency_ttl_ms: settings.idempotency_ttl.as_ms(),
        // A quota receipt lives at most one window: holding the key as long (plus the clock
        // skew allowed between this host and the quota store) means a key the quota admits
        // as a replay can never buy a second extraction.
        key_held_ms: client.quota.limits(Operation::Extract).window_ms() + KEY_HOLD_SKEW_MS,
    };
    request
        .validate()
        .map_err(|error| ApiError::from_pool(error, state.retry_after()))?;
    let receipt = match &key {
        Some(key) => key_receipt(key),
        None => request_receipt(request_id.as_str()),
    };
    Ok(Prepared { request, receipt })
}

/// Runs a prepared extraction under the client's in-flight cap: the quota charge, the
/// extraction and the settling of the charge, to completion. A keyed one first waits for
/// the key's earlier attempt, if one still runs (`admission::key_turns`).
pub(crate) async fn run(
    state: &ApiState,
    client: Arc<ApiClient>,
    prepared: Prepared,
) -> Result<(QuotaGrant, ExtractOutcome), ApiError> {
    let settings = state.extraction();
    let slot = state
        .in_flight()
        .acquire(&client.id, settings.max_in_flight_per_client)?;
    let turn = match &prepared.request.idempotency_key {
        Some(key) => Some(state.key_turns().take(&client.id, key).await),
        None => None,
    };
    let state = state.clone();
    RunToCompletion::new(async move {
        let _slot = slot;
        let _turn = turn;
        admit_and_extract(state, client, prepared.receipt, prepared.request).await
    })
    .await
}

/// The answer's body, counted in the metrics.
pub(crate) fn view_of(outcome: &ExtractOutcome) -> ExtractionView {
    let replayed = outcome.replayed;
    if !replayed {
        crate::metrics::extracted_by_upstream(outcome.response.client.as_str(), &outcome.response);
    }
    let view = ExtractionView::from(&outcome.response);
    crate::metrics::extraction(
        if replayed { "replayed" } else { "created" },
        if replayed {
            0
        } else {
            u64::from(view.returned)
        },
    );
    view
}

/// Quota, then the extraction, then the settling of the charge. Errors after the admission
/// carry the rate-limit headers too: the response is quota-governed either way.
async fn admit_and_extract(
    state: ApiState,
    client: Arc<ApiClient>,
    receipt: String,
    request: ExtractRequest,
) -> Result<(QuotaGrant, ExtractOutcome), ApiError> {
    let grant = charge(&state, &client, Operation::Extract, &receipt).await?;
    let keyed = request.idempotency_key.is_some();
    let narrowed = request.narrowed_by_client();
    let request_id = request.request_id.clone();
    let now = state.now();
    let extracted = crate::metrics::timed(
        "extractor",
        "extract",
        state.ports().extractor.extract(now, request),
    )
    .await;
    match extracted {
        Ok(outcome) => Ok((grant, outcome)),
        Err(error) => {
            if let Some(settlement) = settlement_for(&error, &request_id, keyed, narrowed) {
                settle(&state, &grant, settlement).await;
            }
            let error = ApiError::from_pool(error, state.retry_after());
            crate::metrics::extraction(
                match error.code {
                    ErrorCode::InsufficientInventory => "insufficient",
                    ErrorCode::IdempotencyConflict => "conflict",
                    ErrorCode::IdempotencyExpired => "expired",
                    ErrorCode::Unavailable => "unavailable",
                    _ => "rejected",
                },
                0,
            );
            Err(error.with_headers(grant.headers))
        }
    }
}

/// What a failed extraction's charge becomes: the service's failures are refunded; a keyed
/// request that found too little keeps its charge under its request id, freeing the key.
/// (Without a key the receipt is the request id itself, which never comes back.) A scan
/// that ran out of budget on a request the client narrowed is charged like one that found
/// too little: otherwise a filter that matches almost nothing would make the store scan its
/// whole budget on every call for free.
fn settlement_for(
    error: &PoolError,
    request_id: &str,
    keyed: bool,
    narrowed: bool,
) -> Option<Settlement> {
    let spent = || {
        keyed.then(|| Settlement::Spend {
            spent_as: spent_receipt(request_id),
        })
    };
    match error {
        PoolError::Unavailable(Unavailable::ScanBudget) if narrowed => spent(),
        PoolError::Unavailable(_) => Some(Settlement::Refund),
        PoolError::InsufficientInventory { .. } => spent(),
        _ => None,
    }
}

pub(crate) async fn get(
    State(state): State<ApiState>,
    Principal(client): Principal,
    Extension(request_id): Extension<RequestId>,
    Path(raw_id): Path<String>,
) -> Result<Response, ApiError> {
    // A malformed id is as unknown as a well-formed one that is not ours: same answer.
    let id = ExtractionId::new(&raw_id).map_err(|_| not_found())?;
    let receipt = request_receipt(request_id.as_str());
    let grant = charge(&state, &client, Operation::Inspect, &receipt).await?;
    let now = state.now();
    let found = crate::metrics::timed(
        "extractor",
        "get_extraction",
        state.ports().extractor.get_extraction(now, &client.id, &id),
    )
    .await;
    let found = found.map_err(|error| match error {
        PoolError::NotFound => not_found().with_headers(grant.headers.clone()),
        error => {
            ApiError::from_pool(error, state.retry_after()).with_headers(grant.headers.clone())
        }
    });
    let response = refund_unserved(&state, &grant, found).await?;
    let mut http = Json(ExtractionView::from(&response)).into_response();
    for (name, value) in grant.headers {
        http.headers_mut().insert(name, value);
    }
    Ok(http)
}

fn not_found() -> ApiError {
    ApiError::not_found("no such extraction")
}
