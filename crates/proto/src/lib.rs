//! proxypool-proto: the proxy wire protocols, shared by the gateway (server side towards
//! clients, client side towards upstream proxies), the controller's health checker and
//! the simulated vendor.
//!
//! Module map:
//! - [`target`]: [`TargetAddr`], where a tunnel should lead (IP or domain, plus port).
//! - [`numeric_host`]: [`inet_aton_v4`], the IPv4 address a numeric host name denotes.
//! - [`socks5`]: RFC 1928 CONNECT and RFC 1929 username/password, client and server side.
//! - [`http_connect`]: HTTP/1.1 `CONNECT` client, `Proxy-Authorization: Basic` helpers and
//!   a bounded response-head reader.
//! - [`error`]: [`ProtoError`], which keeps I/O, malformed input, rejected authentication
//!   and a rejected request apart so callers can map each to 502/407/SOCKS reply codes.
//! - [`proxy_protocol`]: the PROXY protocol header (v1/v2) a trusted load balancer sends.
//! - [`timeout`]: [`with_timeout`], because every function here waits on the peer.
//!
//! Every function works over any `AsyncRead + AsyncWrite + Unpin` stream, reads only as
//! many bytes as the protocol step needs (never past a handshake into tunnel data) and
//! never grows a buffer beyond a fixed cap. **Timeouts are the caller's job**: none of
//! these functions gives up on a silent peer by itself; wrap them in [`with_timeout`]
//! (or `tokio::time::timeout`) with the deadline that fits the caller.

pub mod error;
pub mod http_connect;
pub mod numeric_host;
pub mod proxy_protocol;
pub mod socks5;
pub mod target;
pub mod timeout;

pub use error::ProtoError;
pub use numeric_host::inet_aton_v4;
pub use target::TargetAddr;
pub use timeout::with_timeout;
