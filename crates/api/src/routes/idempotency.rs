//! The `Idempotency-Key` request header (validated) and the `Idempotent-Replayed`
//! response header, shared by every route that makes an extraction.

use crate::error::ApiError;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use proxypool_core::extract::validate_idempotency_key;

pub(crate) const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub(crate) const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The validated `Idempotency-Key`, if the request has one.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::invalid("header Idempotency-Key: send it once"));
    }
    let key = value
        .to_str()
        .map_err(|_| ApiError::invalid("header Idempotency-Key: must be ASCII"))?;
    validate_idempotency_key(key).map_err(|_| {
        ApiError::invalid(
            "header Idempotency-Key: 1-255 characters of [A-Za-z0-9._:/-] starting with a letter or digit",
        )
    })?;
    Ok(Some(key.to_owned()))
}

/// `Idempotent-Replayed`.
pub(crate) fn replayed_value(replayed: bool) -> HeaderValue {
    HeaderValue::from_static(if replayed { "true" } else { "false" })
}
