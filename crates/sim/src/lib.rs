//! proxypool-sim: a simulated proxy vendor that makes the whole system run offline, for
//! tests, benches and `proxypool dev`.
//!
//! Everything listens on loopback and speaks the real protocols over real sockets. Each
//! upstream proxy makes its outgoing connections *from its own exit address* (127.0.0.x:
//! all of 127.0.0.0/8 is loopback on Linux), so the [`Origin`] can tell exits apart and a
//! test can see which upstream carried a request.
//!
//! Module map:
//! - [`upstream`]: [`UpstreamProxy`], one forward proxy (HTTP CONNECT + absolute-form, or
//!   SOCKS5; an HTTP one optionally over TLS) with credentials, latency, seeded failure
//!   rate and a dead switch, or a vendor's backconnect gateway ([`BackconnectConfig`]:
//!   the username's session picks the exit).
//! - [`origin`]: [`Origin`], an HTTP server that echoes the exit address it sees, and
//!   can ban chosen exits for chosen host names (answering 403, 429, ...), counted per
//!   (exit, host).
//! - [`vendor`]: [`VendorEndpoint`], the vendor's list URL (text or JSON) over a fleet of
//!   upstream proxies that rotates like a residential vendor, with fault knobs; beside it a
//!   paginated, token-authenticated, gzip JSON API, a text list behind HTTP Basic, and a
//!   list API in Webshare's shape.
//! - [`sim_vendor`]: [`SimVendor`], all of the above in one call, with a backconnect gateway.
//! - [`client`]: tiny GET helpers (direct, absolute-form, CONNECT, SOCKS5) for tests.
//! - `exit`, `faults`, `http`, `shutdown`: outgoing dials from an exit address (names
//!   under [`SIM_SUFFIX`], `.test`, resolve to loopback: the origin under many names),
//!   seeded failure dice, hyper plumbing, and shutdown-on-drop for every spawned task.
//!
//! Every handle stops its listener and all its connections when dropped.

pub mod client;
mod exit;
mod faults;
mod http;
pub mod origin;
mod shutdown;
pub mod sim_vendor;
pub mod upstream;
pub mod vendor;

pub use client::Fetched;
pub use exit::SIM_SUFFIX;
/// The status type of [`Origin::ban`].
pub use hyper::StatusCode;
pub use origin::{Echo, HostCount, Origin};
pub use sim_vendor::{BACKCONNECT_ACCOUNT, BACKCONNECT_PASSWORD, SimConfig, SimVendor};
pub use upstream::{
    BackconnectConfig, ProxyKind, SessionRequest, UpstreamProxy, UpstreamProxyConfig, UpstreamStats,
};
pub use vendor::{
    ApiConfig, ApiKnobs, ContentEncoding, FleetConfig, ListFaults, ListFormat, Listing,
    VendorConfig, VendorEndpoint, iso8601, webshare_valid,
};
