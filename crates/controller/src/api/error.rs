//! API errors in the shared body (`{"error":{"code","message"},"request_id"}`) with the
//! shared codes of `proxypool_edge::Code`, plus the control API's own `fenced`, `body_timeout` and
//! `protocol_mismatch`.
//!
//! Store failures are mapped once, by `proxypool_edge::from_pool`: "unavailable" never
//! leaks the store's detail to the caller (it is logged for operators), and always carries
//! `Retry-After`.

use super::request_id::RequestId;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use proxypool_core::{Conflict, PoolError};
use proxypool_edge::Code;

/// 409: the session is not the worker's current live one; register again.
pub const FENCED: Code = Code::new(StatusCode::CONFLICT, "fenced");

/// 408: the request body did not arrive whole within `body_read_timeout`.
pub const BODY_TIMEOUT: Code = Code::new(StatusCode::REQUEST_TIMEOUT, "body_timeout");

/// 400: the gateway speaks another worker control protocol than this controller.
pub const PROTOCOL_MISMATCH: Code = Code::new(StatusCode::BAD_REQUEST, "protocol_mismatch");

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub request_id: String,
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
        rid: &RequestId,
    ) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            request_id: rid.0.clone(),
            retry_after_secs: None,
        }
    }

    pub fn coded(code: Code, message: impl Into<String>, rid: &RequestId) -> Self {
        ApiError::new(code.status, code.name, message, rid)
    }

    pub fn invalid(message: impl Into<String>, rid: &RequestId) -> Self {
        ApiError::coded(Code::INVALID_REQUEST, message, rid)
    }

    pub fn unauthenticated(rid: &RequestId) -> Self {
        ApiError::coded(
            Code::UNAUTHENTICATED,
            "a valid worker token is required (Authorization: Bearer ...)",
            rid,
        )
    }

    /// The gateway named protocol `theirs`; this controller speaks only its own.
    pub fn protocol_mismatch(theirs: u32, rid: &RequestId) -> Self {
        let ours = proxypool_snapshot::CONTROL_PROTOCOL;
        let older = if theirs < ours {
            "the gateway is older than this controller: upgrade the gateway"
        } else {
            "the gateway is newer than this controller: upgrade the controller"
        };
        ApiError::coded(
            PROTOCOL_MISMATCH,
            format!(
                "this controller speaks worker control protocol {ours}, the gateway {}; {older}",
                match theirs {
                    0 => "none (it predates protocol versions)".to_owned(),
                    n => n.to_string(),
                }
            ),
            rid,
        )
    }

    pub fn forbidden(message: impl Into<String>, rid: &RequestId) -> Self {
        ApiError::coded(Code::FORBIDDEN, message, rid)
    }

    /// Maps a store error.
    pub fn from_pool(error: PoolError, rid: &RequestId) -> Self {
        if let PoolError::Conflict(Conflict::Fenced) = error {
            return ApiError::coded(
                FENCED,
                "this session is not the worker's current live session; register again",
                rid,
            );
        }
        let answer = proxypool_edge::from_pool(error);
        let mut mapped = ApiError::coded(answer.code, answer.message, rid);
        if answer.retry {
            tracing::warn!(request_id = %rid.0, "store unavailable");
            mapped.retry_after_secs = Some(1);
        }
        mapped
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = Code::new(self.status, self.code);
        let mut response =
            proxypool_edge::error_response(code, self.message, &self.request_id).into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"proxypool-control\""),
            );
        }
        response
    }
}
