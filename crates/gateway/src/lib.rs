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
//! | module | what it is for |
//! | --- | --- |
//! | `gateway` | [`Gateway`]: bind, run, graceful shutdown |
//! | `config` | [`GatewayConfig`] and its validation |
//! | `accept` | the one accept loop of the HTTP and SOCKS5 listeners: per-IP cap, shield, global cap |
//! | `io_threads` | the client listeners' connections served on per-core threads, each with its own runtime (`io_threads`) |
//! | `http_proxy` | HTTP listener: requests, `CONNECT`, idle watchdog |
//! | `socks` | SOCKS5 listener |
//! | `forward` | plain HTTP forwarding, upstream connection pool, bodies |
//! | `tunnel` | buffer-less-when-idle relay |
//! | `dial` | dialing through upstream proxies, fault classification |
//! | `peeked_head` | an HTTP upstream's `CONNECT` answer read in two system calls |
//! | `route` | sticky session → pick → dial → bounded retries |
//! | `bans` | cooldowns per (proxy, target domain): bans seen, the cluster's, session feedback; the queue for the reports |
//! | `select` | candidate indexes, eligibility, rotation strategies |
//! | `sticky` | the sticky-session table |
//! | `rotation` | rotation every N requests or T, sliding sessions, `-newip`, least-used counts |
//! | `capacity` | packed active/reserved counters, failure counts, registry |
//! | `cutoff` | per proxy: when the gateway must stop relaying through it (lease end less a skew margin, or the store's "no longer yours") and the signal that closes its tunnels and connections |
//! | `keeper` | the task that cuts proxies whose lease passed unextended |
//! | `readiness` | ready or why not (`/readyz`, `/status`, gauges) |
//! | `snapshot` | the immutable indexed view and its atomic store (staleness) |
//! | `auth`, `selector`, `cidr` | credentials, username selectors, IP allowlists |
//! | `destination` | the destination policy: targets and ports refused before any dial |
//! | `admission` | per-IP shield, per-client policy limiter, per-client connection cap |
//! | `control` | control-API client and the loop (session, snapshots, acks, reports) |
//! | `metrics`, `admin` | metric handles (the recorder is `proxypool-metrics`), admin listener (on the edge's server scaffold) |
//! | `refusal` | every refusal with its status, code and SOCKS5 reply |
//! | `io`, `state` | activity-stamped sockets, shared state (with the [`proxypool_core::Clock`]) |

mod accept;
mod admin;
mod admission;
mod auth;
mod bans;
mod capacity;
mod cidr;
mod config;
mod control;
mod cutoff;
mod destination;
mod dial;
mod forward;
mod gateway;
mod http_proxy;
mod io;
mod io_threads;
mod keeper;
mod metrics;
mod peeked_head;
mod readiness;
mod refusal;
mod reload;
mod rotation;
mod route;
mod select;
mod selector;
mod snapshot;
mod socks;
mod state;
mod sticky;
mod tunnel;
mod usage;
mod wait;

pub use config::{
    BansConfig, ConfigError, ControlConfig, Destinations, DialConfig, GatewayConfig, Limits,
    Listeners, Rotation, StickySessions,
};
pub use destination::DestinationPolicy;
pub use gateway::{Gateway, GatewayError, shutdown_signal};
pub use refusal::{ERROR_HEADER, Refusal};
pub use reload::GatewayReload;
pub use route::{ATTEMPTS_HEADER, PROXY_HEADER, SESSION_HEADER};
pub use selector::{Selectors, parse_selectors, split_client};
