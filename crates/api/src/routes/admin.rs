//! Admin routes (admin tokens only): `GET /v1/admin/workers`,
//! `POST /v1/admin/workers/{id}/drain`, and `POST /v1/admin/reload` (re-read the
//! configuration file now) / `GET /v1/admin/reload` (how the last reload went).
//!
//! Draining moves every active assignment of the worker to DRAINING (the ownership port's
//! `begin_drain`): the worker's next snapshot no longer lists those proxies, its open
//! connections finish, and the ownership manager releases each proxy once the worker
//! reports it idle. With a [`crate::WorkerCordon`] the controller also stops assigning the
//! worker new proxies. One call drains at most `drain_batch` assignments and says `more`.

use crate::admission::auth::AdminPrincipal;
use crate::admission::quota::{QuotaGrant, charge, key_receipt, refund_unserved, request_receipt};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::routes::extractions::idempotency_key;
use crate::state::ApiState;
use crate::wire::{DrainBody, WorkerBody, WorkersBody};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use proxypool_core::{Conflict, PoolError, WorkerId};
use proxypool_quota::Operation;

pub(crate) async fn list_workers(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
) -> Result<Response, ApiError> {
    let receipt = request_receipt(request_id.as_str());
    let grant = charge(&state, &client, Operation::Inspect, &receipt).await?;
    let listed = list_charged(&state, &grant).await;
    refund_unserved(&state, &grant, listed).await
}

async fn list_charged(state: &ApiState, grant: &QuotaGrant) -> Result<Response, ApiError> {
    let fail = |error| failed(state, grant, error);
    let now = state.now();
    let limit = state.extraction().max_workers_listed;
    let runtime = &state.ports().runtime;
    // One more than the limit tells whether the listing is complete.
    let mut sessions = crate::metrics::timed(
        "runtime",
        "live_sessions",
        runtime.live_sessions(now, limit + 1),
    )
    .await
    .map_err(fail)?;
    let truncated = sessions.len() > limit;
    sessions.truncate(limit);
    let mut workers = Vec::with_capacity(sessions.len());
    for session in &sessions {
        let report =
            crate::metrics::timed("runtime", "runtime", runtime.runtime(now, &session.worker))
                .await
                .map_err(fail)?;
        workers.push(WorkerBody::new(session, report.as_ref()));
    }
    Ok(with_grant(
        Json(WorkersBody { workers, truncated }),
        grant.clone(),
    ))
}

/// Re-reads the configuration of this process: the answer is the reload's report (what
/// applied live, what needs a restart, or why the file was refused whole).
pub(crate) async fn reload(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
) -> Result<Response, ApiError> {
    let grant = charge(
        &state,
        &client,
        Operation::Admin,
        &request_receipt(request_id.as_str()),
    )
    .await?;
    let reloader = state
        .reloader()
        .ok_or_else(|| ApiError::not_found("this process has no configuration file to reload"))?;
    let report = reloader.reload().await;
    Ok(with_grant(Json(report), grant))
}

/// The last reload's report.
pub(crate) async fn last_reload(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
) -> Result<Response, ApiError> {
    let grant = charge(
        &state,
        &client,
        Operation::Inspect,
        &request_receipt(request_id.as_str()),
    )
    .await?;
    let reloader = state
        .reloader()
        .ok_or_else(|| ApiError::not_found("this process has no configuration file to reload"))?;
    Ok(with_grant(Json(reloader.last()), grant))
}

pub(crate) async fn drain_worker(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
    Path(raw_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let worker = WorkerId::new(&raw_id).map_err(|_| no_such_worker())?;
    let receipt = match idempotency_key(&headers)? {
        Some(key) => key_receipt(&key),
        None => request_receipt(request_id.as_str()),
    };
    let grant = charge(&state, &client, Operation::Admin, &receipt).await?;
    let drained = drain_charged(&state, &grant, worker).await;
    refund_unserved(&state, &grant, drained).await
}

async fn drain_charged(
    state: &ApiState,
    grant: &QuotaGrant,
    worker: WorkerId,
) -> Result<Response, ApiError> {
    let fail = |error| failed(state, grant, error);
    let now = state.now();
    let batch = state.extraction().drain_batch;
    let ownership = &state.ports().ownership;

    let session = crate::metrics::timed(
        "runtime",
        "session",
        state.ports().runtime.session(now, &worker),
    )
    .await
    .map_err(fail)?;
    // One more than the batch tells whether a second call is needed.
    let owned = crate::metrics::timed(
        "ownership",
        "owned_by",
        ownership.owned_by(now, &worker, batch + 1),
    )
    .await
    .map_err(fail)?;
    let already = crate::metrics::timed(
        "ownership",
        "draining_of",
        ownership.draining_of(now, &worker, batch),
    )
    .await
    .map_err(fail)?;
    if session.is_none() && owned.is_empty() && already.is_empty() {
        return Err(no_such_worker().with_headers(grant.headers.clone()));
    }

    let cordoned = match state.cordon() {
        Some(cordon) => {
            cordon.cordon(&worker).await.map_err(fail)?;
            true
        }
        None => false,
    };
    let more = owned.len() > batch;
    let mut drained = 0u64;
    for owned_proxy in owned.iter().take(batch) {
        let assignment = &owned_proxy.assignment;
        let started = crate::metrics::timed(
            "ownership",
            "begin_drain",
            ownership.begin_drain(now, &assignment.proxy_id, &worker, assignment.epoch),
        )
        .await;
        match started {
            Ok(_) => drained += 1,
            // The lease lapsed or moved between the listing and this call: nothing to drain.
            Err(PoolError::Conflict(Conflict::Ownership | Conflict::LeaseExpired))
            | Err(PoolError::NotFound) => {}
            Err(error) => return Err(fail(error)),
        }
    }
    let draining = crate::metrics::timed(
        "ownership",
        "draining_of",
        ownership.draining_of(now, &worker, batch),
    )
    .await
    .map_err(fail)?
    .len() as u64;
    tracing::info!(worker = %worker, drained, draining, more, cordoned, "worker drain requested");
    Ok(with_grant(
        Json(DrainBody {
            worker,
            drained,
            draining,
            more,
            cordoned,
        }),
        grant.clone(),
    ))
}

fn no_such_worker() -> ApiError {
    ApiError::not_found("no such worker")
}

fn failed(state: &ApiState, grant: &QuotaGrant, error: PoolError) -> ApiError {
    ApiError::from_pool(error, state.retry_after()).with_headers(grant.headers.clone())
}

fn with_grant(body: impl IntoResponse, grant: QuotaGrant) -> Response {
    let mut response = body.into_response();
    for (name, value) in grant.headers {
        response.headers_mut().insert(name, value);
    }
    response
}
