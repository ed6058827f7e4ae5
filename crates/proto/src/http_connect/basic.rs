//! RFC 7617 Basic credentials, as carried in `Proxy-Authorization`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The header value `Basic base64(user:pass)`.
pub fn basic_auth_value(user: &str, pass: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{pass}")))
}

/// Reads `Basic <base64>` (scheme case-insensitive, surrounding spaces ignored) into
/// `(user, pass)`, split at the first `:`. `None` for another scheme, bad base64, non-UTF-8
/// or a missing `:`. Input longer than 4 KiB is refused without decoding.
pub fn parse_basic_auth(header_value: &str) -> Option<(String, String)> {
    const MAX_LEN: usize = 4096;
    if header_value.len() > MAX_LEN {
        return None;
    }
    let (scheme, token) = header_value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(token.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, pass) = decoded.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_rfc_example() {
        // RFC 7617 §2.
        assert_eq!(
            basic_auth_value("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        let parsed = parse_basic_auth("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==").unwrap();
        assert_eq!(parsed, ("Aladdin".into(), "open sesame".into()));
        // Passwords may contain ':'; usernames may carry selectors.
        let value = basic_auth_value("acme-region-eu-session-7", "p:a:ss");
        assert_eq!(
            parse_basic_auth(&value).unwrap(),
            ("acme-region-eu-session-7".into(), "p:a:ss".into())
        );
        assert_eq!(
            parse_basic_auth("  bAsIc   dTpw  ").unwrap(),
            ("u".into(), "p".into())
        );
        assert_eq!(
            parse_basic_auth(&basic_auth_value("", "")).unwrap(),
            (String::new(), String::new())
        );
    }

    #[test]
    fn refuses_everything_else() {
        for value in [
            "",
            "Basic",
            "Bearer dTpw",
            "Basic !!!notbase64",
            "Basic dXNlcg==", // "user": no colon
            "Basic wyg6cA==", // invalid UTF-8 before the colon
            "BasicdTpw",
        ] {
            assert_eq!(parse_basic_auth(value), None, "{value:?}");
        }
        let huge = format!("Basic {}", "A".repeat(5000));
        assert_eq!(parse_basic_auth(&huge), None);
    }
}
