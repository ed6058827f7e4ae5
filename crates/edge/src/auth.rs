//! Bearer tokens: `Authorization: Bearer <token>`, read from the headers alone, so an API
//! can authenticate before it reads a byte of the body.

use http::{HeaderMap, header};

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, token trimmed,
/// never empty).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(value: &'static str) -> Option<String> {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        bearer_token(&headers).map(str::to_owned)
    }

    #[test]
    fn only_a_non_empty_bearer_token_counts() {
        assert_eq!(token("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(token("bearer  abc ").as_deref(), Some("abc"));
        assert_eq!(token("Basic abc"), None);
        assert_eq!(token("Bearer   "), None);
        assert_eq!(token("Bearer"), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
