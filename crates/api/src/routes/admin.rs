//! Admin routes (admin tokens only): `GET /v1/admin/workers`,
//! `POST /v1/admin/workers/{id}/cordon|drain|uncordon`, and `POST /v1/admin/reload`
//! (re-read the configuration file now) / `GET /v1/admin/reload` (how the last reload
//! went).
//!
//! A worker's mode is stored (`AdminStore`), shared by every controller: `cordoned` gets no
//! new leases, `draining` also hands every lease back through the drain protocol (the
//! worker's next snapshot no longer lists them, its open connections finish, and the
//! ownership manager releases each proxy once the worker reports it idle), `active` is the
//! default. The leader's ownership manager does the work; the route only records the mode.

use crate::admission::auth::AdminPrincipal;
use crate::admission::quota::{
    QuotaGrant, charge, charge_request, key_receipt, refund_unserved, request_receipt,
};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::routes::extractions::KEY_HOLD_SKEW_MS;
use crate::routes::idempotency::{REPLAYED, idempotency_key, replayed_value};
use crate::state::ApiState;
use crate::wire::{WorkerBody, WorkerModeBody, WorkersBody};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use proxypool_core::{KeyedCall, PoolError, WorkerId, WorkerMode};
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
    let modes = crate::metrics::timed("admin", "worker_modes", state.ports().admin.worker_modes())
        .await
        .map_err(fail)?;
    let mode_of = |worker: &WorkerId| {
        modes
            .iter()
            .find(|m| &m.worker == worker)
            .map_or(WorkerMode::Active, |m| m.mode)
    };
    let mut workers = Vec::with_capacity(sessions.len());
    for session in &sessions {
        let report =
            crate::metrics::timed("runtime", "runtime", runtime.runtime(now, &session.worker))
                .await
                .map_err(fail)?;
        workers.push(WorkerBody::new(
            session,
            report.as_ref(),
            mode_of(&session.worker),
        ));
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
    let grant = charge_request(&state, &client, Operation::Admin, request_id.as_str()).await?;
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
    let grant = charge_request(&state, &client, Operation::Inspect, request_id.as_str()).await?;
    let reloader = state
        .reloader()
        .ok_or_else(|| ApiError::not_found("this process has no configuration file to reload"))?;
    Ok(with_grant(Json(reloader.last()), grant))
}

/// `POST /v1/admin/workers/{id}/cordon`: no new leases; the worker keeps what it holds.
pub(crate) async fn cordon_worker(
    state: State<ApiState>,
    admin: AdminPrincipal,
    request_id: Extension<RequestId>,
    id: Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_mode(state, admin, request_id, id, headers, WorkerMode::Cordoned).await
}

/// `POST /v1/admin/workers/{id}/drain`: no new leases, and every lease goes back through
/// the drain protocol (open connections finish first).
pub(crate) async fn drain_worker(
    state: State<ApiState>,
    admin: AdminPrincipal,
    request_id: Extension<RequestId>,
    id: Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_mode(state, admin, request_id, id, headers, WorkerMode::Draining).await
}

/// `POST /v1/admin/workers/{id}/uncordon`: the worker takes new leases again.
pub(crate) async fn uncordon_worker(
    state: State<ApiState>,
    admin: AdminPrincipal,
    request_id: Extension<RequestId>,
    id: Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_mode(state, admin, request_id, id, headers, WorkerMode::Active).await
}

/// The mode lives in the store, so every controller answers the same and a failover keeps
/// it; the leading controller's ownership manager acts on it (the drain logic is there,
/// not here) within one ownership interval, at once when it runs in this process.
async fn set_mode(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
    Path(raw_id): Path<String>,
    headers: HeaderMap,
    mode: WorkerMode,
) -> Result<Response, ApiError> {
    let worker = WorkerId::new(&raw_id).map_err(|_| no_such_worker())?;
    let key = idempotency_key(&headers)?;
    let receipt = match &key {
        Some(key) => key_receipt(key),
        None => request_receipt(request_id.as_str()),
    };
    let grant = charge(&state, &client, Operation::Admin, &receipt).await?;
    // The answer is held as long as the quota remembers the key, so a reuse the quota
    // admits without a charge is always a replay, never a second action.
    let call = key.map(|key| KeyedCall {
        client: client.id.clone(),
        key,
        held_ms: client.quota.limits(Operation::Admin).window_ms() + KEY_HOLD_SKEW_MS,
    });
    let changed = set_mode_charged(&state, &grant, worker, mode, call.as_ref()).await;
    refund_unserved(&state, &grant, changed).await
}

async fn set_mode_charged(
    state: &ApiState,
    grant: &QuotaGrant,
    worker: WorkerId,
    mode: WorkerMode,
    call: Option<&KeyedCall>,
) -> Result<Response, ApiError> {
    let fail = |error| failed(state, grant, error);
    let now = state.now();
    let limit = state.extraction().drain_batch;
    let ownership = &state.ports().ownership;
    let known =
        |modes: &[proxypool_core::WorkerModeRecord]| modes.iter().any(|m| m.worker == worker);

    let session = crate::metrics::timed(
        "runtime",
        "session",
        state.ports().runtime.session(now, &worker),
    )
    .await
    .map_err(fail)?;
    let serving = crate::metrics::timed(
        "ownership",
        "owned_by",
        ownership.owned_by(now, &worker, limit),
    )
    .await
    .map_err(fail)?
    .len() as u64;
    let draining = crate::metrics::timed(
        "ownership",
        "draining_of",
        ownership.draining_of(now, &worker, limit),
    )
    .await
    .map_err(fail)?
    .len() as u64;
    // A worker nobody has heard of is most likely a typo: refuse rather than remember it.
    // One that has a mode already may always be changed (e.g. uncordoned while stopped).
    if session.is_none() && serving == 0 && draining == 0 {
        let modes =
            crate::metrics::timed("admin", "worker_modes", state.ports().admin.worker_modes())
                .await
                .map_err(fail)?;
        if !known(&modes) {
            return Err(no_such_worker().with_headers(grant.headers.clone()));
        }
    }
    let admin = &state.ports().admin;
    let (record, replayed) = match call {
        Some(call) => {
            let set = crate::metrics::timed(
                "admin",
                "set_worker_mode_keyed",
                admin.set_worker_mode_keyed(now, &worker, mode, call),
            )
            .await
            .map_err(fail)?;
            (set.record, Some(set.replayed))
        }
        None => {
            let record = crate::metrics::timed(
                "admin",
                "set_worker_mode",
                admin.set_worker_mode(now, &worker, mode),
            )
            .await
            .map_err(fail)?;
            (record, None)
        }
    };
    if replayed == Some(true) {
        tracing::info!(worker = %worker, mode = mode.as_str(), "worker mode change replayed");
    } else {
        if let Some(wake) = state.ownership_wake() {
            wake.wake();
        }
        tracing::info!(worker = %worker, mode = mode.as_str(), serving, draining, "worker mode set");
    }
    let mut response = with_grant(
        Json(WorkerModeBody {
            worker,
            mode: record.mode,
            since: record.since_ms,
            serving,
            draining,
        }),
        grant.clone(),
    );
    if let Some(replayed) = replayed {
        response
            .headers_mut()
            .insert(REPLAYED, replayed_value(replayed));
    }
    Ok(response)
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
