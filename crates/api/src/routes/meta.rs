//! `GET /metrics` (Prometheus text; behind a bearer token when `[api] metrics_token` is
//! set) and `GET /openapi.json` (the API description).
//!
//! Tenants' usage is private: a series with a tenant's label (`client` on
//! `proxypool_usage_*`; `proxypool_metrics::TENANT_LABELS`) says what one tenant does, so
//! it is rendered only for a scrape that presents the metrics token. Without a configured
//! token those series are left out while the registry is rendered
//! (`MetricsHandle::render_aggregate`), except in `dev`, whose one client is the
//! operator's own.

use crate::error::ApiError;
use crate::state::ApiState;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The OpenAPI 3.1 document, written by hand next to the crate manifest; a test checks it
/// lists exactly the routes [`crate::router`] serves.
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

pub(crate) async fn metrics(
    State(state): State<ApiState>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let shows_clients = match state.metrics_token() {
        Some(token) => {
            let presented = proxypool_edge::bearer_token(request.headers()).unwrap_or_default();
            if !token.verify(presented) {
                return Err(ApiError::unauthenticated());
            }
            true
        }
        None => state.client_metrics_open(),
    };
    let handle = state
        .metrics_handle()
        .ok_or_else(|| ApiError::not_found("metrics are not enabled on this server"))?;
    let text = if shows_clients {
        handle.render()
    } else {
        handle.render_aggregate()
    };
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(proxypool_metrics::CONTENT_TYPE),
    );
    Ok(response)
}

/// The document as this server answers: the extraction `count` maximum is the configured
/// `max_count` (it changes with a reload), so a client or a schema-driven fuzzer sees the
/// bound the server enforces.
pub(crate) async fn openapi(State(state): State<ApiState>) -> Response {
    let body = served_openapi(state.extraction().max_count);
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn served_openapi(max_count: u32) -> String {
    let Ok(mut document) = serde_json::from_str::<serde_json::Value>(OPENAPI_JSON) else {
        return OPENAPI_JSON.to_owned();
    };
    if let Some(count) =
        document.pointer_mut("/components/schemas/ExtractionRequest/properties/count")
    {
        count["maximum"] = max_count.into();
    }
    document.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_document_states_the_configured_extraction_maximum() {
        let document: serde_json::Value = serde_json::from_str(&served_openapi(7)).unwrap();
        assert_eq!(
            document["components"]["schemas"]["ExtractionRequest"]["properties"]["count"]["maximum"],
            7
        );
        assert_eq!(document["openapi"], "3.1.0");
    }
}
