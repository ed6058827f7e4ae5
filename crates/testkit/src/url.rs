//! Connection URLs of external servers (`redis://`, `postgres://`), parsed by the `url`
//! crate: the guards need their host, port, credentials and database, and build URLs for
//! other databases and users from them. `redact` stays hand-written: it must also hide the
//! password of a URL the parser rejects, for the error that says so.

use percent_encoding::percent_decode_str;
use url::{Host, Url};

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
    /// The URL as parsed, the base of [`with_user_and_path`](Self::with_user_and_path).
    url: Url,
}

fn invalid(url: &str, reason: &str) -> TestkitError {
    TestkitError::InvalidUrl {
        url: redact(url),
        reason: reason.to_owned(),
    }
}

/// `%XX` escapes decoded as UTF-8 (invalid sequences replaced: the result only names users
/// and databases).
fn decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
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
    pub(crate) fn parse(text: &str) -> Result<Self> {
        let url = Url::parse(text).map_err(|error| invalid(text, &error.to_string()))?;
        if url.cannot_be_a_base() {
            return Err(invalid(text, "expected scheme://host"));
        }
        let host = match url.host() {
            Some(Host::Ipv6(address)) => address.to_string(),
            Some(host) => decode(&host.to_string()),
            None => String::new(),
        };
        Ok(Self {
            scheme: url.scheme().to_owned(),
            user: Some(decode(url.username())).filter(|user| !user.is_empty()),
            password: url.password().map(decode),
            host: if host.is_empty() {
                "localhost".to_owned()
            } else {
                host
            },
            port: url.port(),
            path: decode(url.path().strip_prefix('/').unwrap_or(url.path())),
            query: url.query().map(str::to_owned),
            url,
        })
    }

    /// The URL again, with another user (password kept only for the same user), path and
    /// this value's port.
    pub(crate) fn with_user_and_path(&self, user: &str, path: &str) -> String {
        let mut url = self.url.clone();
        // The setters refuse only URLs without a host, which `parse` never returns.
        let _ = url.set_username(user);
        if self.user.as_deref() != Some(user) {
            let _ = url.set_password(None);
        }
        let _ = url.set_port(self.port);
        url.set_path(path);
        url.into()
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
