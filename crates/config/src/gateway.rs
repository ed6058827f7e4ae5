//! `[gateway]`: a gateway worker, in the file of a split gateway (`proxypool gateway`) or
//! beside the controller's sections in a `serve` file.
//!
//! A split gateway needs `worker_id`, `controller_url` (one URL, or a list of every
//! controller to fail over between) and `worker_token`; the in-process
//! gateway of `serve` talks to its own controller over loopback with a token made up at
//! start, so those keys are ignored there (and `worker_id` defaults to `local`).
//! Listeners and identity need a restart to change; everything else applies on a reload.
//!
//! `[gateway.destinations]` is the destination policy: which targets the gateway forwards
//! to at all, checked before any upstream dial. By default it refuses IP-literal targets in
//! loopback, private, link-local, CGNAT, multicast and unspecified ranges (IPv4-mapped IPv6
//! forms included) and ports other than 80, 443, 8080 and 8443. A target given as a name is
//! resolved by the upstream proxy, so only its port can be checked here.

use crate::check::Check;
use crate::duration::Millis;
use crate::limiter::{LimiterConfig, RatePolicy};
use crate::secret::SecretRef;
use crate::target::split_host_port;
use crate::validate::parse_cidr;
use proxypool_core::{PortSet, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::net::SocketAddr;

/// The worker id an in-process gateway gets when the file names none.
pub const LOCAL_WORKER: &str = "local";

/// The `[gateway]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySection {
    /// This worker's stable id (the controller leases proxies to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<WorkerId>,
    /// Base URL of the controllers' worker control API, `https://host:port` (or
    /// `http://host:port` on a trusted network): one, or a list of every controller, which
    /// the gateway moves along when the one it talks to stops answering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_url: Option<ControllerUrls>,
    /// The bearer token the controller expects (a split gateway sends it, so it resolves
    /// to the secret itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_token: Option<SecretRef>,
    /// With an `https://` controller URL: the CA bundle the controller must chain to
    /// (unset = the public roots) and this worker's client certificate (mutual TLS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_tls: Option<crate::tls::ClientTlsConfig>,
    /// Serve the admin listener over TLS (restart; the files are re-read when they change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_tls: Option<crate::tls::ServerTlsConfig>,
    pub listeners: Listeners,
    pub limits: Limits,
    pub rotation: Rotation,
    pub sessions: StickySessions,
    pub dial: DialConfig,
    /// Ban-aware rotation for plain HTTP: which origin statuses mean a ban, and retries.
    pub bans: BansConfig,
    /// Which targets clients may reach through the gateway.
    pub destinations: Destinations,
    /// The per-IP pre-authentication shield.
    pub shield: RatePolicy,
    /// The engine shared by the shield and the per-client policy limiter.
    pub limiter: LimiterConfig,
    pub control: ControlConfig,
    /// How long a graceful shutdown waits for in-flight requests and tunnels (and how long
    /// a removed client's tunnels may go on after a reload).
    pub shutdown_grace: Millis,
    /// Load balancers (CIDR blocks) in front of the client listeners: a connection from
    /// one must start with a PROXY protocol header (v1 or v2), whose source address is the
    /// client for the per-IP cap, the shield and allowlists. From anyone else a PROXY
    /// header is not believed. Empty = none (restart).
    pub trusted_proxies: Vec<String>,
    /// Threads that serve the client listeners' connections, each with its own
    /// single-threaded runtime, so a connection and its upstream connections stay on one
    /// thread. Unset = one per CPU the process may use; `0` = serve on the process's
    /// shared runtime (restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_threads: Option<usize>,
}

/// Most I/O threads a gateway may ask for.
pub const MAX_IO_THREADS: usize = 256;

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            worker_id: None,
            controller_url: None,
            worker_token: None,
            controller_tls: None,
            admin_tls: None,
            listeners: Listeners::default(),
            limits: Limits::default(),
            rotation: Rotation::default(),
            sessions: StickySessions::default(),
            dial: DialConfig::default(),
            bans: BansConfig::default(),
            destinations: Destinations::default(),
            // Generous: the shield only stops floods from one address before authentication.
            shield: RatePolicy::new(1_000.0, 2_000.0),
            limiter: LimiterConfig::default(),
            control: ControlConfig::default(),
            shutdown_grace: Millis::from_secs(10),
            trusted_proxies: Vec::new(),
            io_threads: None,
        }
    }
}

/// Where the gateway listens. A listener left out is not started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listeners {
    /// HTTP proxy (absolute-form requests and `CONNECT`).
    pub http: Option<SocketAddr>,
    /// SOCKS5 proxy.
    pub socks5: Option<SocketAddr>,
    /// Admin: `/metrics`, `/healthz`, `/status`, `POST /reload`.
    pub admin: Option<SocketAddr>,
}

/// Protection of the gateway itself against clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Client connections open at once over all listeners; more are closed on accept.
    pub max_connections: usize,
    /// Client connections open at once from one address over all listeners; more are
    /// closed on accept, before the global cap is touched (so one address cannot hold
    /// every connection). Applies live to the next accept.
    pub max_connections_per_ip: usize,
    /// Connections open at once on the admin listener (each address gets at most
    /// `max_connections_per_ip` of them). Bound to the listener: needs a restart.
    pub admin_max_connections: usize,
    /// Time a client has to send a complete request head (HTTP) or handshake (SOCKS5).
    pub header_read_timeout: Millis,
    /// Largest request head accepted (HTTP); at least 8192 (hyper's minimum buffer).
    pub max_header_bytes: usize,
    /// A kept-alive HTTP connection with no traffic for this long is closed.
    pub keepalive_idle: Millis,
    /// A tunnel (CONNECT or SOCKS5) with no traffic either way for this long is closed, and
    /// so is one whose write to a side that takes no bytes makes no progress for this long.
    pub tunnel_idle: Millis,
    /// Most proxies whose local counters are tracked (current snapshot plus draining ones).
    /// A snapshot that would exceed it is rejected and the old view kept (bounded memory).
    pub max_tracked_proxies: usize,
    /// Most sticky sessions remembered at once.
    pub max_sticky_sessions: usize,
    /// Most sticky sessions one client holds at once: a new session past it replaces the
    /// client's own oldest, so one client cannot fill the table. Applies live.
    pub max_sticky_sessions_per_client: usize,
    /// When every eligible proxy is at its `max_sessions`, how long a request waits for a
    /// slot to free before it is refused (`no_eligible_proxy`). `"0s"` refuses at once.
    /// At most 30 s. Applies live.
    pub capacity_wait: Millis,
    /// Requests of one client waiting for capacity at once; more are refused at once, so a
    /// waiting queue cannot be used to hold the gateway's memory. Applies live.
    pub max_capacity_waiters_per_client: usize,
    /// Requests waiting for capacity at once over all clients. Applies live.
    pub max_capacity_waiters: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            admin_max_connections: 64,
            header_read_timeout: Millis::from_secs(10),
            max_header_bytes: 16 * 1024,
            keepalive_idle: Millis::from_secs(60),
            tunnel_idle: Millis::from_secs(300),
            max_tracked_proxies: 100_000,
            max_sticky_sessions: 100_000,
            max_sticky_sessions_per_client: 10_000,
            capacity_wait: Millis(300),
            max_capacity_waiters_per_client: 256,
            max_capacity_waiters: 4_096,
        }
    }
}

/// How a proxy is picked for a request without a (live) sticky session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rotation {
    /// The next eligible proxy after the previous pick.
    #[default]
    RoundRobin,
    /// The eligible proxy with the fewest active + reserved uses.
    LeastConnections,
    /// The eligible proxy with the fewest open connections plus recent requests (a
    /// decaying count per proxy), so a burst on one proxy steers the next picks away.
    LeastUsed,
    /// A random eligible proxy.
    Random,
}

/// Sticky sessions (`-session-S-sesstime-MIN` in the username).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StickySessions {
    /// Lifetime of a session when the username gives no `sesstime`.
    pub default_minutes: u32,
    /// Largest `sesstime` accepted; larger values are refused, not clamped.
    pub max_minutes: u32,
}

impl Default for StickySessions {
    fn default() -> Self {
        Self {
            default_minutes: 10,
            max_minutes: 1440,
        }
    }
}

/// Dialing upstream proxies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DialConfig {
    /// TCP connect timeout to an upstream proxy.
    pub connect_timeout: Millis,
    /// Time for the upstream proxy's CONNECT / SOCKS5 handshake (and a plain HTTP
    /// response head).
    pub handshake_timeout: Millis,
    /// Proxies tried for one request before the client gets 502 (at least 1).
    pub max_attempts: u32,
    /// Consecutive failures after which a proxy is skipped for `failure_cooldown`.
    pub failure_threshold: u32,
    pub failure_cooldown: Millis,
    /// Idle kept-alive upstream connections kept per proxy for plain HTTP.
    pub pool_idle_per_proxy: usize,
    /// An idle upstream connection older than this is not reused.
    pub pool_idle_timeout: Millis,
}

impl Default for DialConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Millis::from_secs(5),
            handshake_timeout: Millis::from_secs(10),
            max_attempts: 3,
            failure_threshold: 3,
            failure_cooldown: Millis::from_secs(10),
            pool_idle_per_proxy: 32,
            pool_idle_timeout: Millis::from_secs(30),
        }
    }
}

/// `[gateway.bans]`: plain-HTTP requests that fail on one proxy are retried on another.
///
/// A failure before any response byte (connect, handshake) is retried for every request,
/// within `dial.max_attempts`. For a request without a body and with an idempotent method
/// (GET, HEAD, OPTIONS), an answer with one of `statuses` is taken as the origin banning
/// the proxy: the proxy is put on cooldown for the target's registrable domain
/// (`[cooldowns]`) and the request is sent again through another proxy, as is an
/// upstream's own 502 or 504; at most `max_retries` such retries per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BansConfig {
    /// Origin statuses that mean a ban (a client's `ban_statuses` replaces it); `[]` = off.
    pub statuses: Vec<u16>,
    /// Extra attempts through other proxies after a ban or an upstream 502/504 (0 = none).
    pub max_retries: u32,
}

impl Default for BansConfig {
    fn default() -> Self {
        Self {
            statuses: vec![403, 429],
            max_retries: 1,
        }
    }
}

/// Most retries after a ban one request may make.
pub const MAX_BAN_RETRIES: u32 = 5;

/// Checks a ban status list at `key` (`gateway.bans.statuses`, a client's `ban_statuses`).
pub(crate) fn validate_ban_statuses(c: &mut Check<'_>, key: &str, statuses: &[u16]) {
    if statuses.iter().any(|s| !(400..=599).contains(s)) {
        c.at(key, "every status must be from 400 to 599");
    }
    if statuses.len() > 16 {
        c.at(key, "at most 16 statuses");
    }
}

/// `[gateway.destinations]`: the destination policy, checked before any upstream dial.
///
/// An IP-literal target is refused when it lies in a `deny_cidrs` block, or in one of the
/// built-in ranges (loopback, RFC 1918 and ULA private, link-local, CGNAT, multicast,
/// unspecified; IPv4-mapped IPv6 forms too) and in no `allow_cidrs` block. `deny_cidrs`
/// always wins over `allow_cidrs`. Every target, IP or name, must have a port in `ports`
/// (or in the client's `allowed_ports`, which replaces it). Names are resolved by the
/// upstream proxy, never by the gateway, so the address ranges cannot apply to them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Destinations {
    /// Blocks lifted out of the built-in denied ranges (`127.0.0.1/32`, `10.1.0.0/16`).
    pub allow_cidrs: Vec<String>,
    /// Blocks refused besides the built-in ranges, even if `allow_cidrs` lists them.
    pub deny_cidrs: Vec<String>,
    /// Allowed destination ports: a non-empty list, or `"*"` for any port (default 80,
    /// 443, 8080, 8443: [`PortSet::default`]).
    pub ports: PortSet,
}

impl Destinations {
    /// Lets exactly `origin` through: its address as a one-host block in `allow_cidrs` and
    /// its port added to `ports` (unless any port is allowed). For a local origin in
    /// development and tests (`proxypool dev`'s simulated origin); the rest of the policy
    /// stays as it is.
    pub fn allow_origin(&mut self, origin: SocketAddr) {
        let ip = origin.ip().to_canonical();
        let width = if ip.is_ipv4() { 32 } else { 128 };
        self.allow_cidrs.push(format!("{ip}/{width}"));
        if let PortSet::Only(ports) = &mut self.ports {
            ports.insert(origin.port());
        }
    }
}

/// Checks a port list at `key` (`ports`, a client's `allowed_ports`).
pub(crate) fn validate_ports(c: &mut Check<'_>, key: &str, ports: &PortSet) {
    if let PortSet::Only(list) = ports {
        if list.is_empty() {
            c.at(key, "must list at least one port, or be \"*\" for any port");
        }
        if list.contains(&0) {
            c.at(key, "port 0 is not a destination");
        }
    }
}

/// Pacing of the control loop (the controller's grant decides the report interval and
/// long-poll wait; these bound what the worker itself does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlConfig {
    /// Timeout of one control call other than the long poll.
    pub request_timeout: Millis,
    /// First retry delay after a failed call; doubles up to `max_backoff`.
    pub initial_backoff: Millis,
    pub max_backoff: Millis,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            request_timeout: Millis::from_secs(5),
            initial_backoff: Millis(200),
            max_backoff: Millis::from_secs(5),
        }
    }
}

/// Checks every setting of a present `[gateway]`; `remote` adds what a split gateway needs.
pub(crate) fn validate(c: &mut Check<'_>, gateway: &mut GatewaySection, remote: bool) {
    if let Some(tls) = &mut gateway.controller_tls {
        crate::tls::check_client(c, "gateway.controller_tls", tls);
        if gateway
            .controller_url
            .as_ref()
            .is_some_and(|urls| urls.0.iter().any(|url| url.starts_with("http://")))
        {
            c.at(
                "gateway.controller_tls",
                "only for an https:// controller_url",
            );
        }
    }
    if let Some(tls) = &mut gateway.admin_tls {
        crate::tls::check_server(c, "gateway.admin_tls", tls);
    }
    validate_ban_statuses(c, "gateway.bans.statuses", &gateway.bans.statuses);
    c.require(
        gateway.bans.max_retries <= MAX_BAN_RETRIES,
        "gateway.bans.max_retries",
        "must be at most 5",
    );
    for (i, cidr) in gateway.trusted_proxies.iter().enumerate() {
        if let Err(message) = crate::validate::parse_cidr(cidr) {
            c.at(format!("gateway.trusted_proxies[{i}]"), message);
        }
    }
    let g = &*gateway;
    if g.io_threads.is_some_and(|threads| threads > MAX_IO_THREADS) {
        c.at(
            "gateway.io_threads",
            format!("must be at most {MAX_IO_THREADS} (0 = serve on the shared runtime)"),
        );
    }
    if g.listeners.http.is_none() && g.listeners.socks5.is_none() {
        c.at(
            "gateway.listeners",
            "at least one of listeners.http and listeners.socks5 is needed",
        );
    }
    if g.limits.max_header_bytes < 8192 {
        c.at(
            "gateway.limits.max_header_bytes",
            "must be at least 8192 (hyper's smallest read buffer)",
        );
    }
    for (key, value) in [
        ("limits.max_connections", g.limits.max_connections as u64),
        (
            "limits.max_connections_per_ip",
            g.limits.max_connections_per_ip as u64,
        ),
        (
            "limits.admin_max_connections",
            g.limits.admin_max_connections as u64,
        ),
        ("limits.header_read_timeout", g.limits.header_read_timeout.0),
        ("limits.keepalive_idle", g.limits.keepalive_idle.0),
        ("limits.tunnel_idle", g.limits.tunnel_idle.0),
        (
            "limits.max_tracked_proxies",
            g.limits.max_tracked_proxies as u64,
        ),
        (
            "limits.max_sticky_sessions",
            g.limits.max_sticky_sessions as u64,
        ),
        (
            "limits.max_sticky_sessions_per_client",
            g.limits.max_sticky_sessions_per_client as u64,
        ),
        (
            "limits.max_capacity_waiters_per_client",
            g.limits.max_capacity_waiters_per_client as u64,
        ),
        (
            "limits.max_capacity_waiters",
            g.limits.max_capacity_waiters as u64,
        ),
        (
            "sessions.default_minutes",
            u64::from(g.sessions.default_minutes),
        ),
        ("dial.connect_timeout", g.dial.connect_timeout.0),
        ("dial.handshake_timeout", g.dial.handshake_timeout.0),
        ("dial.max_attempts", u64::from(g.dial.max_attempts)),
        (
            "dial.failure_threshold",
            u64::from(g.dial.failure_threshold),
        ),
        ("control.request_timeout", g.control.request_timeout.0),
        ("control.initial_backoff", g.control.initial_backoff.0),
    ] {
        if value == 0 {
            c.at(format!("gateway.{key}"), "must be at least 1");
        }
    }
    if g.limits.capacity_wait.0 > MAX_CAPACITY_WAIT_MS {
        c.at(
            "gateway.limits.capacity_wait",
            "must be at most 30s (\"0s\" turns the wait off)",
        );
    }
    if g.sessions.default_minutes > g.sessions.max_minutes {
        c.at(
            "gateway.sessions.default_minutes",
            "must not exceed sessions.max_minutes",
        );
    }
    if g.control.max_backoff < g.control.initial_backoff {
        c.at(
            "gateway.control.max_backoff",
            "must not be below control.initial_backoff",
        );
    }
    for (key, blocks) in [
        ("allow_cidrs", &g.destinations.allow_cidrs),
        ("deny_cidrs", &g.destinations.deny_cidrs),
    ] {
        for (j, cidr) in blocks.iter().enumerate() {
            if let Err(message) = parse_cidr(cidr) {
                c.at(format!("gateway.destinations.{key}[{j}]"), message);
            }
        }
    }
    validate_ports(c, "gateway.destinations.ports", &g.destinations.ports);
    if let Err(message) = g.limiter.check(Some(&g.shield)) {
        c.at("gateway.shield", message);
    }
    if !remote {
        return;
    }
    for (key, present) in [
        ("worker_id", g.worker_id.is_some()),
        ("controller_url", g.controller_url.is_some()),
        ("worker_token", g.worker_token.is_some()),
    ] {
        if !present {
            c.at(format!("gateway.{key}"), "is required for a split gateway");
        }
    }
    if let Some(urls) = &g.controller_url {
        if urls.0.is_empty() {
            c.at(
                "gateway.controller_url",
                "must name at least one controller",
            );
        }
        if urls.0.len() > MAX_CONTROLLER_URLS {
            c.at(
                "gateway.controller_url",
                format!("at most {MAX_CONTROLLER_URLS} controllers"),
            );
        }
        for (i, url) in urls.0.iter().enumerate() {
            if let Err(message) = controller_url(url) {
                let path = match urls.0.len() {
                    1 => "gateway.controller_url".to_owned(),
                    _ => format!("gateway.controller_url[{i}]"),
                };
                c.at(path, message);
            }
        }
        let schemes: HashSet<bool> = urls.0.iter().map(|u| u.starts_with("https://")).collect();
        if schemes.len() > 1 {
            c.at(
                "gateway.controller_url",
                "mixes https:// and http://: every controller is reached the same way",
            );
        }
    }
    if let Some(token) = &mut gateway.worker_token {
        c.resolve_plain("gateway.worker_token", token);
    }
}

/// Most controllers one gateway lists.
pub const MAX_CONTROLLER_URLS: usize = 16;

/// The longest `limits.capacity_wait`: past this a client is better told at once.
const MAX_CAPACITY_WAIT_MS: u64 = 30_000;

/// `[gateway] controller_url`: one URL (`"https://a:7001"`) or a list of them, kept in the
/// order given (the gateway starts with the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerUrls(pub Vec<String>);

impl ControllerUrls {
    pub fn one(url: impl Into<String>) -> Self {
        ControllerUrls(vec![url.into()])
    }
}

impl Serialize for ControllerUrls {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => serializer.serialize_str(one),
            many => many.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ControllerUrls {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "a URL or a list of URLs")]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(url) => ControllerUrls(vec![url]),
            OneOrMany::Many(urls) => ControllerUrls(urls),
        })
    }
}

/// `https://host:port` (or `http://host:port`) with nothing after it but an optional `/`.
fn controller_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must look like https://host:port (or http://host:port)")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '@']) {
        return Err("must look like https://host:port (no path, no credentials)".into());
    }
    match split_host_port(authority)? {
        (_, Some(_)) => Ok(()),
        (_, None) => Err("must name the port: https://host:port".into()),
    }
}
