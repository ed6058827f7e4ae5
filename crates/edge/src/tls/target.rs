//! [`Target`]: an `http://` or `https://` base URL split into what a dial needs, and the
//! dial itself.

use super::client::ClientTls;
use super::conn::Conn;
use std::io;
use tokio::net::TcpStream;

/// A base URL (`http://host:port` or `https://host[:port]`, optionally with a path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Whether the link speaks TLS.
    pub tls: bool,
    /// `host:port`, what the TCP connection dials and the `Host` header carries.
    pub authority: String,
    /// The host alone (what the server certificate must name).
    pub host: String,
    /// The path after the authority (`/` when there is none).
    pub path: String,
}

impl Target {
    /// Parses `url`; the port defaults to 80 / 443.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("{url:?} must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?} must name a host (and no user)"));
        }
        // `[v6]:port`, `[v6]`, `host:port`, `host`.
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (inner, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url:?}: unclosed [ in the host"))?;
            (format!("[{inner}]"), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (authority.to_owned(), None),
            }
        };
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| format!("{url:?}: bad port {port:?}"))?,
            None if tls => 443,
            None => 80,
        };
        if host.is_empty() || host == "[]" {
            return Err(format!("{url:?} must name a host"));
        }
        Ok(Target {
            tls,
            authority: format!("{host}:{port}"),
            host,
            path: path.to_owned(),
        })
    }

    /// Connects: TCP, then the TLS handshake when the target speaks TLS (with `tls`, or
    /// the public roots when `tls` is `None`).
    pub async fn dial(&self, tls: Option<&ClientTls>) -> io::Result<Conn> {
        let tcp = TcpStream::connect(&self.authority).await?;
        // Best effort: a socket that refuses the option still works, just with Nagle.
        let _ = tcp.set_nodelay(true);
        if !self.tls {
            return Ok(Conn::Plain(tcp));
        }
        match tls {
            Some(tls) => tls.handshake(&self.host, tcp).await,
            None => ClientTls::public_roots().handshake(&self.host, tcp).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_default_ports() {
        let t = Target::parse("https://ctl.example:8443/").unwrap();
        assert_eq!(
            (t.tls, t.authority.as_str(), t.host.as_str()),
            (true, "ctl.example:8443", "ctl.example")
        );
        let t = Target::parse("https://ctl.example/list?x=1").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("ctl.example:443", "/list?x=1")
        );
        let t = Target::parse("http://[::1]:80").unwrap();
        assert_eq!(
            (t.tls, t.authority.as_str(), t.host.as_str()),
            (false, "[::1]:80", "[::1]")
        );
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("https://user@x").is_err());
        assert!(Target::parse("https://x:port").is_err());
        assert!(Target::parse("https://").is_err());
    }
}
