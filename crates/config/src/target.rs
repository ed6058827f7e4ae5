//! URLs the controller dials itself: check targets and vendor list endpoints.
//!
//! A check target ([`TargetUrl::parse`]) is `http://` only: the checker speaks HTTP/1.1
//! through the proxy without TLS, so an `https://` target would be a promise the build
//! cannot keep. A vendor list ([`TargetUrl::parse_list`]) is fetched by the controller
//! directly, over TLS for `https://` (port 443 by default) or in plain text for `http://`;
//! whether plain text is allowed is the provider's `allow_plaintext`, checked by the
//! caller.

use std::fmt;

/// A parsed `http[s]://host[:port]/path?query` URL; whether it is TLS is told by
/// [`TargetUrl::parse_list`], the only parser that takes `https://`.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    pub host: String,
    pub port: u16,
    /// Origin-form request target, at least `/`.
    pub path_and_query: String,
}

impl TargetUrl {
    /// A check target: `http://` only.
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| "only http:// URLs are supported".to_owned())?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("credentials in the URL are not allowed; use a reference".into());
        }
        let (host, port) = split_host_port(authority)?;
        let path_and_query = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_owned()
        };
        if path_and_query
            .chars()
            .any(|c| c.is_ascii_control() || c == ' ')
        {
            return Err("the path contains spaces or control characters".into());
        }
        Ok(TargetUrl {
            host,
            port: port.unwrap_or(80),
            path_and_query,
        })
    }

    /// A vendor list URL: `https://` (port 443 by default) or `http://`; the flag says
    /// whether it is TLS.
    pub fn parse_list(url: &str) -> Result<(bool, Self), String> {
        if let Some(rest) = url.strip_prefix("https://") {
            let mut target = Self::parse(&format!("http://{rest}"))?;
            let authority = rest.split(['/', '?']).next().unwrap_or_default();
            if split_host_port(authority)?.1.is_none() {
                target.port = 443;
            }
            Ok((true, target))
        } else {
            Self::parse(url)
                .map(|t| (false, t))
                .map_err(|_| "must be an https:// (or, with allow_plaintext, http://) URL".into())
        }
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The absolute form, as sent to an HTTP proxy.
    pub fn absolute(&self) -> String {
        format!("http://{}{}", self.host_header(), self.path_and_query)
    }
}

impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.absolute())
    }
}

/// Splits `host[:port]` / `[v6][:port]`.
pub(crate) fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']').ok_or("unterminated [ in the host")?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("unexpected text after ]".into()),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("the host is missing".into());
    }
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(format!("invalid port {p:?}")),
            Ok(port) => Ok(port),
        })
        .transpose()?;
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_urls() {
        let t = TargetUrl::parse("http://Example.com:8080/a?b=1").unwrap();
        assert_eq!(t.host, "example.com");
        assert_eq!(t.port, 8080);
        assert_eq!(t.path_and_query, "/a?b=1");
        assert_eq!(t.absolute(), "http://example.com:8080/a?b=1");
        let t = TargetUrl::parse("http://[::1]/").unwrap();
        assert_eq!(t.host_header(), "[::1]");
        let t = TargetUrl::parse("http://h?x").unwrap();
        assert_eq!(t.path_and_query, "/?x");
        assert!(TargetUrl::parse("https://example.com/").is_err());
        assert!(TargetUrl::parse("http://u:p@example.com/").is_err());
        assert!(TargetUrl::parse("http://example.com:0/").is_err());
        assert!(TargetUrl::parse("http:///").is_err());
    }
}
