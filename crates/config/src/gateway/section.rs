//! The `[gateway]` table itself: identity, controllers, TLS, listeners, the shield and its
//! engine, balancers and I/O threads, and the check of a whole present `[gateway]`, which
//! runs each sub-table's own checks and adds what a split gateway needs.

use super::access_log::{self, AccessLogConfig};
use super::bans::{self, BansConfig};
use super::control::{self, ControlConfig, ControllerUrls};
use super::destinations::{self, Destinations};
use super::dial::{self, DialConfig};
use super::fleet::{self, FleetConfig};
use super::inspection::{self, InspectionConfig};
use super::limits::{self, Limits};
use super::rotation::{self, Rotation, StickySessions};
use crate::check::Check;
use crate::cidr;
use crate::duration::Millis;
use crate::limiter::{LimiterConfig, RatePolicy};
use crate::secret::SecretRef;
use proxypool_core::WorkerId;
use serde::{Deserialize, Serialize};
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
    /// The certificate of the TLS client listener (`listeners.https`), required with it and
    /// only with it; a `client_ca` makes clients present a certificate chaining to it
    /// (mutual TLS; a certificate named in a client's `tls_names` authenticates as that
    /// client). Restart to change the paths; the files are re-read when they change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ServerTlsConfig>,
    /// The bearer token the admin listener's `/metrics` and `/status` then require, and
    /// show every tenant's series and detail to (resolved to a salted hash; applies live
    /// on reload). `/healthz` and `/readyz` stay open for orchestrators. Unset: `/metrics`
    /// and `/status` are open but show only the aggregate; `check-config` warns when the
    /// listener is then off loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<SecretRef>,
    pub listeners: Listeners,
    pub limits: Limits,
    pub rotation: Rotation,
    pub sessions: StickySessions,
    pub dial: DialConfig,
    /// Ban-aware rotation for plain HTTP: which origin statuses mean a ban, and retries.
    pub bans: BansConfig,
    /// Which targets clients may reach through the gateway.
    pub destinations: Destinations,
    /// TLS inspection of opted-in clients' `CONNECT` tunnels; unset = never inspected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inspection: Option<InspectionConfig>,
    /// This gateway as a fleet member (sticky sessions and rotation keys shared with the
    /// other gateways); unset = none, every key stays here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetConfig>,
    /// One line per request and tunnel, for operators.
    pub access_log: AccessLogConfig,
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
            tls: None,
            admin_token: None,
            listeners: Listeners::default(),
            limits: Limits::default(),
            rotation: Rotation::default(),
            sessions: StickySessions::default(),
            dial: DialConfig::default(),
            bans: BansConfig::default(),
            destinations: Destinations::default(),
            inspection: None,
            fleet: None,
            access_log: AccessLogConfig::default(),
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
    /// The same HTTP proxy inside TLS (`--proxy https://...`), with `[gateway.tls]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<SocketAddr>,
    /// SOCKS5 proxy.
    pub socks5: Option<SocketAddr>,
    /// Admin: `/metrics`, `/healthz`, `/status`, `POST /reload`.
    pub admin: Option<SocketAddr>,
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
    match (&mut gateway.tls, gateway.listeners.https) {
        (Some(tls), Some(_)) => crate::tls::check_server(c, "gateway.tls", tls),
        (None, Some(_)) => c.at(
            "gateway.tls",
            "is required with listeners.https: the TLS listener needs its cert and key",
        ),
        (Some(_), None) => c.at(
            "gateway.tls",
            "is only for the TLS client listener: set listeners.https, or remove [gateway.tls]",
        ),
        (None, None) => {}
    }
    if let Some(token) = &mut gateway.admin_token {
        c.resolve_verifier("gateway.admin_token", "admin_token", token);
    }
    bans::validate(c, &gateway.bans);
    if let Some(config) = &mut gateway.inspection {
        inspection::validate(c, config);
    }
    if let Some(config) = &mut gateway.fleet {
        fleet::validate(c, config);
    }
    access_log::validate(c, &mut gateway.access_log);
    cidr::check_list(c, "gateway.trusted_proxies", &gateway.trusted_proxies);
    let g = &*gateway;
    if g.io_threads.is_some_and(|threads| threads > MAX_IO_THREADS) {
        c.at(
            "gateway.io_threads",
            format!("must be at most {MAX_IO_THREADS} (0 = serve on the shared runtime)"),
        );
    }
    if g.listeners.http.is_none() && g.listeners.https.is_none() && g.listeners.socks5.is_none() {
        c.at(
            "gateway.listeners",
            "at least one of listeners.http, listeners.https and listeners.socks5 is needed",
        );
    }
    limits::validate(c, &g.limits);
    rotation::validate_sessions(c, &g.sessions);
    dial::validate(c, &g.dial);
    control::validate(c, &g.control);
    destinations::validate(c, &g.destinations);
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
        control::validate_urls(c, urls);
    }
    if let Some(token) = &mut gateway.worker_token {
        c.resolve_plain("gateway.worker_token", token);
    }
}
