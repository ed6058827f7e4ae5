//! API errors in the shared body (`{"error":{"code","message"},"request_id"}`) with the
//! fixed codes of the client API (docs/ARCHITECTURE.md), plus `fenced` and `conflict` for the control API.
//!
//! Store failures are mapped here once: "unavailable" never leaks the store's detail to
//! the caller (it is logged for operators), and always carries `Retry-After`.

use super::request_id::RequestId;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use proxypool_core::control::{ErrorBody, ErrorDetail};
use proxypool_core::{Conflict, PoolError};

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

    pub fn invalid(message: impl Into<String>, rid: &RequestId) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message, rid)
    }

    pub fn unauthenticated(rid: &RequestId) -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a valid worker token is required (Authorization: Bearer ...)",
            rid,
        )
    }

    pub fn forbidden(message: impl Into<String>, rid: &RequestId) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message, rid)
    }

    /// Maps a store error.
    pub fn from_pool(error: PoolError, rid: &RequestId) -> Self {
        match error {
            PoolError::InvalidInput(message) => ApiError::invalid(message, rid),
            PoolError::NotFound => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", "not found", rid)
            }
            PoolError::Conflict(Conflict::Fenced) => ApiError::new(
                StatusCode::CONFLICT,
                "fenced",
                "this session is not the worker's current live session; register again",
                rid,
            ),
            PoolError::Conflict(conflict) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", conflict.to_string(), rid)
            }
            e @ PoolError::InsufficientInventory { .. } => ApiError::new(
                StatusCode::CONFLICT,
                "insufficient_inventory",
                e.to_string(),
                rid,
            ),
            PoolError::Unavailable(detail) => {
                tracing::warn!(request_id = %rid.0, "store unavailable: {detail}");
                ApiError {
                    retry_after_secs: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "unavailable",
                        "the store is unavailable; retry later",
                        rid,
                    )
                }
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
            request_id: self.request_id,
        };
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
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
