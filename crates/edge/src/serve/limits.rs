//! [`ServeLimits`]: the limits of one listener, and the smallest head cap hyper can
//! enforce ([`MIN_HEADER_BYTES`], defined in `proxypool-core` so the configuration checks
//! against the same number).

use crate::tls::ServerTls;
use std::net::IpAddr;
use std::time::Duration;

pub use proxypool_core::MIN_HEADER_BYTES;

/// The limits of one listener, as a plain struct (the binary fills it from the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeLimits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Open connections at once from one address; more are closed on accept.
    pub max_connections_per_ip: usize,
    /// IPv6 peers are counted per network of this prefix length by the per-address cap.
    pub ipv6_prefix: u8,
    /// Time a new connection has to send its first byte.
    pub first_byte_timeout: Duration,
    /// Time to send a complete request head (and to start the next one on a kept-alive
    /// connection).
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no traffic for this long is closed.
    pub keepalive_idle: Duration,
    /// Largest request head; over it the answer is 431 (at least [`MIN_HEADER_BYTES`]).
    pub max_header_bytes: usize,
    /// Load balancers (address, prefix length) whose connections start with a PROXY
    /// protocol header: read within `header_read_timeout`, its client is the connection's
    /// [`Peer`](super::Peer) and what the per-IP cap counts; without a valid one the connection is
    /// closed. Empty = nobody's PROXY header is read.
    pub proxy_protocol_from: Vec<(IpAddr, u8)>,
    /// Load balancers (address, prefix length) that carry many clients without naming them
    /// at the connection level (they name them in `X-Forwarded-For`, which the service
    /// reads): their connections count against the global cap only, never as one address.
    pub uncounted_per_ip: Vec<(IpAddr, u8)>,
    /// TLS on this listener (`None` = plain HTTP).
    pub tls: Option<ServerTls>,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: 1024,
            max_connections_per_ip: 128,
            ipv6_prefix: 64,
            first_byte_timeout: Duration::from_secs(3),
            header_read_timeout: Duration::from_secs(10),
            keepalive_idle: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            proxy_protocol_from: Vec::new(),
            uncounted_per_ip: Vec::new(),
            tls: None,
        }
    }
}
