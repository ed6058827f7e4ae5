//! [`Scheme`]: how a forwarded request reaches its origin.

/// How a forwarded request reaches its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// In clear: absolute form to an HTTP proxy, origin form over a SOCKS5 tunnel.
    Http,
    /// TLS to the origin, made and verified by the gateway, inside a tunnel through the
    /// proxy (HTTP `CONNECT` or SOCKS5): the inner requests of an inspected `CONNECT`.
    Https,
}
