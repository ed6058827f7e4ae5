//! The worker control API handlers (paths and semantics: `proxypool_core::control`).

use super::body::read_json;
use super::error::ApiError;
use super::request_id::RequestId;
use super::state::ControlState;
use crate::ownership::release_worker;
use crate::snapshot::PollOutcome;
use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use proxypool_core::control::{RegisterSession, ReportAck, SessionGrant, SnapshotAck};
use proxypool_core::cooldown_merge::drop_unknown_scopes;
use proxypool_core::fleet::FleetList;
use proxypool_core::runtime::validate_session_id;
use proxypool_core::{CooldownReport, ReportOutcome, RuntimeReport, WorkerId};
use proxypool_snapshot::CONTROL_PROTOCOL;
use serde::Deserialize;
use std::collections::HashSet;
use std::time::Duration;

/// The worker a `/workers/{worker}/...` request names, once its token may act for it.
fn authorized_worker(
    state: &ControlState,
    headers: &HeaderMap,
    path: Result<Path<String>, PathRejection>,
    rid: &RequestId,
) -> Result<WorkerId, ApiError> {
    let Path(raw) = path.map_err(|_| ApiError::invalid("invalid path", rid))?;
    let worker = WorkerId::new(&raw).map_err(|e| ApiError::invalid(e.to_string(), rid))?;
    state.tokens.authorize(headers, &worker, rid)?;
    Ok(worker)
}

/// `POST /control/v1/sessions`
pub(super) async fn register(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<SessionGrant>, ApiError> {
    // The token first, from the headers: an unauthenticated body is never read.
    let token = state.tokens.authenticate(&headers, &rid)?;
    let request: RegisterSession = read_json(
        &headers,
        body,
        state.limits.max_body_bytes,
        state.limits.body_read_timeout.as_duration(),
        &rid,
    )
    .await?;
    token.may_act_for(&request.worker, &rid)?;
    if request.protocol != CONTROL_PROTOCOL {
        return Err(ApiError::protocol_mismatch(request.protocol, &rid));
    }
    let ttl = state.snapshot.session_ttl.as_ms();
    let session = state
        .pool
        .open_session(state.clock.now(), &request.worker, &request.session_id, ttl)
        .await
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    tracing::info!(worker = %request.worker, version = ?request.version, "worker session registered");
    // A new worker should get proxies now, not at the next round.
    state.wake_ownership.notify_one();
    state.publisher.changes().notify();
    Ok(Json(SessionGrant {
        worker: session.worker,
        session_id: session.session_id,
        expires_at_ms: session.expires_at_ms,
        session_ttl_ms: ttl,
        report_interval_ms: state.snapshot.report_interval.as_ms(),
        snapshot_wait_ms: state.snapshot.long_poll_wait.as_ms(),
        protocol: CONTROL_PROTOCOL,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotQuery {
    session_id: String,
    #[serde(default)]
    after_version: u64,
    #[serde(default)]
    wait_ms: u64,
    /// The worker control protocol the gateway speaks: a gateway older than protocol
    /// versions sends none and could not read the answer, so it is refused with a message.
    #[serde(default)]
    protocol: u32,
}

/// `GET /control/v1/workers/{worker}/snapshot?session_id=S&after_version=V&wait_ms=W&protocol=P`
pub(super) async fn snapshot(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<SnapshotQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let worker = authorized_worker(&state, &headers, path, &rid)?;
    let Query(query) = query.map_err(|e| ApiError::invalid(e.body_text(), &rid))?;
    if query.protocol != CONTROL_PROTOCOL {
        return Err(ApiError::protocol_mismatch(query.protocol, &rid));
    }
    validate_session_id(&query.session_id).map_err(|e| ApiError::from_pool(e, &rid))?;
    let outcome = state
        .publisher
        .poll(
            &worker,
            &query.session_id,
            query.after_version,
            Duration::from_millis(query.wait_ms),
        )
        .await
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    Ok(match outcome {
        PollOutcome::Update(update) => {
            let mut response = Json(update).into_response();
            // It carries upstream proxy credentials.
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        PollOutcome::NotModified => StatusCode::NO_CONTENT.into_response(),
    })
}

/// `POST /control/v1/workers/{worker}/snapshot-ack`
pub(super) async fn ack(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let worker = authorized_worker(&state, &headers, path, &rid)?;
    let request: SnapshotAck = read_json(
        &headers,
        body,
        state.limits.max_body_bytes,
        state.limits.body_read_timeout.as_duration(),
        &rid,
    )
    .await?;
    state
        .pool
        .ack_snapshot(
            state.clock.now(),
            &worker,
            &request.session_id,
            request.snapshot,
        )
        .await
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /control/v1/workers/{worker}/reports`: one store call takes the report and renews
/// the session. Entries on proxies the worker no longer owns do not refuse the report;
/// the answer names them (`stale_proxies`) so the gateway stops using them.
///
/// Its cooldown changes may write the shared scope and the configured projects' only: a
/// change in any other scope is dropped (counted as `unknown_scope`, the scopes logged),
/// not refused with the report. A project removed by a reload may still be in a gateway's
/// ledger until its next snapshot, and a refused report would cost that gateway its
/// counters and its session renewal, for changes nobody can use anyway.
pub(super) async fn report(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Json<ReportAck>, ApiError> {
    let worker = authorized_worker(&state, &headers, path, &rid)?;
    let report: RuntimeReport = read_json(
        &headers,
        body,
        state.limits.max_report_bytes,
        state.limits.body_read_timeout.as_duration(),
        &rid,
    )
    .await?;
    if report.worker != worker {
        return Err(ApiError::invalid(
            "the report's worker does not match the path",
            &rid,
        ));
    }
    // Nothing of a malformed report may reach the store, its cooldowns included.
    report
        .validate()
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    let mut cooldowns = report.cooldowns.clone();
    let endpoint = report.fleet.clone();
    let unknown_scope = {
        let config = state.config.load();
        let projects: HashSet<&str> = config.clients.iter().map(|c| c.project.as_str()).collect();
        drop_unknown_scopes(&mut cooldowns, |project| {
            projects.contains(project.as_str())
        })
    };
    if unknown_scope.dropped > 0 {
        tracing::warn!(
            %worker, dropped = unknown_scope.dropped, scopes = ?unknown_scope.named,
            "report's cooldowns named projects that are not configured; dropped"
        );
    }
    let ttl = state.snapshot.session_ttl.as_ms();
    let now = state.clock.now();
    let receipt = state
        .pool
        .report_runtime(now, report, ttl)
        .await
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    // After the report is taken (a fenced or out-of-order one brings no cooldowns in) and
    // before the answer: a failure here fails the call, the gateway sends the report
    // again, the store answers it as a replay and the cooldowns are merged then, which
    // the merge rule makes harmless if some were already applied.
    let applied = if cooldowns.is_empty() {
        CooldownReport::default()
    } else {
        state
            .pool
            .apply_cooldowns(now, &cooldowns)
            .await
            .map_err(|e| ApiError::from_pool(e, &rid))?
    };
    crate::metrics::cooldown_changes(&applied, unknown_scope.dropped);
    if !receipt.stale_proxies.is_empty() {
        tracing::debug!(
            %worker, stale = receipt.stale_proxies.len(),
            "report named proxies the worker no longer owns"
        );
    }
    // After the report is stored, so a gateway sees itself in the answer to its first
    // report; the list is not worth failing a taken report for.
    let fleet = match state
        .fleet
        .members(&state.pool, now, Some((&worker, endpoint.as_ref())))
        .await
    {
        Ok(members) => members,
        Err(error) => {
            tracing::warn!(%worker, %error, "listing the fleet failed; answering the last list");
            state.fleet.last()
        }
    };
    Ok(Json(ReportAck {
        fleet: fleet.as_ref().clone(),
        outcome: match receipt.outcome {
            ReportOutcome::Accepted => "accepted",
            ReportOutcome::Replayed => "replayed",
        }
        .to_owned(),
        session_expires_at_ms: receipt.session_expires_at_ms,
        stale_proxies: receipt.stale_proxies,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FleetQuery {
    /// The worker the caller is: the path names none, and a token may be good for some
    /// worker ids only.
    worker: String,
}

/// `GET /control/v1/fleet?worker=W`: the fleet's live members ([`FleetList`]), for a token
/// good for `W`.
pub(super) async fn fleet(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    query: Result<Query<FleetQuery>, QueryRejection>,
) -> Result<Json<FleetList>, ApiError> {
    // The token first: an anonymous caller learns nothing, not even what the query lacks.
    let token = state.tokens.authenticate(&headers, &rid)?;
    let Query(query) = query.map_err(|e| ApiError::invalid(e.body_text(), &rid))?;
    let worker =
        WorkerId::new(&query.worker).map_err(|e| ApiError::invalid(e.to_string(), &rid))?;
    token.may_act_for(&worker, &rid)?;
    let members = state
        .fleet
        .members(&state.pool, state.clock.now(), None)
        .await
        .map_err(|e| ApiError::from_pool(e, &rid))?;
    Ok(Json(FleetList {
        members: members.as_ref().clone(),
    }))
}

/// `DELETE /control/v1/workers/{worker}/sessions/{session_id}`: a clean stop. Closing the
/// current session also releases the worker's proxies (see [`release_worker`]); a fenced
/// (stale) session id is refused and releases nothing.
pub(super) async fn close(
    State(state): State<ControlState>,
    rid: RequestId,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path((raw_worker, session_id)) =
        path.map_err(|_| ApiError::invalid("invalid path", &rid))?;
    let worker = WorkerId::new(&raw_worker).map_err(|e| ApiError::invalid(e.to_string(), &rid))?;
    state.tokens.authorize(&headers, &worker, &rid)?;
    validate_session_id(&session_id).map_err(|e| ApiError::from_pool(e, &rid))?;
    let now = state.clock.now();
    let store_err = |e| ApiError::from_pool(e, &rid);
    // Closing a session that is already gone succeeds, so "was this the live session?"
    // is asked first: only the worker's current session may hand its proxies back.
    let current = state
        .pool
        .session(now, &worker)
        .await
        .map_err(store_err)?
        .is_some_and(|s| s.session_id == session_id);
    // Read before the close: anything assigned after it belongs to a newer session.
    let up_to_epoch = state.pool.current_epoch(now).await.map_err(store_err)?;
    state
        .pool
        .close_session(now, &worker, &session_id)
        .await
        .map_err(store_err)?;
    tracing::info!(%worker, "worker session closed");
    // A closed session leaves the fleet now, not when the cached list ages out.
    state.fleet.invalidate();
    if current {
        // Best effort: the session is closed either way, and whatever is not released
        // here comes back when its lease lapses.
        match release_worker(state.pool.as_ref(), now, &worker, up_to_epoch).await {
            Ok(done) => tracing::info!(
                %worker, released = done.released, skipped = done.skipped,
                "stopped worker's proxies released"
            ),
            Err(e) => tracing::warn!(%worker, "releasing a stopped worker's proxies failed: {e}"),
        }
        // Reassign the released proxies now, not at the next round.
        state.wake_ownership.notify_one();
    }
    state.publisher.changes().notify();
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /healthz`: the process answers.
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// Any other path.
pub(super) async fn not_found(rid: RequestId) -> ApiError {
    ApiError::coded(proxypool_edge::Code::NOT_FOUND, "no such route", &rid)
}
