//! JSON request bodies, read only after the worker token was checked and only up to the
//! route's cap (`[control.limits]`): content type, the cap (enforced while reading, so an
//! oversize body is never buffered whole) and field-naming parse errors are
//! `proxypool_edge::body`'s, in the control API's error format.

use super::error::ApiError;
use super::request_id::RequestId;
use axum::body::Body;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;

/// Reads and parses a JSON body of at most `cap` bytes.
pub async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    rid: &RequestId,
) -> Result<T, ApiError> {
    proxypool_edge::read_json(headers, body, cap)
        .await
        .map_err(|error| ApiError::coded(error.code(), error.message(), rid))
}
