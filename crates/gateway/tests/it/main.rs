//! The gateway's integration tests, one binary; `common` is the harness (a running
//! gateway, a test controller, upstream proxies and origins on loopback, curl as the
//! client, one wait on a condition, and [`common::alone`] for the tests that read the
//! process-wide metrics, count threads or time a failover). One module per concern:
//!
//! - `access_formats`: squid and combined lines read back by parsers of those formats.
//! - `access_log`: one JSON line per request and refusal, sampling, reopening on reload.
//! - `access_refusals`: a refusal flood stays within its budget; served lines all written.
//! - `admin_token`: the admin bearer token on `/metrics` and `/status`, not on the probes.
//! - `bans`: ban-aware routing: banned exits retried elsewhere, cooldowns, feedback.
//! - `capacity_wait`: a full pool's CONNECT waits for a slot, bounded and reloadable.
//! - `control_loop`: register, ack, report, fencing, session end; refusals without upstream.
//! - `controller_failover`: a dead or hung controller costs one retry, not the leases.
//! - `controller_tls`: the control loop over `https://`, mutual TLS, the admin over TLS.
//! - `deltas`: snapshot deltas patched in, rebuilt from, or refused for the whole.
//! - `destinations`: the destination policy on every way in, before any upstream dial.
//! - `edges`: the listeners under hostile connections (floods, trickles, big heads).
//! - `eviction`: the global cap under a flood never closes a client mid-handshake or
//!   mid-head (SOCKS5 greeting, half an HTTP head, a kept-alive connection's next head).
//! - `fleet_inspection`: inspected tunnels in a fleet: a session's tunnel is ended by its
//!   owner with the owner's leaf and keeps its exit through every gateway; keyless ones
//!   are ended and served where they land.
//! - `fleet_listener`: the fleet listener: a member's pinned hop served as the client its
//!   headers name, uncharged; strangers and bare handshakes closed; the headers inert elsewhere.
//! - `fleet_relay`: three gateways as one fleet: a session or rotation key keeps its
//!   owner's exits over HTTP, CONNECT and SOCKS5 wherever it lands; keyless requests stay
//!   where they land; forged fleet headers are dropped; a stopped owner's keys move at once;
//!   an owner that stops answering is given up within the hop's bounds, a slow one waited for.
//! - `fleet_membership`: reports name the fleet listener, answers make the member list, a
//!   dead peer's hop asks the controller for a fresh one.
//! - `geo_selectors`: `-country-`, `-city-`, `-state-`, `-asn-` on every way in, sessions.
//! - `handshake_blame`: a handshake timeout blames a silent proxy, not a slow target.
//! - `header_case`: header names keep their case and order through forwarding.
//! - `inspection`: TLS inspection: inspected https retried past a ban, cooled, named and
//!   ticketed; who is not inspected (off, not asking, bypassed); inner requests for another
//!   host or a denied destination; rotation inside one tunnel; the leaf cache.
//! - `inspection_origin`: the gateway's own TLS to origins of inspected requests: an
//!   untrusted origin refused without blaming the proxy, through HTTP `CONNECT` and SOCKS5
//!   upstreams, kept alive per exit, ban retries, WebSockets relayed.
//! - `interop`: tinyproxy and microsocks as upstream proxies.
//! - `io_threads`: the I/O threads start and end with the gateway, none leaked.
//! - `lease_cut`: tunnels and kept-alive upstream connections close when the lease goes.
//! - `proxy_protocol`: client addresses behind a load balancer's PROXY header.
//! - `proxy_addresses`: a proxy name that resolves inside after its check is never dialed.
//! - `proxying`: curl through the gateway end to end: retries, staleness, shutdown.
//! - `readiness`: `/readyz`, `/status` and refusals follow leases and staleness.
//! - `rotation`: rotation strategies counted over known request sequences.
//! - `target_failures`: a tenant's failing targets never take shared proxies out.
//! - `tls_listener`: the TLS client listener (`--proxy https://`), its deadlines, mutual
//!   TLS by certificate name, a renewed certificate.
//! - `tls_listener_browser`: headless Chromium through the TLS listener, answering the
//!   gateway's 407 over DevTools; http and https pages; refused credentials or certificate.
//! - `tls_upstreams`: `https` upstream proxies verified against the upstream's CA.
//! - `tunnel`: CONNECT and SOCKS5 tunnels streaming both ways, write deadlines.

mod common;

mod access_formats;
mod access_log;
mod access_refusals;
mod admin_token;
mod bans;
mod capacity_wait;
mod control_loop;
mod controller_failover;
mod controller_tls;
mod deltas;
mod destinations;
mod edges;
mod eviction;
mod fleet_inspection;
mod fleet_listener;
mod fleet_membership;
mod fleet_relay;
mod geo_selectors;
mod handshake_blame;
mod header_case;
mod inspection;
mod inspection_origin;
mod interop;
mod io_threads;
mod lease_cut;
mod proxy_addresses;
mod proxy_protocol;
mod proxying;
mod readiness;
mod rotation;
mod target_failures;
mod tls_listener;
mod tls_listener_browser;
mod tls_upstreams;
mod tunnel;
