//! proxypool-gateway: the gateway worker — a forward proxy (HTTP absolute-form, HTTP
//! `CONNECT`, SOCKS5) that rotates client traffic through the pooled upstream proxies
//! the controller assigned to it, reading only a local snapshot on the hot path.
//!
//! ```no_run
//! # async fn f(config: proxypool_gateway::GatewayConfig) -> Result<(), proxypool_gateway::GatewayError> {
//! let gateway = proxypool_gateway::Gateway::bind(config).await?;
//! println!("http proxy on {:?}", gateway.http_addr());
//! gateway.run(proxypool_gateway::shutdown_signal()).await;
//! # Ok(()) }
//! ```
//!
//! # Per request
//!
//! (at accept: per-IP connection cap → per-IP shield → global connection cap) →
//! per-IP shield → snapshot (503 `gateway_stale` when the controller has been
//! unreachable for longer than `max_staleness_ms`) → proxy credentials and username
//! selectors → client policy limiter → destination policy (403 `destination_denied` for
//! internal IP literals and ports outside the list) → connection cap → pick a proxy (rotation or
//! sticky session; reserve a slot; only proxies before their lease cutoff; 503
//! `no_leased_proxies` when none the request could use has a live lease, `no_eligible_proxy`
//! when the selectors match nothing free, `domain_cooling_down` when every proxy it could
//! use is cooling down for the target's domain) → dial (retry elsewhere on proxy faults)
//! → relay (closed when the proxy's lease goes); a bodyless idempotent plain-HTTP request
//! answered with a ban status goes again through another proxy.
//! Nothing on that path is remote: an atomically swapped immutable view plus local
//! atomics. Refusals carry `X-Proxypool-Error` (HTTP) or the fitting SOCKS5 reply.
//!
//! # Module map
//!
//! The folders follow a request: [`inbound`] admits it, [`routing`] picks its proxy,
//! [`outbound`] dials and relays. Each layer imports only the ones below it:
//!
//! ```text
//! gateway, reload, admin               bind and run, reload, operators' listener
//!   -> inbound                         accept, I/O threads, HTTP and SOCKS5 listeners, auth, admission
//!     -> state                         Shared: the context plus the shield and connection caps
//!       -> control                     the control loop and client, the lease keeper
//!       -> inspection                  TLS inspection: the CA's leaves, an inspected CONNECT's end
//!       -> fleet                       sticky keys' owners among the gateways, the hop to them
//!       -> outbound                    dial, forward plain HTTP, relay tunnels
//!         -> context                   GatewayContext: settings, store, router, bans, metrics, usage, clock
//!           -> routing,                selectors, sticky, rotation, pick, wait, bans, the router;
//!              proxy_addresses         the proxies' judged addresses, kept fresh off the hot path
//!             -> snapshot              the immutable indexed view, its store, readiness
//!               -> metrics, config,    metric handles; settings (which compile their policies);
//!                  access              each request's account: duration histograms, access log
//!                 -> proxies, policy   per-proxy slots; shield, limiters, allowlists, destinations
//!                   -> usage, refusal, failure, io, session_id, origin_tls
//! ```
//!
//! | module | what it is for |
//! | --- | --- |
//! | `gateway` | [`Gateway`]: bind, run, graceful shutdown |
//! | `reload` | [`GatewayReload`]: settings swapped live |
//! | `admin` | the admin listener (on the edge's server scaffold): `/healthz`, `/readyz`, `/status`, `/metrics` |
//! | `control` | control-API client and loop (session, snapshots, acks, reports), the lease keeper |
//! | `state` | `Shared`: the context plus what only inbound needs (shield, connection caps) |
//! | `inbound` | the accept loop and per-core I/O threads, HTTP and SOCKS5 listeners, authentication, admission |
//! | `inspection` | TLS inspection: the operator's CA and the leaves it mints (a bounded cache), an inspected `CONNECT` ended at the gateway and the https requests inside admitted and forwarded one by one |
//! | `fleet` | sessions across gateways: the members the controllers list, each key's owner by rendezvous hashing, the pinned TLS hop a keyed request is relayed over (the entry side in `inbound::relay`, the owner's listener `inbound::fleet_accept`) |
//! | `outbound` | dialing through upstream proxies, plain-HTTP forwarding, tunnels and their relay |
//! | `context` | `GatewayContext`: what routing and outbound read, and the gateway's phase |
//! | `routing` | username selectors, sticky sessions, rotation, eligibility and the pick, capacity wait, bans, the router |
//! | `proxy_addresses` | the addresses each proxy is dialed at: host names resolved off the hot path, judged by the internal-address rule for fetched lists; the resolver tests replace |
//! | `snapshot` | the immutable indexed view, its atomic store (staleness), readiness |
//! | `proxies` | per-proxy slots kept across snapshots: capacity, cutoff, cooldowns, recent use, idle upstream connections |
//! | `policy` | the per-IP shield, per-client limiters and connection cap, IP allowlists, destination policy, ban statuses |
//! | `config` | [`GatewayConfig`] and its validation |
//! | `access` | each request's account when it ends: request and tunnel duration histograms, the access log (a bounded queue, a writer thread, reopened on reload) |
//! | `metrics`, `usage` | metric handles (the recorder is `proxypool-metrics`); usage per (client, upstream) for reports |
//! | `refusal`, `io`, `session_id` | every refusal with its status, code and SOCKS5 reply; activity-stamped sockets; session and instance ids |
//! | `failure` | whom a failed dial or forwarded request is blamed on: the proxy (counted against it) or the target (never) |
//! | `origin_tls` | how origins are verified when the gateway speaks TLS to them itself (inspected requests): `origin_ca` or the public roots, sessions resumed per exit |

mod access;
mod admin;
mod config;
mod context;
mod control;
mod failure;
mod fleet;
mod gateway;
mod inbound;
mod inspection;
mod io;
mod metrics;
mod origin_tls;
mod outbound;
mod policy;
mod proxies;
mod proxy_addresses;
mod refusal;
mod reload;
mod routing;
mod session_id;
mod snapshot;
mod state;
mod usage;

pub use config::{
    AccessLogConfig, AccessLogFormat, BansConfig, ConfigError, ControlConfig, Destinations,
    DialConfig, FleetConfig, GatewayConfig, Limits, Listeners, Rotation, StickySessions,
};
pub use gateway::{Gateway, GatewayError, shutdown_signal};
pub use inspection::check_ca;
pub use policy::destination::DestinationPolicy;
pub use proxy_addresses::{
    DEFAULT_REFRESH, Lookup, MAX_STALE, ProxyResolution, ProxyResolver, SystemResolver,
};
pub use refusal::{ERROR_HEADER, Refusal};
pub use reload::GatewayReload;
pub use routing::route::{ATTEMPTS_HEADER, PROXY_HEADER, SESSION_HEADER, TICKET_HEADER};
pub use routing::selector::{Selectors, parse_selectors, split_client};
