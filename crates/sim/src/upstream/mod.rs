//! One simulated upstream proxy: a real forward proxy on loopback whose outgoing
//! connections leave from its own exit address.
//!
//! HTTP kind: `CONNECT` tunnels and absolute-form plain HTTP requests (keep-alive), with
//! `Proxy-Authorization: Basic` (wrong or missing → 407). SOCKS5 kind: RFC 1928 `CONNECT`
//! with RFC 1929 username/password (wrong → auth failure). Knobs, all live: `dead`
//! (accept, then close at once without a byte), `latency` (added before each answer),
//! `failure_rate` (seeded: HTTP 502 / SOCKS general failure). Either kind can be a vendor's
//! backconnect gateway instead of one proxy: the username picks the exit (`backconnect`).

//! Module map: `proxy` ([`UpstreamProxy`] and its [`UpstreamProxyConfig`]), `kind`
//! ([`ProxyKind`]), `shared` (the state the handle shares with the connection tasks, and
//! what both accept loops do with a connection), `backconnect` (sessions in the username),
//! `http` and `socks` (the two protocols),
//! `stats` ([`UpstreamStats`]).

mod backconnect;
mod http;
mod kind;
mod proxy;
mod shared;
mod socks;
mod stats;

pub use backconnect::{BackconnectConfig, SessionRequest};
pub use kind::ProxyKind;
pub use proxy::{UpstreamProxy, UpstreamProxyConfig};
pub use stats::UpstreamStats;
