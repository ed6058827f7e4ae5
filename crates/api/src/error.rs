//! The API's one error type and its fixed codes (docs/ARCHITECTURE.md).
//!
//! Handlers and middleware return [`ApiError`]; its response carries the status, the
//! headers the code needs (`Retry-After`, `WWW-Authenticate`, quota headers) and an
//! [`ErrorMark`] extension instead of a finished body. The outermost middleware
//! (`observe`) turns the mark into `{"error":{"code","message"},"request_id"}`, because only
//! it knows the request id; any other 4xx/5xx that reaches it unmarked is given a body of
//! the same shape, so every error carries a request id whatever produced it.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use proxypool_core::{Conflict, PoolError, Unavailable};
use proxypool_edge::Code;
use std::borrow::Cow;

/// The fixed error codes. `as_str` is what clients match on; never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: the request is malformed; the message names the field or header.
    InvalidRequest,
    /// 401: no or an unknown bearer token.
    Unauthenticated,
    /// 403: authenticated, but this client may not do this.
    Forbidden,
    /// 404: no such object, or another tenant's (no id probing), or no such route.
    NotFound,
    /// 405: the route exists with other methods.
    MethodNotAllowed,
    /// 409: the idempotency key was used with a different request.
    IdempotencyConflict,
    /// 409: the idempotency key was used for an extraction that can no longer be replayed
    /// (its proxies expired) and is still held for it: use a new key.
    IdempotencyExpired,
    /// 409: an all-or-nothing extraction could not be satisfied.
    InsufficientInventory,
    /// 409: the request conflicts with the object's current state (admin operations).
    Conflict,
    /// 408: the request body did not arrive whole within `body_read_timeout`.
    BodyTimeout,
    /// 413: the body is over the cap.
    PayloadTooLarge,
    /// 429: the per-IP shield denied the request (before authentication).
    RateLimited,
    /// 429: the client's durable quota for the operation is used up.
    QuotaExceeded,
    /// 429: the address already has `max_requests_in_flight_per_ip` requests in flight.
    TooManyRequestsInFlight,
    /// 503: a store could not decide, the server is saturated or the request timed out.
    Unavailable,
    /// 503: the pool store lost its memory and its new incarnation is not in place yet.
    StoreLost,
    /// 503: the pool recovers from a loss of its store and withholds the proxies that may
    /// have been handed out before it; `Retry-After` says when the first returns.
    StoreRecovering,
    /// 500: a bug (a panicked task); the message never says more.
    Internal,
}

impl ErrorCode {
    /// The code and status: the shared ones are `proxypool_edge::Code`'s.
    pub fn code(self) -> Code {
        match self {
            ErrorCode::InvalidRequest => Code::INVALID_REQUEST,
            ErrorCode::Unauthenticated => Code::UNAUTHENTICATED,
            ErrorCode::Forbidden => Code::FORBIDDEN,
            ErrorCode::NotFound => Code::NOT_FOUND,
            ErrorCode::MethodNotAllowed => Code::METHOD_NOT_ALLOWED,
            ErrorCode::IdempotencyConflict => IDEMPOTENCY_CONFLICT,
            ErrorCode::IdempotencyExpired => IDEMPOTENCY_EXPIRED,
            ErrorCode::InsufficientInventory => Code::INSUFFICIENT_INVENTORY,
            ErrorCode::Conflict => Code::CONFLICT,
            ErrorCode::BodyTimeout => BODY_TIMEOUT,
            ErrorCode::PayloadTooLarge => Code::PAYLOAD_TOO_LARGE,
            ErrorCode::RateLimited => Code::RATE_LIMITED,
            ErrorCode::QuotaExceeded => QUOTA_EXCEEDED,
            ErrorCode::TooManyRequestsInFlight => TOO_MANY_REQUESTS_IN_FLIGHT,
            ErrorCode::Unavailable => Code::UNAVAILABLE,
            ErrorCode::StoreLost => Code::STORE_LOST,
            ErrorCode::StoreRecovering => STORE_RECOVERING,
            ErrorCode::Internal => Code::INTERNAL,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.code().name
    }

    pub fn status(self) -> StatusCode {
        self.code().status
    }
}

/// The client API's own codes (beside the shared ones).
const IDEMPOTENCY_CONFLICT: Code = Code::new(StatusCode::CONFLICT, "idempotency_conflict");
const IDEMPOTENCY_EXPIRED: Code = Code::new(StatusCode::CONFLICT, "idempotency_key_expired");
const QUOTA_EXCEEDED: Code = Code::new(StatusCode::TOO_MANY_REQUESTS, "quota_exceeded");
const BODY_TIMEOUT: Code = Code::new(StatusCode::REQUEST_TIMEOUT, "body_timeout");
const TOO_MANY_REQUESTS_IN_FLIGHT: Code =
    Code::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests_in_flight");
const STORE_RECOVERING: Code = Code::new(StatusCode::SERVICE_UNAVAILABLE, "store_recovering");

/// An error answer: a fixed code, a message safe to show the client, and extra headers.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: Cow<'static, str>,
    /// Sent as `Retry-After` (whole seconds, at least 1) on 429 and 503.
    pub retry_after_secs: Option<u64>,
    /// More headers (the quota's `RateLimit-Policy` / `RateLimit`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after_secs: None,
            headers: Vec::new(),
        }
    }

    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorCode::InvalidRequest, message)
    }

    pub fn unauthenticated() -> Self {
        ApiError::new(
            ErrorCode::Unauthenticated,
            "a valid bearer token is required",
        )
    }

    pub fn forbidden(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorCode::NotFound, message)
    }

    /// 503 with `Retry-After`.
    pub fn unavailable(message: impl Into<Cow<'static, str>>, retry_after_secs: u64) -> Self {
        ApiError::new(ErrorCode::Unavailable, message).retry_after(retry_after_secs)
    }

    pub fn internal() -> Self {
        ApiError::new(ErrorCode::Internal, "internal error")
    }

    #[must_use]
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs.max(1));
        self
    }

    #[must_use]
    pub fn with_headers(mut self, headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        self.headers.extend(headers);
        self
    }

    /// Maps a port error (`proxypool_edge::from_pool`, plus the API's own code for a
    /// reused idempotency key). Store details go to the operator's log, never to the
    /// client.
    pub fn from_pool(error: PoolError, retry_after_secs: u64) -> Self {
        match error {
            PoolError::Conflict(Conflict::IdempotencyDigest) => {
                return ApiError::new(
                    ErrorCode::IdempotencyConflict,
                    "this Idempotency-Key was already used with a different request",
                );
            }
            PoolError::Conflict(Conflict::IdempotencyExpired) => {
                return ApiError::new(
                    ErrorCode::IdempotencyExpired,
                    "this Idempotency-Key was already used for an extraction that can no longer be replayed; use a new key",
                );
            }
            PoolError::Unavailable(Unavailable::StoreRecovering { retry_after_ms }) => {
                return ApiError::new(
                    ErrorCode::StoreRecovering,
                    "the pool is recovering from a loss of its store: proxies that may have been handed out before it are withheld until they cannot be in use",
                )
                .retry_after(retry_after_ms.div_ceil(1_000).max(1));
            }
            _ => {}
        }
        let answer = proxypool_edge::from_pool(error);
        let code = match answer.code {
            Code::INVALID_REQUEST => ErrorCode::InvalidRequest,
            Code::NOT_FOUND => ErrorCode::NotFound,
            Code::INSUFFICIENT_INVENTORY => ErrorCode::InsufficientInventory,
            Code::UNAVAILABLE => ErrorCode::Unavailable,
            Code::STORE_LOST => ErrorCode::StoreLost,
            _ => ErrorCode::Conflict,
        };
        let mapped = ApiError::new(code, answer.message);
        if answer.retry {
            mapped.retry_after(retry_after_secs)
        } else {
            mapped
        }
    }
}

/// What the `observe` middleware needs to render an error body.
#[derive(Debug, Clone)]
pub(crate) struct ErrorMark {
    pub code: ErrorCode,
    pub message: Cow<'static, str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.code.status().into_response();
        let headers: &mut HeaderMap = response.headers_mut();
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        if self.code == ErrorCode::Unauthenticated {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response.extensions_mut().insert(ErrorMark {
            code: self.code,
            message: self.message,
        });
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::Unavailable;

    #[test]
    fn pool_errors_map_to_the_fixed_codes() {
        let cases = [
            (PoolError::invalid("x"), ErrorCode::InvalidRequest, 400),
            (PoolError::NotFound, ErrorCode::NotFound, 404),
            (
                PoolError::Conflict(Conflict::IdempotencyDigest),
                ErrorCode::IdempotencyConflict,
                409,
            ),
            (
                PoolError::Conflict(Conflict::IdempotencyExpired),
                ErrorCode::IdempotencyExpired,
                409,
            ),
            (
                PoolError::InsufficientInventory {
                    requested: 3,
                    matching: 1,
                },
                ErrorCode::InsufficientInventory,
                409,
            ),
            (
                PoolError::Unavailable(Unavailable::ScanBudget),
                ErrorCode::Unavailable,
                503,
            ),
            (
                PoolError::store_down("redis://secret-host"),
                ErrorCode::Unavailable,
                503,
            ),
        ];
        for (error, code, status) in cases {
            let mapped = ApiError::from_pool(error, 2);
            assert_eq!(mapped.code, code);
            assert_eq!(mapped.code.status().as_u16(), status);
            assert!(!mapped.message.contains("secret-host"));
        }
        let unavailable = ApiError::from_pool(PoolError::store_down("x"), 2).into_response();
        assert_eq!(unavailable.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        let response = ApiError::unavailable("x", 0).into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}
