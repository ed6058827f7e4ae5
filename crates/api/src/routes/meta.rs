//! `GET /metrics` (Prometheus text) and `GET /openapi.json` (the API description).

use crate::error::ApiError;
use crate::state::ApiState;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The OpenAPI 3.1 document, written by hand next to the crate manifest; a test checks it
/// lists exactly the routes [`crate::router`] serves.
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

pub(crate) async fn metrics(State(state): State<ApiState>) -> Result<Response, ApiError> {
    let handle = state
        .metrics_handle()
        .ok_or_else(|| ApiError::not_found("metrics are not enabled on this server"))?;
    let mut response = handle.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}

pub(crate) async fn openapi() -> Response {
    let mut response = OPENAPI_JSON.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
