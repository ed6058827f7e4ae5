//! Inbound: where a client's connection enters and is admitted, before any proxy is
//! picked. The accept loop and the per-core I/O threads, the HTTP (plain and inside TLS,
//! with mutual TLS's client identities) and SOCKS5 listeners, the fleet listener (other
//! gateways' relayed requests, `fleet_accept`),
//! authentication against the snapshot's clients, and the admission steps that need the
//! gateway's shared state (the destination check).
//!
//! Inbound hands an admitted request to [`crate::routing`] (which proxy) and
//! [`crate::outbound`] (dial, forward, relay); nothing below it imports it.

pub(crate) mod accept;
pub(crate) mod admission;
pub(crate) mod auth;
pub(crate) mod client_cert;
pub(crate) mod fleet_accept;
pub(crate) mod http;
pub(crate) mod io_threads;
pub(crate) mod relay;
pub(crate) mod socks;
pub(crate) mod tls_accept;
