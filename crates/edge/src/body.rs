//! Reading JSON request bodies: content type, a size cap enforced while reading (a body
//! over it is never buffered whole), and errors that name the field (`count`,
//! `filters.region`, the `Content-Type` header, or `body` for the document as a whole).
//! Unknown fields are rejected by the target types (`#[serde(deny_unknown_fields)]`).

use bytes::Bytes;
use http::{HeaderMap, header};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

/// Why a body was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// `Content-Type` is not JSON (400).
    ContentType,
    /// The body is over `cap` bytes, declared or streamed (413).
    TooLarge { cap: usize },
    /// The body could not be read (the peer went away, a broken chunk) (400).
    Unreadable,
    /// Not the expected document; the message names the field (400).
    Invalid(String),
}

impl BodyError {
    /// The message for the client.
    pub fn message(&self) -> String {
        match self {
            BodyError::ContentType => "header Content-Type: must be application/json".to_owned(),
            BodyError::TooLarge { cap } => {
                format!("the request body is over the {cap}-byte limit")
            }
            BodyError::Unreadable => "body: could not be read".to_owned(),
            BodyError::Invalid(message) => message.clone(),
        }
    }

    /// The shared code it is answered with.
    pub fn code(&self) -> crate::Code {
        match self {
            BodyError::TooLarge { .. } => crate::Code::PAYLOAD_TOO_LARGE,
            _ => crate::Code::INVALID_REQUEST,
        }
    }
}

/// Whether a declared `Content-Length` is over `cap` (checked before anything reads).
pub fn declared_over(headers: &HeaderMap, cap: usize) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok())
        .is_some_and(|length| length > cap as u64)
}

/// `Content-Type` is `application/json` or a `+json` type (parameters ignored).
pub fn require_json(headers: &HeaderMap) -> Result<(), BodyError> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(';').next().unwrap_or("").trim());
    match essence {
        Some(media)
            if media.eq_ignore_ascii_case("application/json")
                || media.to_ascii_lowercase().ends_with("+json") =>
        {
            Ok(())
        }
        _ => Err(BodyError::ContentType),
    }
}

/// Reads at most `cap` bytes of `body`: a declared length over the cap is refused before
/// a byte is read, a streamed one as soon as it passes the cap.
pub async fn read_capped<B>(headers: &HeaderMap, body: B, cap: usize) -> Result<Bytes, BodyError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if declared_over(headers, cap) {
        return Err(BodyError::TooLarge { cap });
    }
    match Limited::new(body, cap).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(BodyError::TooLarge { cap }),
        Err(_) => Err(BodyError::Unreadable),
    }
}

/// Checks the content type, reads at most `cap` bytes and parses them.
pub async fn read_json<T, B>(headers: &HeaderMap, body: B, cap: usize) -> Result<T, BodyError>
where
    T: DeserializeOwned,
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    require_json(headers)?;
    let bytes = read_capped(headers, body, cap).await?;
    parse_json(&bytes)
}

/// Parses `bytes`, reporting the path of the offending field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        // A syntax error is about the document, not the field being read when it struck.
        let field = if path == "." || !error.inner().is_data() {
            "body".to_owned()
        } else {
            path
        };
        BodyError::Invalid(format!("{field}: {}", error.inner()))
    })?;
    // Trailing bytes after the document are as malformed as a missing brace.
    deserializer
        .end()
        .map_err(|error| BodyError::Invalid(format!("body: {error}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
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
        parse_json::<Outer>(bytes.as_bytes()).unwrap_err().message()
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
        assert!(require_json(&headers).is_err());
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(require_json(&headers).is_err());
        headers.insert(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8".parse().unwrap(),
        );
        require_json(&headers).unwrap();
        headers.insert(
            header::CONTENT_TYPE,
            "application/vnd.x+json".parse().unwrap(),
        );
        require_json(&headers).unwrap();
    }

    #[tokio::test]
    async fn the_cap_holds_declared_and_streamed() {
        let mut headers = HeaderMap::new();
        let body = Full::new(Bytes::from(vec![b' '; 11]));
        assert_eq!(
            read_capped(&headers, body.clone(), 10).await.unwrap_err(),
            BodyError::TooLarge { cap: 10 }
        );
        assert_eq!(
            read_capped(&headers, body.clone(), 11).await.unwrap().len(),
            11
        );
        headers.insert(header::CONTENT_LENGTH, "1000".parse().unwrap());
        assert_eq!(
            read_capped(&headers, body, 100).await.unwrap_err(),
            BodyError::TooLarge { cap: 100 }
        );
    }
}
