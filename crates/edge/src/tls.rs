//! TLS for every HTTP link of proxypool, on rustls with the ring provider (no OpenSSL).
//!
//! - [`ServerTls`]: the server side of a scaffold listener ([`serve`](crate::serve())):
//!   the certificate chain and key from PEM files, optionally a CA bundle that client
//!   certificates must chain to (mutual TLS). The running `rustls::ServerConfig` sits
//!   behind an `ArcSwap`: every new connection takes the current one, so a certificate
//!   replaced on disk (noticed by polling the files' modification times, or on
//!   [`ServerTls::reload`]) is served to the next connection while open connections keep
//!   the session they negotiated. A reload that fails (a half-written file, a key that does
//!   not match) keeps the running configuration and is logged.
//! - [`ClientTls`]: the client side of every outbound HTTPS call (gateway to controller,
//!   `proxypool extract`, vendor lists): the configured CA bundle or else the public roots
//!   of `webpki-roots` (the same on every host, whatever its system store holds), and
//!   optionally a client certificate.
//! - [`Conn`]: one stream type for plain TCP and both TLS sides, so the scaffold and the
//!   HTTP clients have one IO type whatever the link speaks.
//! - [`Target`]: an `http://` or `https://` base URL split into what a dial needs.
//! - [`ProxyTrust`]: the TLS to an upstream's `https` proxies (CA bundle, server name),
//!   shared by the gateway's dial and the controller's checker.
//!
//! Module map: `server` ([`ServerTls`], [`ServerTlsFiles`]), `client` ([`ClientTls`],
//! [`ClientTlsFiles`]), `proxy_trust` ([`ProxyTrust`]), `target` ([`Target`]), `conn`
//! ([`Conn`]), `load` (the one crypto
//! provider; certificates, keys and roots from PEM files), `error` ([`TlsError`]).

mod client;
mod conn;
mod error;
mod load;
mod proxy_trust;
mod server;
mod target;

pub use client::{ClientTls, ClientTlsFiles};
pub use conn::Conn;
pub use error::TlsError;
pub use load::{load_certs, load_key, load_roots};
pub use proxy_trust::ProxyTrust;
pub use server::{DEFAULT_POLL, ServerTls, ServerTlsFiles};
pub use target::Target;
