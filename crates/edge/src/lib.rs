//! proxypool's HTTP edge: what every listener does before a request reaches its routes,
//! and what the client API and the worker control API share when they answer.
//!
//! - [`serve`](mod@serve): the server scaffold of the client API, the control API and the
//!   gateway's admin listener: admission at accept, hyper HTTP/1.1 with header-read and
//!   keep-alive timeouts and a head size cap (431 in the JSON error shape), graceful
//!   shutdown; inside: `limits`, `handshake` (PROXY header, TLS), `connection`,
//!   `activity`, `head_guard` (the JSON 431).
//! - [`gate`]: the per-address and global connection caps taken at accept (IPv6 counted
//!   per network; at the global cap an unused connection is closed for the newcomer); the
//!   gateway's proxy listeners use [`gate::PerIpLimit`] and [`gate::ConnectionCap`] in
//!   their own accept loop.
//! - [`error`]: the error body `{"error":{"code","message"},"request_id"}`, the shared
//!   codes and the one `PoolError` mapping.
//! - [`request_id`]: request id generation and the `X-Request-Id` header.
//! - [`body`]: JSON request bodies with a cap enforced while reading.
//! - [`auth`]: the bearer token of a request, from its headers alone.
//! - [`tls`]: TLS on rustls (ring): the listeners' certificates (reloaded when the files
//!   change) and optional client-certificate check, the outbound links' roots and client
//!   certificate, one stream type for plain and TLS connections; inside: `server`,
//!   `client`, `target`, `conn`, `load` (provider and PEM files), `error`.
//!
//! It depends on `proxypool-core`, hyper/tokio and rustls only (no axum, no store), so the gateway
//! can use it.

pub mod auth;
pub mod body;
pub mod error;
pub mod gate;
pub mod request_id;
pub mod serve;
pub mod tls;

pub use auth::bearer_token;
pub use body::{BodyError, read_json};
pub use error::{Code, PoolAnswer, error_body, error_response, from_pool};
pub use gate::{
    Admitted, ConnectionCap, ConnectionGate, ConnectionMark, IpTicket, OpenConnection, PerIpLimit,
    Refused,
};
/// Adapts a tower service (an axum `Router`) to [`serve`](serve()).
pub use hyper_util::service::TowerToHyperService;
pub use request_id::{REQUEST_ID_HEADER, RequestId};
pub use serve::{MIN_HEADER_BYTES, Peer, ServeLimits, serve};
pub use tls::{
    ClientTls, ClientTlsFiles, Conn, ProxyTrust, ServerTls, ServerTlsFiles, Target, TlsError,
};
