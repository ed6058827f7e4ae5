//! Outbound: the upstream side of a routed request. Dialing through an upstream proxy
//! (HTTP `CONNECT` or SOCKS5, fault classification), plain-HTTP forwarding over kept-alive
//! upstream connections, and the byte relay of tunnels (over a bare socket, or over TLS to
//! an `https` proxy), closed when the proxy's lease goes.
//!
//! Outbound is handed an admitted, authenticated request by [`crate::inbound`] and uses
//! [`crate::routing`] to pick (and re-pick) proxies; it reads the gateway's
//! [`crate::context::GatewayContext`], never the inbound-only state.

pub(crate) mod dial;
pub(crate) mod forward;
pub(crate) mod heard;
pub(crate) mod peeked_head;
pub(crate) mod relay;
pub(crate) mod stream_tunnel;
pub(crate) mod tunnel;
