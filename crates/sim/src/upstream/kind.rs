//! [`ProxyKind`]: which protocol an upstream proxy speaks.

use std::fmt;

/// Which protocol an upstream proxy speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyKind {
    /// HTTP proxy: `CONNECT` and absolute-form requests.
    Http,
    /// SOCKS5 proxy: `CONNECT` only.
    Socks5,
}

impl ProxyKind {
    /// The scheme vendors and curl use: `http` or `socks5`.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Socks5 => "socks5",
        }
    }
}

impl fmt::Display for ProxyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme())
    }
}
