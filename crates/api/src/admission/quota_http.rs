//! What the API sends for a quota decision: status, error code and header values.
//!
//! The quota crate decides and knows nothing of HTTP; this is the API's reading of its
//! answers, as plain strings and numbers that [`super::quota`] turns into the response.
//! Rejections are low-sensitivity by construction: fixed codes and messages, no project,
//! subject, count row or database text.
//!
//! - `Admitted` → proceed, with `RateLimit-Policy` and `RateLimit`.
//! - `Exceeded` → 429 `quota_exceeded`, `Retry-After` = ceil(seconds), at least 1, plus the
//!   rate-limit headers with `r=0`.
//! - `Unavailable` → 503 `unavailable` with a short `Retry-After`.
//! - An invalid command → 400 `invalid_request`, naming the field only.
//!
//! Rate-limit headers follow draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy:
//! "extract";q=600;w=60` and `RateLimit: "extract";r=599;t=42` (q quota, w window seconds, r
//! remaining, t seconds until the window resets). The policy name is the operation.

use proxypool_quota::{CommandField, InvalidCommand, QuotaDecision, QuotaPolicy};

/// `Retry-After` of a 503: long enough not to hammer a recovering store, short enough to
/// notice that it is back.
pub(crate) const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 2;

/// A header name and value.
pub(crate) type Header = (&'static str, String);

/// How the API answers a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuotaHttp {
    /// Carry on with the request; add these headers to its response.
    Proceed {
        /// `RateLimit-Policy` and `RateLimit`.
        headers: Vec<Header>,
    },
    /// Answer with this error instead.
    Reject(HttpRejection),
}

/// An error response: status, the body's `error.code` and `error.message`, and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpRejection {
    /// 429, 503 or 400.
    pub(crate) status: u16,
    /// `error.code` of the JSON body.
    pub(crate) code: &'static str,
    /// `error.message` of the JSON body (fixed text).
    pub(crate) message: &'static str,
    /// `Retry-After`, rate-limit headers, `Cache-Control: no-store`.
    pub(crate) headers: Vec<Header>,
}

/// `max(1, ceil(ms / 1000))`: 1250 ms → 2, 1 ms → 1, 0 → 1.
pub(crate) fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// `"extract";q=600;w=60`
pub(crate) fn rate_limit_policy(policy: &QuotaPolicy) -> String {
    format!(
        "\"{}\";q={};w={}",
        policy.operation,
        policy.limits.limit(),
        policy.limits.window_secs()
    )
}

/// `"extract";r=599;t=42`
pub(crate) fn rate_limit(policy: &QuotaPolicy, remaining: u32, reset_secs: u64) -> String {
    format!("\"{}\";r={remaining};t={reset_secs}", policy.operation)
}

/// The API's answer for `decision`.
pub(crate) fn for_decision(decision: &QuotaDecision) -> QuotaHttp {
    match *decision {
        QuotaDecision::Admitted {
            remaining,
            reset_at_ms,
            observed_at_ms,
            policy,
            ..
        } => QuotaHttp::Proceed {
            headers: vec![
                ("RateLimit-Policy", rate_limit_policy(&policy)),
                (
                    "RateLimit",
                    rate_limit(
                        &policy,
                        remaining,
                        retry_after_secs(reset_at_ms.saturating_sub(observed_at_ms)),
                    ),
                ),
            ],
        },
        QuotaDecision::Exceeded {
            retry_after_ms,
            policy,
            ..
        } => {
            let seconds = retry_after_secs(retry_after_ms);
            QuotaHttp::Reject(HttpRejection {
                status: 429,
                code: "quota_exceeded",
                message: "quota exceeded for this operation; retry after the indicated delay",
                headers: vec![
                    ("Retry-After", seconds.to_string()),
                    ("RateLimit-Policy", rate_limit_policy(&policy)),
                    ("RateLimit", rate_limit(&policy, 0, seconds)),
                    ("Cache-Control", "no-store".to_owned()),
                ],
            })
        }
        QuotaDecision::Unavailable { .. } => QuotaHttp::Reject(HttpRejection {
            status: 503,
            code: "unavailable",
            message: "the service cannot decide right now; retry later",
            headers: vec![
                ("Retry-After", UNAVAILABLE_RETRY_AFTER_SECS.to_string()),
                ("Cache-Control", "no-store".to_owned()),
            ],
        }),
    }
}

/// The API's answer for a command that failed validation (the message names the field,
/// e.g. "receipt_id contains a forbidden character", never the value).
pub(crate) fn for_invalid(error: &InvalidCommand) -> HttpRejection {
    let message = match error.field {
        CommandField::Project => "invalid project",
        CommandField::Subject => "invalid subject",
        CommandField::Operation => "invalid operation",
        CommandField::ReceiptId => "invalid idempotency key",
        CommandField::SpentAs => "invalid request id",
    };
    HttpRejection {
        status: 400,
        code: "invalid_request",
        message,
        headers: vec![("Cache-Control", "no-store".to_owned())],
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use proxypool_quota::{InputProblem, Operation, OperationLimits, UnavailableReason};

    fn policy() -> QuotaPolicy {
        QuotaPolicy {
            operation: Operation::Extract,
            limits: OperationLimits::new(Duration::from_secs(60), 600).unwrap(),
        }
    }

    fn header<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(header, _)| *header == name)
            .map(|(_, value)| value.as_str())
    }

    #[test]
    fn retry_after_rounds_up_to_at_least_one_second() {
        assert_eq!(retry_after_secs(1250), 2);
        assert_eq!(retry_after_secs(1000), 1);
        assert_eq!(retry_after_secs(1001), 2);
        assert_eq!(retry_after_secs(1), 1);
        assert_eq!(retry_after_secs(0), 1);
        assert_eq!(retry_after_secs(60_000), 60);
    }

    #[test]
    fn exceeded_is_429_with_retry_after_and_draft_headers() {
        let decision = QuotaDecision::Exceeded {
            retry_after_ms: 1250,
            reset_at_ms: 1_700_000_060_000,
            policy: policy(),
        };
        let QuotaHttp::Reject(rejection) = for_decision(&decision) else {
            panic!("exceeded must reject");
        };
        assert_eq!((rejection.status, rejection.code), (429, "quota_exceeded"));
        assert_eq!(header(&rejection.headers, "Retry-After"), Some("2"));
        assert_eq!(
            header(&rejection.headers, "RateLimit-Policy"),
            Some("\"extract\";q=600;w=60")
        );
        assert_eq!(
            header(&rejection.headers, "RateLimit"),
            Some("\"extract\";r=0;t=2")
        );
        assert_eq!(
            header(&rejection.headers, "Cache-Control"),
            Some("no-store")
        );
    }

    #[test]
    fn admitted_proceeds_with_remaining_and_reset() {
        let decision = QuotaDecision::Admitted {
            charged: true,
            remaining: 599,
            reset_at_ms: 1_700_000_060_000,
            observed_at_ms: 1_700_000_018_001,
            policy: policy(),
        };
        let QuotaHttp::Proceed { headers } = for_decision(&decision) else {
            panic!("admitted must proceed");
        };
        assert_eq!(
            header(&headers, "RateLimit"),
            Some("\"extract\";r=599;t=42")
        );
        assert_eq!(
            header(&headers, "RateLimit-Policy"),
            Some("\"extract\";q=600;w=60")
        );
    }

    #[test]
    fn unavailable_is_503_and_says_nothing_internal() {
        let decision = QuotaDecision::unavailable(UnavailableReason::Database);
        let QuotaHttp::Reject(rejection) = for_decision(&decision) else {
            panic!("unavailable must reject");
        };
        assert_eq!((rejection.status, rejection.code), (503, "unavailable"));
        assert_eq!(header(&rejection.headers, "Retry-After"), Some("2"));
        assert!(!rejection.message.contains("database"));
    }

    #[test]
    fn invalid_command_is_400_naming_only_the_field() {
        let rejection = for_invalid(&InvalidCommand {
            field: CommandField::ReceiptId,
            problem: InputProblem::ForbiddenCharacter,
        });
        assert_eq!((rejection.status, rejection.code), (400, "invalid_request"));
        assert_eq!(rejection.message, "invalid idempotency key");
    }
}
