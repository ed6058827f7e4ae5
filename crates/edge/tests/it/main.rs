//! The edge scaffold's integration tests, one binary (waits on a condition are the test
//! kit's). One module per concern:
//!
//! - `eviction`: the global cap under a flood never closes a client mid-handshake (TLS),
//!   with half a head sent, or reading a kept-alive connection's next head.
//! - `proxy_protocol`: PROXY headers from listed balancers, per-IP caps behind them,
//!   silent connections closed at the first-byte deadline or by a shutdown.
//! - `tls`: TLS listeners: readable refusal of plain HTTP, certificates replaced on disk
//!   or by a reload, mutual TLS, a stalled handshake cut at the header timeout.

mod eviction;
mod proxy_protocol;
mod tls;
