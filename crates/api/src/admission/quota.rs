//! The durable quota gate (`proxypool-quota`), the last layer before a mutation.
//!
//! One bucket per (project, client, operation), charged under that client's limits
//! ([`ApiClient::quota`]). The receipt is the request's
//! `Idempotency-Key` when it has one, else the server-generated request id, so a replay
//! after a lost response is admitted without a second charge and a request without a key
//! is charged every time. Answers follow the HTTP mapping in `quota_http`: 429
//! `quota_exceeded` with `Retry-After` and the draft `RateLimit-Policy`/`RateLimit` headers,
//! 503 `unavailable` when the store cannot decide (fail closed).

use crate::admission::quota_http::{Header, HttpRejection, QuotaHttp, for_decision, for_invalid};
use crate::clients::ApiClient;
use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::http::{HeaderName, HeaderValue};
use proxypool_quota::{Operation, QuotaCommand, QuotaDecision};

/// An admission: the rate-limit headers to put on the response.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuotaGrant {
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Consumes one unit of `operation` for `client` under `receipt`, within the client's own
/// limits for that operation.
pub(crate) async fn charge(
    state: &ApiState,
    client: &ApiClient,
    operation: Operation,
    receipt: &str,
) -> Result<QuotaGrant, ApiError> {
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
        Err(invalid) => return Err(rejection(for_invalid(&invalid))),
    };
    match for_decision(&decision) {
        QuotaHttp::Proceed { headers } => Ok(QuotaGrant {
            headers: convert(&headers),
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
