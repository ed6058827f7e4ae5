//! The error answer every JSON API of proxypool gives:
//! `{"error":{"code":"...","message":"..."},"request_id":"..."}` (the body type is
//! `proxypool_core::control::ErrorBody`), the codes both APIs share, and the one mapping
//! of the ports' [`PoolError`] to a status, a code and a message safe to show.
//!
//! Each API keeps its own specific codes (the client API's `quota_exceeded`, the control
//! API's `fenced`) as further [`Code`] values of its own.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
#[cfg(doc)]
use proxypool_core::Conflict;
use proxypool_core::PoolError;
use proxypool_core::control::{ErrorBody, ErrorDetail};
use std::borrow::Cow;

/// A fixed error code and the status it is sent with. `name` is what clients match on;
/// never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    pub status: StatusCode,
    pub name: &'static str,
}

impl Code {
    pub const fn new(status: StatusCode, name: &'static str) -> Self {
        Code { status, name }
    }

    /// 400: the request is malformed; the message names the field or header.
    pub const INVALID_REQUEST: Code = Code::new(StatusCode::BAD_REQUEST, "invalid_request");
    /// 401: no or an unknown bearer token.
    pub const UNAUTHENTICATED: Code = Code::new(StatusCode::UNAUTHORIZED, "unauthenticated");
    /// 403: authenticated, but not allowed to do this.
    pub const FORBIDDEN: Code = Code::new(StatusCode::FORBIDDEN, "forbidden");
    /// 404: no such object or route.
    pub const NOT_FOUND: Code = Code::new(StatusCode::NOT_FOUND, "not_found");
    /// 405: the route exists with other methods.
    pub const METHOD_NOT_ALLOWED: Code =
        Code::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    /// 409: the request conflicts with the object's current state.
    pub const CONFLICT: Code = Code::new(StatusCode::CONFLICT, "conflict");
    /// 409: an all-or-nothing extraction could not be satisfied.
    pub const INSUFFICIENT_INVENTORY: Code =
        Code::new(StatusCode::CONFLICT, "insufficient_inventory");
    /// 413: the body is over the cap.
    pub const PAYLOAD_TOO_LARGE: Code =
        Code::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    /// 431: the request head is over the cap (answered by the server scaffold).
    pub const HEADERS_TOO_LARGE: Code = Code::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
    );
    /// 429: the per-IP shield denied the request.
    pub const RATE_LIMITED: Code = Code::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    /// 503: a store could not decide, the server is saturated or the request timed out.
    pub const UNAVAILABLE: Code = Code::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    /// 503: the pool store lost its memory and its new incarnation is not in place yet
    /// (`proxypool_core::store_mark`).
    pub const STORE_LOST: Code = Code::new(StatusCode::SERVICE_UNAVAILABLE, "store_lost");
    /// 500: a bug; the message never says more.
    pub const INTERNAL: Code = Code::new(StatusCode::INTERNAL_SERVER_ERROR, "internal");

    /// The code a bare status stands for, for error responses nobody marked.
    pub fn for_status(status: StatusCode) -> Code {
        match status {
            StatusCode::UNAUTHORIZED => Code::UNAUTHENTICATED,
            StatusCode::FORBIDDEN => Code::FORBIDDEN,
            StatusCode::NOT_FOUND => Code::NOT_FOUND,
            StatusCode::METHOD_NOT_ALLOWED => Code::METHOD_NOT_ALLOWED,
            StatusCode::CONFLICT => Code::CONFLICT,
            StatusCode::PAYLOAD_TOO_LARGE => Code::PAYLOAD_TOO_LARGE,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => Code::HEADERS_TOO_LARGE,
            StatusCode::TOO_MANY_REQUESTS => Code::RATE_LIMITED,
            StatusCode::SERVICE_UNAVAILABLE => Code::UNAVAILABLE,
            s if s.is_client_error() => Code::new(s, Code::INVALID_REQUEST.name),
            s => Code::new(s, Code::INTERNAL.name),
        }
    }
}

/// The JSON error body.
pub fn error_body(code: &str, message: impl Into<String>, request_id: &str) -> Vec<u8> {
    let body = ErrorBody {
        error: ErrorDetail {
            code: code.to_owned(),
            message: message.into(),
        },
        request_id: request_id.to_owned(),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A complete error response: the JSON body, `Content-Type`, `Cache-Control: no-store`
/// and `X-Request-Id`.
pub fn error_response(
    code: Code,
    message: impl Into<String>,
    request_id: &str,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(error_body(
        code.name, message, request_id,
    ))));
    *response.status_mut() = code.status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(crate::request_id::REQUEST_ID_HEADER, value);
    }
    response
}

/// What a [`PoolError`] is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAnswer {
    pub code: Code,
    pub message: Cow<'static, str>,
    /// Whether the answer is a 503 that needs `Retry-After`.
    pub retry: bool,
}

/// Maps a port error. Store details go to the operator's log, never to the client: a
/// store's message may name hosts or keys. An API that has a code of its own for one
/// [`Conflict`] (the idempotency conflict, the fenced session) matches it before calling.
pub fn from_pool(error: PoolError) -> PoolAnswer {
    let answer = |code, message: Cow<'static, str>| PoolAnswer {
        code,
        message,
        retry: false,
    };
    match error {
        PoolError::InvalidInput(message) => answer(Code::INVALID_REQUEST, message.into()),
        PoolError::NotFound => answer(Code::NOT_FOUND, "not found".into()),
        PoolError::Conflict(conflict) => answer(Code::CONFLICT, conflict.to_string().into()),
        PoolError::InsufficientInventory {
            requested,
            matching,
        } => answer(
            Code::INSUFFICIENT_INVENTORY,
            format!(
                "all_or_nothing: {requested} requested, only {matching} matching proxies available"
            )
            .into(),
        ),
        PoolError::Unavailable(proxypool_core::Unavailable::StoreLost(reason)) => {
            tracing::error!(%reason, "the pool store lost its memory");
            PoolAnswer {
                code: Code::STORE_LOST,
                message: "the pool store lost its memory; a new one is being put in place".into(),
                retry: true,
            }
        }
        PoolError::Unavailable(reason) => {
            tracing::warn!(%reason, "store unavailable");
            PoolAnswer {
                code: Code::UNAVAILABLE,
                message: "the store could not decide; retry later".into(),
                retry: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::{Conflict, Unavailable};

    #[test]
    fn pool_errors_map_to_the_shared_codes_without_store_detail() {
        let cases = [
            (PoolError::invalid("x"), Code::INVALID_REQUEST),
            (PoolError::NotFound, Code::NOT_FOUND),
            (PoolError::Conflict(Conflict::Sequence), Code::CONFLICT),
            (
                PoolError::InsufficientInventory {
                    requested: 3,
                    matching: 1,
                },
                Code::INSUFFICIENT_INVENTORY,
            ),
            (
                PoolError::Unavailable(Unavailable::ScanBudget),
                Code::UNAVAILABLE,
            ),
            (
                PoolError::store_down("redis://secret-host"),
                Code::UNAVAILABLE,
            ),
        ];
        for (error, code) in cases {
            let answer = from_pool(error);
            assert_eq!(answer.code, code);
            assert_eq!(answer.retry, code == Code::UNAVAILABLE);
            assert!(!answer.message.contains("secret-host"));
        }
    }

    #[test]
    fn the_body_has_the_documented_shape() {
        let body: serde_json::Value =
            serde_json::from_slice(&error_body("not_found", "gone", "req-1")).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "not_found", "message": "gone"}, "request_id": "req-1"})
        );
        assert_eq!(
            Code::for_status(StatusCode::IM_A_TEAPOT).name,
            "invalid_request"
        );
        assert_eq!(Code::for_status(StatusCode::BAD_GATEWAY).name, "internal");
    }
}
