//! URLs the controller dials itself: check targets and vendor list endpoints.
//!
//! A check target ([`TargetUrl::parse`]) is `http://` or `https://`: the checker fetches
//! it through the proxy, an `https://` one over TLS inside a `CONNECT` tunnel (so the
//! proxy must carry TLS to the site, as it must for the clients). A vendor list
//! ([`TargetUrl::parse_list`]) is fetched by the controller directly, over TLS for
//! `https://` or in plain text for `http://`; whether plain text is allowed is the
//! provider's `allow_plaintext`, checked by the caller. `https://` defaults to port 443.

use std::fmt;

/// A parsed `http[s]://host[:port]/path?query` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// `https://`: spoken over TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Origin-form request target, at least `/`.
    pub path_and_query: String,
}

impl TargetUrl {
    /// A check target: `http://` or `https://`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err("only http:// and https:// URLs are supported".into()),
        };
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
            tls,
            host,
            port: port.unwrap_or(if tls { 443 } else { 80 }),
            path_and_query,
        })
    }

    /// A vendor list URL: `https://` or `http://`; the flag says whether it is TLS.
    pub fn parse_list(url: &str) -> Result<(bool, Self), String> {
        match Self::parse(url) {
            Ok(target) => Ok((target.tls, target)),
            Err(message) if url.starts_with("https://") => Err(message),
            Err(_) => Err("must be an https:// (or, with allow_plaintext, http://) URL".into()),
        }
    }

    /// The scheme's own port, left out of the `Host` header.
    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The absolute form, as sent to an HTTP proxy.
    pub fn absolute(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host_header(), self.path_and_query)
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
        assert!(!t.tls);
        assert!(TargetUrl::parse("ftp://example.com/").is_err());
        assert!(TargetUrl::parse("http://u:p@example.com/").is_err());
        assert!(TargetUrl::parse("https://u:p@example.com/").is_err());
        assert!(TargetUrl::parse("http://example.com:0/").is_err());
        assert!(TargetUrl::parse("http:///").is_err());
    }

    #[test]
    fn parses_https_urls_with_their_own_default_port() {
        let t = TargetUrl::parse("https://Example.com/health").unwrap();
        assert!(t.tls);
        assert_eq!((t.host.as_str(), t.port), ("example.com", 443));
        assert_eq!(t.host_header(), "example.com");
        assert_eq!(t.absolute(), "https://example.com/health");
        let t = TargetUrl::parse("https://example.com:8443/").unwrap();
        assert_eq!(t.host_header(), "example.com:8443");
        let t = TargetUrl::parse("https://example.com:80/").unwrap();
        assert_eq!(t.host_header(), "example.com:80");
    }
}
