//! The text list format: one proxy per line.
//!
//! Accepted shapes (blank lines and `#` comments are skipped):
//! `host:port`, `host:port:user:pass`, either with a `scheme://` prefix, and
//! `user:pass@host:port`, with or without a `scheme://` prefix (the URL shape). IPv6
//! hosts are bracketed: `[2001:db8::1]:8080`.
//!
//! In a URL (`scheme://user:pass@host:port`) the user and the password are
//! percent-encoded, as in any URL: `%40` is `@`, `%3A` is `:`. A `%` that starts no
//! escape of two hex digits, or escapes that decode to no UTF-8 text, refuse the entry
//! (`invalid_escape`) rather than give the proxy credentials it would not accept. The
//! other shapes are no URLs, so their credentials are taken as written.

use super::entry::{EntryDefaults, EntryError, ParsedList, parse_port, parse_scheme};
use proxypool_core::{Candidate, Credentials};

/// Longest line considered; anything longer is not a proxy entry.
const MAX_LINE: usize = 2048;

/// Parses a whole text body.
pub fn parse_text(body: &str, defaults: &EntryDefaults) -> ParsedList {
    let mut list = ParsedList::default();
    for line in body.lines() {
        if let Some(entry) = parse_line(line, defaults) {
            list.push(entry);
        }
    }
    list
}

/// Parses one line; `None` for blank lines and comments.
pub fn parse_line(line: &str, defaults: &EntryDefaults) -> Option<Result<Candidate, EntryError>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    if line.len() > MAX_LINE || line.chars().any(|c| c.is_control() || c == ' ') {
        return Some(Err(EntryError::Malformed));
    }
    Some(parse_entry(line, defaults))
}

fn parse_entry(line: &str, defaults: &EntryDefaults) -> Result<Candidate, EntryError> {
    let (protocol, rest) = match line.split_once("://") {
        Some((scheme, rest)) => (Some(parse_scheme(scheme)?), rest),
        None => (None, line),
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if let Some((userinfo, hostport)) = rest.rsplit_once('@') {
        let (user, pass) = userinfo.split_once(':').ok_or(EntryError::Malformed)?;
        let (host, port, tail) = split_host_port(hostport)?;
        if !tail.is_empty() {
            return Err(EntryError::Malformed);
        }
        let creds = match protocol {
            Some(_) => credentials(&percent_decode(user)?, &percent_decode(pass)?)?,
            None => credentials(user, pass)?,
        };
        return defaults.candidate(protocol, host, port, creds);
    }
    let (host, port, tail) = split_host_port(rest)?;
    let creds = match tail {
        "" => None,
        tail => {
            let (user, pass) = tail.split_once(':').ok_or(EntryError::Malformed)?;
            credentials(user, pass)?
        }
    };
    defaults.candidate(protocol, host, port, creds)
}

fn credentials(user: &str, pass: &str) -> Result<Option<Credentials>, EntryError> {
    if user.is_empty() {
        return Err(EntryError::Malformed);
    }
    Ok(Some(Credentials::new(user, pass)))
}

/// A URL's user or password, its `%XX` escapes decoded.
fn percent_decode(text: &str) -> Result<String, EntryError> {
    if !text.contains('%') {
        return Ok(text.to_owned());
    }
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let high = bytes.get(i + 1).copied().and_then(hex);
            let low = bytes.get(i + 2).copied().and_then(hex);
            let (Some(high), Some(low)) = (high, low) else {
                return Err(EntryError::InvalidEscape);
            };
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| EntryError::InvalidEscape)
}

/// Splits `host:port[:tail]` or `[v6]:port[:tail]`; the tail excludes its leading `:`.
fn split_host_port(text: &str) -> Result<(&str, u16, &str), EntryError> {
    let (host, after_host) = if let Some(rest) = text.strip_prefix('[') {
        let end = rest.find(']').ok_or(EntryError::Malformed)?;
        let after = rest[end + 1..]
            .strip_prefix(':')
            .ok_or(EntryError::Malformed)?;
        (&rest[..end], after)
    } else {
        text.split_once(':').ok_or(EntryError::Malformed)?
    };
    if host.is_empty() {
        return Err(EntryError::Malformed);
    }
    let (port, tail) = after_host.split_once(':').unwrap_or((after_host, ""));
    Ok((host, parse_port(port)?, tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::Protocol;

    #[test]
    fn accepts_every_documented_shape() {
        let body = "\
# vendor list
1.2.3.4:8080

socks5://5.6.7.8:1080
5.6.7.9:1080:alice:s3cret
http://bob:pw:with:colons@proxy.example:3128
https://h.example:443:carol:pw
[2001:db8::1]:8080
";
        let list = parse_text(body, &EntryDefaults::plain_http());
        assert!(list.dropped.is_empty(), "{:?}", list.dropped);
        let c = &list.candidates;
        assert_eq!(c.len(), 6);
        assert_eq!(
            (c[0].host.as_str(), c[0].port, c[0].protocol),
            ("1.2.3.4", 8080, Protocol::Http)
        );
        assert_eq!(c[1].protocol, Protocol::Socks5);
        assert_eq!(c[2].credentials.as_ref().unwrap().username, "alice");
        assert_eq!(
            c[2].credentials.as_ref().unwrap().password.expose(),
            "s3cret"
        );
        assert_eq!(
            c[3].credentials.as_ref().unwrap().password.expose(),
            "pw:with:colons"
        );
        assert_eq!(c[3].host, "proxy.example");
        assert_eq!(c[4].protocol, Protocol::Https);
        assert_eq!(c[5].host, "2001:db8::1");
    }

    /// The one candidate `line` makes: protocol, host, port and user:pass.
    fn one(line: &str) -> (Protocol, String, u16, Option<(String, String)>) {
        let list = parse_text(line, &EntryDefaults::plain_http());
        assert!(list.dropped.is_empty(), "{line}: {:?}", list.dropped);
        let [c] = list.candidates.as_slice() else {
            panic!("{line}: {:?}", list.candidates);
        };
        let credentials = c
            .credentials
            .as_ref()
            .map(|c| (c.username.clone(), c.password.expose().to_owned()));
        (c.protocol, c.host.clone(), c.port, credentials)
    }

    fn pair(user: &str, pass: &str) -> Option<(String, String)> {
        Some((user.to_owned(), pass.to_owned()))
    }

    #[test]
    fn shape_host_port() {
        assert_eq!(
            one("gw.vendor.example:8080"),
            (Protocol::Http, "gw.vendor.example".into(), 8080, None)
        );
    }

    #[test]
    fn shape_host_port_user_pass() {
        assert_eq!(
            one("203.0.113.5:3128:alice:s3cret"),
            (
                Protocol::Http,
                "203.0.113.5".into(),
                3128,
                pair("alice", "s3cret")
            )
        );
    }

    #[test]
    fn shape_user_pass_at_host_port_without_a_scheme() {
        assert_eq!(
            one("alice:s3cret@203.0.113.5:3128"),
            (
                Protocol::Http,
                "203.0.113.5".into(),
                3128,
                pair("alice", "s3cret")
            )
        );
        // The last `@` splits, so a password may hold one.
        assert_eq!(
            one("alice:p@ss@[2001:db8::1]:3128").3,
            pair("alice", "p@ss")
        );
    }

    #[test]
    fn shape_url_with_credentials() {
        assert_eq!(
            one("socks5://alice:s3cret@203.0.113.5:1080"),
            (
                Protocol::Socks5,
                "203.0.113.5".into(),
                1080,
                pair("alice", "s3cret")
            )
        );
        assert_eq!(one("socks5h://203.0.113.5:1080/").0, Protocol::Socks5);
    }

    #[test]
    fn a_url_s_credentials_are_percent_decoded() {
        assert_eq!(
            one("http://us%40er:p%3Ass%25w%2Fd@203.0.113.5:3128").3,
            pair("us@er", "p:ss%w/d")
        );
        assert_eq!(
            one("socks5://alice:caf%C3%A9@203.0.113.5:1080").3,
            pair("alice", "café")
        );
        // Not a URL: taken as written.
        assert_eq!(one("alice:100%@203.0.113.5:3128").3, pair("alice", "100%"));
        assert_eq!(
            one("203.0.113.5:3128:alice:p%40ss").3,
            pair("alice", "p%40ss")
        );
    }

    #[test]
    fn a_bad_escape_refuses_the_entry() {
        let body = "http://alice:100%@203.0.113.5:3128
                    http://alice:%zz@203.0.113.5:3128
                    http://al%4ice:pw@203.0.113.5:3128
                    http://alice:%C3%28@203.0.113.5:3128
                    http://alice:ok@203.0.113.5:3128
";
        let list = parse_text(body, &EntryDefaults::plain_http());
        assert_eq!(list.candidates.len(), 1);
        assert_eq!(list.dropped[&EntryError::InvalidEscape], 4);
    }

    #[test]
    fn malformed_lines_are_dropped_by_reason() {
        let body = "no-port\n1.2.3.4:0\n1.2.3.4:99999\nftp://1.2.3.4:21\n1.2.3.4:80:onlyuser\nbad line:80\n:80\n";
        let list = parse_text(body, &EntryDefaults::plain_http());
        assert!(list.candidates.is_empty());
        assert_eq!(list.dropped[&EntryError::Malformed], 4);
        assert_eq!(list.dropped[&EntryError::InvalidPort], 2);
        assert_eq!(list.dropped[&EntryError::UnknownScheme], 1);
    }

    #[test]
    fn defaults_fill_what_the_line_leaves_out() {
        let mut d = EntryDefaults::plain_http();
        d.protocol = Protocol::Socks5;
        d.credentials = Some(Credentials::new("default", "pw"));
        let list = parse_text("1.2.3.4:1080\n1.2.3.4:1081:own:pw\n", &d);
        assert_eq!(list.candidates[0].protocol, Protocol::Socks5);
        assert_eq!(
            list.candidates[0].credentials.as_ref().unwrap().username,
            "default"
        );
        assert_eq!(
            list.candidates[1].credentials.as_ref().unwrap().username,
            "own"
        );
    }
}
