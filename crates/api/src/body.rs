//! Reading JSON request bodies in the API's error shape: content type, the size cap and
//! field-naming parse errors are `proxypool_edge::body`'s, shared with the control API.

use crate::error::ApiError;
use axum::body::Body;
use axum::http::HeaderMap;
use proxypool_edge::BodyError;
use serde::de::DeserializeOwned;

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> Self {
        let code = match error {
            BodyError::TooLarge { .. } => crate::error::ErrorCode::PayloadTooLarge,
            _ => crate::error::ErrorCode::InvalidRequest,
        };
        ApiError::new(code, error.message())
    }
}

/// Reads and parses a JSON body of at most `cap` bytes.
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
) -> Result<T, ApiError> {
    Ok(proxypool_edge::read_json(headers, body, cap).await?)
}
