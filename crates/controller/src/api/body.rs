//! JSON request bodies, read only after the worker token was checked and only up to the
//! route's cap (`[control.limits]`): content type, the cap (enforced while reading, so an
//! oversize body is never buffered whole) and field-naming parse errors are
//! `proxypool_edge::body`'s, in the control API's error format. The whole body must arrive
//! within `body_read_timeout` (408), so a worker's token cannot keep a connection and a
//! handler busy with a body that never ends.

use super::error::{ApiError, BODY_TIMEOUT};
use super::request_id::RequestId;
use axum::body::Body;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Reads and parses a JSON body of at most `cap` bytes, arrived whole within `deadline`.
pub async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    deadline: Duration,
    rid: &RequestId,
) -> Result<T, ApiError> {
    match tokio::time::timeout(deadline, proxypool_edge::read_json(headers, body, cap)).await {
        Ok(parsed) => parsed.map_err(|error| ApiError::coded(error.code(), error.message(), rid)),
        Err(_) => Err(ApiError::coded(
            BODY_TIMEOUT,
            "the request body did not arrive in time",
            rid,
        )),
    }
}
