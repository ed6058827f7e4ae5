//! Where a tunnel leads: an IP socket address or a domain name with a port.
//!
//! Domains are kept as names (not resolved here) because with SOCKS5 `socks5h` semantics
//! and HTTP `CONNECT` the proxy at the far end resolves them, not us.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use crate::{ProtoError, inet_aton_v4};

/// The longest domain name SOCKS5 can carry (its length is one byte).
pub const MAX_DOMAIN_LEN: usize = 255;

/// A tunnel destination.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetAddr {
    /// An IPv4 or IPv6 address and port.
    Ip(SocketAddr),
    /// A domain name (1..=255 bytes, no whitespace, `:` or control characters) and port.
    Domain(String, u16),
}

impl TargetAddr {
    /// A domain target, validated as [`TargetAddr::from_str`] would. A name that is an IP
    /// literal becomes [`TargetAddr::Ip`] so that equal destinations compare equal; so does
    /// a numeric IPv4 form (`2130706433`, `0x7f000001`, `127.1`, see [`inet_aton_v4`]),
    /// because a resolver at the far end would dial that address, and the destination
    /// policy must see the address that is dialed.
    pub fn domain(host: impl AsRef<str> + Into<String>, port: u16) -> Result<Self, ProtoError> {
        // Read borrowed first: an address (the forward hot path's usual target) needs no
        // string of its own.
        let text = host.as_ref();
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Self::Ip(SocketAddr::new(ip, port)));
        }
        validate_domain(text)?;
        if let Some(ip) = inet_aton_v4(text) {
            return Ok(Self::Ip(SocketAddr::new(ip.into(), port)));
        }
        Ok(Self::Domain(host.into(), port))
    }

    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            Self::Ip(addr) => addr.port(),
            Self::Domain(_, port) => *port,
        }
    }

    /// The host part as text: the IP (IPv6 without brackets) or the domain.
    pub fn host(&self) -> String {
        match self {
            Self::Ip(addr) => addr.ip().to_string(),
            Self::Domain(host, _) => host.clone(),
        }
    }
}

impl From<SocketAddr> for TargetAddr {
    fn from(addr: SocketAddr) -> Self {
        Self::Ip(addr)
    }
}

/// `1.2.3.4:80`, `[::1]:443` or `example.com:8080`: the HTTP `CONNECT` authority form.
impl fmt::Display for TargetAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(addr) => write!(f, "{addr}"),
            Self::Domain(host, port) => write!(f, "{host}:{port}"),
        }
    }
}

/// Parses `host:port`, where host is an IPv4 address, a bracketed IPv6 address or a
/// domain name. The port is required.
impl FromStr for TargetAddr {
    type Err = ProtoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Self::Ip(addr));
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| ProtoError::malformed("target", "expected host:port"))?;
        let port = port.parse::<u16>().map_err(|_| {
            ProtoError::malformed("target", "port is not a number between 0 and 65535")
        })?;
        if host.starts_with('[') || host.contains(':') {
            return Err(ProtoError::malformed(
                "target",
                "IPv6 addresses must be bracketed and valid",
            ));
        }
        Self::domain(host, port)
    }
}

fn validate_domain(host: &str) -> Result<(), ProtoError> {
    if host.is_empty() {
        return Err(ProtoError::malformed("target", "empty host"));
    }
    if host.len() > MAX_DOMAIN_LEN {
        return Err(ProtoError::malformed(
            "target",
            "host longer than 255 bytes",
        ));
    }
    // The name ends up in a CONNECT request line and in logs: refuse anything that could
    // split a line or a header, and ':' which would make `host:port` ambiguous.
    if host
        .bytes()
        .any(|b| b.is_ascii_control() || b.is_ascii_whitespace() || b == b':' || b == b'/')
    {
        return Err(ProtoError::malformed(
            "target",
            "host contains whitespace, control characters, ':' or '/'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_every_form() {
        for text in ["1.2.3.4:80", "[::1]:443", "example.com:8080", "a:0"] {
            let target: TargetAddr = text.parse().unwrap();
            assert_eq!(target.to_string(), text);
        }
        assert_eq!(
            "example.com:1".parse::<TargetAddr>().unwrap(),
            TargetAddr::Domain("example.com".into(), 1)
        );
        assert_eq!(
            TargetAddr::domain("127.0.0.1", 9).unwrap(),
            TargetAddr::Ip("127.0.0.1:9".parse().unwrap())
        );
        for numeric in [
            "2130706434:80",
            "0x7f000002:80",
            "0177.0.0.2:80",
            "127.2:80",
        ] {
            let target: TargetAddr = numeric.parse().unwrap();
            assert_eq!(
                target,
                TargetAddr::Ip("127.0.0.2:80".parse().unwrap()),
                "{numeric}"
            );
            assert_eq!(target.to_string(), "127.0.0.2:80");
        }
        assert_eq!(
            TargetAddr::domain("2852039166", 80).unwrap(),
            TargetAddr::Ip("169.254.169.254:80".parse().unwrap())
        );
        // Not an inet_aton form: still a name.
        assert_eq!(
            TargetAddr::domain("1.2.3.4.", 80).unwrap(),
            TargetAddr::Domain("1.2.3.4.".into(), 80)
        );
        let v6: TargetAddr = "[::1]:443".parse().unwrap();
        assert_eq!(v6.host(), "::1");
        assert_eq!(v6.port(), 443);
    }

    #[test]
    fn rejects_malformed_targets() {
        for text in [
            "",
            "example.com",
            "example.com:",
            "example.com:http",
            "example.com:65536",
            ":80",
            "::1:80",
            "[::1:80",
            "bad host:80",
            "evil\r\nX-Injected: 1:80",
            "a/b:80",
        ] {
            let err = text.parse::<TargetAddr>().unwrap_err();
            assert!(
                matches!(err, ProtoError::Malformed { .. }),
                "{text:?}: {err}"
            );
        }
        let long = format!("{}:80", "a".repeat(256));
        assert!(long.parse::<TargetAddr>().is_err());
        let max = format!("{}:80", "a".repeat(255));
        assert!(max.parse::<TargetAddr>().is_ok());
    }
}
