//! Just enough URL handling for `redis://` and `postgres://` connection strings.
//!
//! The environment overrides point at external servers with ordinary connection URLs; the
//! testkit needs their host, port, credentials and database to talk to them, and builds
//! URLs for other databases and users from them. A full URL crate would be overkill.

use crate::error::{Result, TestkitError};

/// The parts of `scheme://[user[:password]@]host[:port][/path][?query]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectionUrl {
    pub(crate) scheme: String,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    /// Without IPv6 brackets.
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    /// Percent-decoded, without the leading slash.
    pub(crate) path: String,
    /// Without the `?`, kept verbatim.
    pub(crate) query: Option<String>,
}

fn invalid(url: &str, reason: &str) -> TestkitError {
    TestkitError::InvalidUrl {
        url: redact(url),
        reason: reason.to_owned(),
    }
}

/// Decodes `%XX` escapes (as UTF-8; invalid sequences are replaced, never an error, since
/// the result only names users and databases).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex_digit = |byte: u8| char::from(byte).to_digit(16);
            if let (Some(high), Some(low)) =
                (hex_digit(bytes[index + 1]), hex_digit(bytes[index + 2]))
            {
                // Two hex digits always fit in a byte.
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                index += 3;
                continue;
            }
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Escapes everything outside RFC 3986's unreserved set.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Hides the password of a URL so it can appear in messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

impl ConnectionUrl {
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid(url, "expected scheme://host"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((before, query)) => (before, Some(query.to_owned())),
            None => (rest, None),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((authority, path)) => (authority, percent_decode(path)),
            None => (rest, String::new()),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => (Some(userinfo), hostport),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(userinfo) => match userinfo.split_once(':') {
                Some((user, password)) => {
                    (Some(percent_decode(user)), Some(percent_decode(password)))
                }
                None => (Some(percent_decode(userinfo)), None),
            },
        };
        let user = user.filter(|user| !user.is_empty());
        let (host, port_text) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| invalid(url, "unclosed '[' in host"))?;
            (host.to_owned(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (hostport.to_owned(), None),
            }
        };
        let port = match port_text {
            None | Some("") => None,
            Some(text) => Some(
                text.parse()
                    .map_err(|_| invalid(url, "port is not a number"))?,
            ),
        };
        Ok(Self {
            scheme: scheme.to_owned(),
            user,
            password,
            host: if host.is_empty() {
                "localhost".to_owned()
            } else {
                host
            },
            port,
            path,
            query,
        })
    }

    /// The URL again, with another user (password kept only for the same user) and path.
    pub(crate) fn with_user_and_path(&self, user: &str, path: &str) -> String {
        let userinfo = match (&self.user, &self.password) {
            (Some(own), Some(password)) if own == user => {
                format!("{}:{}@", percent_encode(user), percent_encode(password))
            }
            _ => format!("{}@", percent_encode(user)),
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = self.port.map(|port| format!(":{port}")).unwrap_or_default();
        let query = self
            .query
            .as_ref()
            .map(|query| format!("?{query}"))
            .unwrap_or_default();
        format!(
            "{}://{userinfo}{host}{port}/{}{query}",
            self.scheme,
            percent_encode(path)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_postgres_urls() {
        let url = ConnectionUrl::parse(
            "postgres://app%40x:s%3Acret@db.local:6543/my%20db?sslmode=disable",
        )
        .unwrap();
        assert_eq!(url.scheme, "postgres");
        assert_eq!(url.user.as_deref(), Some("app@x"));
        assert_eq!(url.password.as_deref(), Some("s:cret"));
        assert_eq!(url.host, "db.local");
        assert_eq!(url.port, Some(6543));
        assert_eq!(url.path, "my db");
        assert_eq!(url.query.as_deref(), Some("sslmode=disable"));
    }

    #[test]
    fn parses_minimal_and_ipv6_urls() {
        let url = ConnectionUrl::parse("redis://127.0.0.1").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.user),
            ("127.0.0.1", None, None)
        );
        let url = ConnectionUrl::parse("redis://:pw@[::1]:6380/2").unwrap();
        assert_eq!(url.host, "::1");
        assert_eq!(url.port, Some(6380));
        assert_eq!(url.user, None);
        assert_eq!(url.password.as_deref(), Some("pw"));
        assert_eq!(url.path, "2");
        assert!(ConnectionUrl::parse("not a url").is_err());
        assert!(ConnectionUrl::parse("redis://host:port").is_err());
    }

    #[test]
    fn rebuilds_urls_for_other_users_and_databases() {
        let url = ConnectionUrl::parse("postgres://admin:pw@[::1]:5432/postgres?sslmode=disable")
            .unwrap();
        assert_eq!(
            url.with_user_and_path("admin", "quota_test"),
            "postgres://admin:pw@[::1]:5432/quota_test?sslmode=disable"
        );
        assert_eq!(
            url.with_user_and_path("quota role", "db"),
            "postgres://quota%20role@[::1]:5432/db?sslmode=disable"
        );
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("postgres://u:secret@h:1/db"),
            "postgres://u:***@h:1/db"
        );
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
        assert!(
            !invalid("redis://u:secret@h:x", "bad")
                .to_string()
                .contains("secret")
        );
    }
}
