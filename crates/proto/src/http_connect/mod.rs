//! HTTP/1.1 `CONNECT` through an HTTP proxy, and `Proxy-Authorization: Basic`.
//!
//! [`connect`] is the client side the gateway and the checker use towards upstream HTTP
//! proxies. [`basic_auth_value`] / [`parse_basic_auth`] build and read Basic credentials
//! (the gateway parses its clients' `Proxy-Authorization` with the latter).
//! [`read_response_head`] reads one response head without reading past it, capped at
//! [`MAX_RESPONSE_HEAD`].

mod basic;
mod client;
mod head;

pub use basic::{basic_auth_value, parse_basic_auth};
pub use client::connect;
pub use head::{MAX_RESPONSE_HEAD, ResponseHead, read_response_head};
