//! Reading JSON request bodies: content type, size cap, and errors that name the field.
//!
//! axum's `Json` extractor answers with its own plain-text errors; this keeps every failure
//! in the API's error shape and names what is wrong (`count`, `filters.region`, the
//! `Content-Type` header, or `body` for the document as a whole).

use crate::admission::limits::payload_too_large;
use crate::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use serde::de::DeserializeOwned;

/// Reads and parses a JSON body of at most `cap` bytes.
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
) -> Result<T, ApiError> {
    require_json_content_type(headers)?;
    let bytes = match axum::body::to_bytes(body, cap).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let over_cap = std::error::Error::source(&error)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            return Err(if over_cap {
                payload_too_large(cap)
            } else {
                ApiError::invalid("body: could not be read")
            });
        }
    };
    parse_json(&bytes)
}

fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(';').next().unwrap_or("").trim());
    match essence {
        Some(media) if media.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::invalid(
            "header Content-Type: must be application/json",
        )),
    }
}

/// Parses `bytes`, reporting the path of the offending field.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        // A syntax error is about the document, not the field being read when it struck.
        let field = if path == "." || !error.inner().is_data() {
            "body".to_owned()
        } else {
            path
        };
        ApiError::invalid(format!("{field}: {}", error.inner()))
    })?;
    // Trailing bytes after the document are as malformed as a missing brace.
    deserializer
        .end()
        .map_err(|error| ApiError::invalid(format!("body: {error}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        count: u32,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        region: Option<u8>,
    }

    fn message(bytes: &str) -> String {
        parse_json::<Outer>(bytes.as_bytes())
            .unwrap_err()
            .message
            .into_owned()
    }

    #[test]
    fn errors_name_the_field() {
        assert!(message(r#"{"count": -1}"#).starts_with("count: "));
        assert!(message(r#"{"count": 1, "inner": {"region": "x"}}"#).starts_with("inner.region: "));
        assert!(message(r#"{"count": 1, "colour": 2}"#).contains("unknown field `colour`"));
        assert!(message(r#"{}"#).contains("missing field `count`"));
        assert!(message(r#"{"count": 1"#).starts_with("body: "));
        assert!(message(r#"{"count": 1} x"#).starts_with("body: "));
    }

    #[test]
    fn content_type_must_be_json() {
        let mut headers = HeaderMap::new();
        assert!(require_json_content_type(&headers).is_err());
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(require_json_content_type(&headers).is_err());
        headers.insert(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8".parse().unwrap(),
        );
        require_json_content_type(&headers).unwrap();
    }
}
