//! SOCKS5: RFC 1928 `CONNECT` with RFC 1929 username/password, both sides.
//!
//! Client side ([`connect`]) is what the gateway and the checker use to tunnel through an
//! upstream SOCKS5 proxy. Server side is split into steps so the caller can check
//! credentials between the method negotiation and the request — the client waits for the
//! auth verdict before it sends its request, so there is nothing to read in between:
//!
//! ```no_run
//! # async fn f(mut s: tokio::net::TcpStream) -> Result<(), proxypool_proto::ProtoError> {
//! use proxypool_proto::socks5::{self, Reply};
//! let creds = socks5::negotiate(&mut s, true).await?;          // methods + RFC 1929 read
//! let ok = creds.as_ref().is_some_and(|c| c.username == "alice" && c.password == "pw");
//! if let Some(_) = creds {
//!     socks5::send_auth_result(&mut s, ok).await?;              // verdict
//! }
//! let target = socks5::read_request(&mut s).await?;             // CONNECT target
//! // ... dial the target ...
//! socks5::send_reply(&mut s, Reply::Succeeded, "0.0.0.0:0".parse().unwrap()).await?;
//! # Ok(()) }
//! ```
//!
//! [`accept`] runs the same steps with a synchronous verifier for callers that have one.
//! Every length on this wire is one byte, so reads are bounded by construction.

mod client;
mod reply;
mod server;
mod wire;

pub use client::connect;
pub use reply::Reply;
pub use server::{
    Credentials, ServerRequest, accept, negotiate, read_request, send_auth_result, send_reply,
};

#[cfg(test)]
mod tests;
