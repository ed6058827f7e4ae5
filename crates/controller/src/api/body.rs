//! The JSON body extractor: content type, size cap and field-naming parse errors in the
//! API's error format (axum's own rejections have a different body).

use super::error::ApiError;
use super::request_id::RequestId;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

/// Largest control request body (a full runtime report of a large worker).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A JSON request body of type `T`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let rid = match <RequestId as axum::extract::FromRequestParts<S>>::from_request_parts(
            &mut parts, state,
        )
        .await
        {
            Ok(rid) => rid,
            Err(never) => match never {},
        };
        let rid: RequestId = rid;
        let json = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::trim)
            .is_some_and(|v| v.eq_ignore_ascii_case("application/json") || v.ends_with("+json"));
        if !json {
            return Err(ApiError::invalid(
                "Content-Type must be application/json",
                &rid,
            ));
        }
        let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is larger than {MAX_BODY_BYTES} bytes"),
                    &rid,
                )
            })?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let message = if path == "." {
                format!("invalid JSON body: {inner}")
            } else {
                format!("invalid JSON body at {path}: {inner}")
            };
            ApiError::invalid(message, &rid)
        })?;
        deserializer
            .end()
            .map_err(|_| ApiError::invalid("trailing data after the JSON body", &rid))?;
        Ok(JsonBody(value))
    }
}
