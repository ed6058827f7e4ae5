//! The durable quota gate (`proxypool-quota`), the last layer before a mutation, and the
//! settling of its charge once the mutation has run.
//!
//! One bucket per (project, client, operation), charged under that client's limits
//! ([`ApiClient::quota`]), after the client's rate-limit policy (`policy`). The receipt
//! is the request's `Idempotency-Key` when it has one, else the server-generated request
//! id, each in a namespace of its own ([`key_receipt`], [`request_receipt`]), so a key can
//! never pre-spend the receipt of a later request without one. A replay after a lost
//! response is admitted without a second charge; a request without a key is charged every
//! time. Answers follow the HTTP mapping in `quota_http`: 429 `quota_exceeded` with
//! `Retry-After` and the draft `RateLimit-Policy`/`RateLimit` headers, 503 `unavailable`
//! when the store cannot decide (fail closed).
//!
//! Once the work has run, [`settle`] settles what this request was charged (only a
//! request that charged its receipt may; a replay never does): a request the service
//! could not serve is refunded, and a keyed extraction that found nothing has its charge
//! spent under its request id, so the same key is charged again next time instead of
//! buying free scans.

use crate::admission::quota_board::Seen;
use crate::admission::quota_http::{Header, HttpRejection, QuotaHttp, for_decision, for_invalid};
use crate::clients::ApiClient;
use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::http::{HeaderName, HeaderValue};
use proxypool_quota::{Charge, Operation, QuotaCommand, QuotaDecision, SettleOutcome, Settlement};

/// An admission: the rate-limit headers to put on the response, and the charge it made
/// (none for a replay).
#[derive(Debug, Clone, Default)]
pub(crate) struct QuotaGrant {
    pub headers: Vec<(HeaderName, HeaderValue)>,
    charge: Option<Charge>,
}

/// The receipt of a request with an `Idempotency-Key`.
pub(crate) fn key_receipt(key: &str) -> String {
    format!("key:{key}")
}

/// The receipt of a request without one: its server-generated request id.
pub(crate) fn request_receipt(request_id: &str) -> String {
    format!("req:{request_id}")
}

/// The receipt a spent charge is kept under: the request id that spent it.
pub(crate) fn spent_receipt(request_id: &str) -> String {
    format!("spent:{request_id}")
}

/// [`charge`] for a request without an idempotency key: under its request id's receipt.
pub(crate) async fn charge_request(
    state: &ApiState,
    client: &ApiClient,
    operation: Operation,
    request_id: &str,
) -> Result<QuotaGrant, ApiError> {
    charge(state, client, operation, &request_receipt(request_id)).await
}

/// Applies the client's rate-limit policy, then consumes one unit of `operation` for
/// `client` under `receipt`, within the client's own limits for that operation.
pub(crate) async fn charge(
    state: &ApiState,
    client: &ApiClient,
    operation: Operation,
    receipt: &str,
) -> Result<QuotaGrant, ApiError> {
    if let Err(denied) = state.policies().check(&client.id) {
        let now = state.now();
        state.quota_board().record(
            &client.id,
            operation,
            Seen {
                remaining: None,
                reset_at_ms: None,
                refused_until_ms: Some(
                    now.saturating_add(denied.retry_after_secs.unwrap_or(1).saturating_mul(1000)),
                ),
                refused_by: Some("rate_limited"),
                at_ms: now,
            },
        );
        return Err(denied);
    }
    let command = QuotaCommand::new(
        client.project.clone(),
        client.id.as_str(),
        operation,
        receipt,
    );
    let decided = crate::metrics::timed(
        "quota",
        operation.as_str(),
        state
            .ports()
            .quota
            .consume(&command, client.quota.limits(operation)),
    )
    .await;
    let decision = match decided {
        Ok(decision) => decision,
        Err(invalid) => {
            crate::metrics::quota_decided(operation.as_str(), "invalid");
            return Err(rejection(for_invalid(&invalid)));
        }
    };
    crate::metrics::quota_decided(
        operation.as_str(),
        match decision {
            QuotaDecision::Admitted { charged: true, .. } => "charged",
            QuotaDecision::Admitted { charged: false, .. } => "replayed",
            QuotaDecision::Exceeded { .. } => "exceeded",
            QuotaDecision::Unavailable { .. } => "unavailable",
        },
    );
    if let Some(seen) = seen_of(&decision, state.now()) {
        state.quota_board().record(&client.id, operation, seen);
    }
    match for_decision(&decision) {
        QuotaHttp::Proceed { headers } => Ok(QuotaGrant {
            headers: convert(&headers),
            charge: decision.charge(&command),
        }),
        QuotaHttp::Reject(rejection_answer) => {
            match decision {
                QuotaDecision::Unavailable { reason } => {
                    tracing::warn!(%reason, operation = operation.as_str(), "quota unavailable");
                    crate::metrics::quota_denied(operation.as_str(), "unavailable");
                }
                _ => crate::metrics::quota_denied(operation.as_str(), "exceeded"),
            }
            Err(rejection(rejection_answer))
        }
    }
}

/// What the dashboard shows of a decision (nothing for an unavailable store).
fn seen_of(decision: &QuotaDecision, now: proxypool_core::UnixMillis) -> Option<Seen> {
    match *decision {
        QuotaDecision::Admitted {
            remaining,
            reset_at_ms,
            ..
        } => Some(Seen {
            remaining: Some(remaining),
            reset_at_ms: Some(reset_at_ms),
            refused_until_ms: None,
            refused_by: None,
            at_ms: now,
        }),
        QuotaDecision::Exceeded { reset_at_ms, .. } => Some(Seen {
            remaining: Some(0),
            reset_at_ms: Some(reset_at_ms),
            refused_until_ms: Some(reset_at_ms),
            refused_by: Some("quota_exceeded"),
            at_ms: now,
        }),
        QuotaDecision::Unavailable { .. } => None,
    }
}

/// Settles what `grant` charged, if it charged anything. Best effort: a store that cannot
/// settle leaves the charge as it was (logged and counted), which errs on the client's
/// side only by the one request.
pub(crate) async fn settle(state: &ApiState, grant: &QuotaGrant, settlement: Settlement) {
    let Some(charge) = &grant.charge else {
        return;
    };
    let operation = charge.command.operation.as_str();
    let kind = settlement.as_str();
    let settled = crate::metrics::timed(
        "quota",
        "settle",
        state.ports().quota.settle(charge, &settlement),
    )
    .await;
    let outcome = match settled {
        Ok(SettleOutcome::Settled) => "settled",
        Ok(SettleOutcome::NotFound) => "not_found",
        Ok(SettleOutcome::Unavailable { reason }) => {
            tracing::warn!(%reason, operation, settlement = kind, "quota charge could not be settled");
            "unavailable"
        }
        Err(invalid) => {
            tracing::error!(%invalid, operation, settlement = kind, "quota settlement rejected");
            "invalid"
        }
    };
    crate::metrics::quota_settled(charge.command.operation.as_str(), kind, outcome);
}

/// `result`, after refunding `grant` when the service could not serve the request (the
/// client must not pay for the service's own failures).
pub(crate) async fn refund_unserved<T>(
    state: &ApiState,
    grant: &QuotaGrant,
    result: Result<T, ApiError>,
) -> Result<T, ApiError> {
    if let Err(error) = &result
        && error.code == ErrorCode::Unavailable
    {
        settle(state, grant, Settlement::Refund).await;
    }
    result
}

fn rejection(answer: HttpRejection) -> ApiError {
    let code = match answer.code {
        "quota_exceeded" => ErrorCode::QuotaExceeded,
        "invalid_request" => ErrorCode::InvalidRequest,
        _ => ErrorCode::Unavailable,
    };
    ApiError::new(code, answer.message).with_headers(convert(&answer.headers))
}

fn convert(headers: &[Header]) -> Vec<(HeaderName, HeaderValue)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((
                HeaderName::from_bytes(name.as_bytes()).ok()?,
                HeaderValue::from_str(value).ok()?,
            ))
        })
        .collect()
}
