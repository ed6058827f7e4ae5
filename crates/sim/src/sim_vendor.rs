//! The whole simulated vendor in one call: N upstream proxies on distinct exits
//! (127.0.0.2, .3, ...), one list endpoint over them, one origin, and a backconnect
//! gateway (account [`BACKCONNECT_ACCOUNT`], exits 127.254.0.1 to .8). What
//! `proxypool dev` and `proxypool sim` start, and what end-to-end tests stand on.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::origin::Origin;
use crate::upstream::{BackconnectConfig, ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use crate::vendor::{FleetConfig, ListFaults, ListFormat, VendorConfig, VendorEndpoint};

/// The backconnect gateway's account and password.
pub const BACKCONNECT_ACCOUNT: &str = "sim-bc";
pub const BACKCONNECT_PASSWORD: &str = "sim-bc-pass";

/// How to start a [`SimVendor`]. `Default` is 4 proxies alternating HTTP and SOCKS5 with
/// credentials `sim-user` / `sim-pass`, no TTL, text list.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// How many proxies are listed at any time.
    pub proxies: usize,
    /// Protocols, cycled.
    pub kinds: Vec<ProxyKind>,
    /// Credentials every proxy requires.
    pub credentials: Option<(String, String)>,
    /// Region labels, cycled.
    pub regions: Vec<String>,
    /// Carrier labels, cycled.
    pub carriers: Vec<String>,
    /// Each proxy's lifetime (`None` = no rotation).
    pub ttl: Option<Duration>,
    /// List format.
    pub format: ListFormat,
    /// Latency each proxy adds.
    pub latency: Duration,
    /// Failure probability of each proxy.
    pub failure_rate: f64,
    /// Seed of the failure dice.
    pub seed: u64,
    /// First exit address.
    pub first_exit: Ipv4Addr,
    /// Where the proxies and the list endpoint listen (loopback by default; another
    /// address lets other hosts, such as containers, fetch the list and dial the proxies).
    pub listen_ip: Ipv4Addr,
    /// The list endpoint's port (0: any free port).
    pub list_port: u16,
    /// The origin's port on loopback (0: any free port). The origin stays on loopback
    /// whatever `listen_ip` is: it is reached through the proxies.
    pub origin_port: u16,
    /// Also run an HTTPS proxy (the fleet's credentials, exit 127.254.1.1) with this TLS
    /// configuration: the caller's certificate.
    pub https_proxy: Option<Arc<rustls::ServerConfig>>,
}

impl Default for SimConfig {
    fn default() -> Self {
        let fleet = FleetConfig::default();
        Self {
            proxies: fleet.size,
            kinds: fleet.kinds,
            credentials: fleet.credentials,
            regions: fleet.regions,
            carriers: fleet.carriers,
            ttl: None,
            format: ListFormat::Text,
            latency: fleet.latency,
            failure_rate: fleet.failure_rate,
            seed: fleet.seed,
            first_exit: fleet.first_exit,
            listen_ip: Ipv4Addr::LOCALHOST,
            list_port: 0,
            origin_port: 0,
            https_proxy: None,
        }
    }
}

/// A running simulated vendor. Dropping it stops everything.
#[derive(Debug)]
pub struct SimVendor {
    vendor: VendorEndpoint,
    origin: Origin,
    backconnect: UpstreamProxy,
    https_proxy: Option<UpstreamProxy>,
}

impl SimVendor {
    /// Starts the origin, the proxies and the list endpoint.
    pub async fn start(config: SimConfig) -> io::Result<Self> {
        let origin =
            Origin::start_at(SocketAddr::from((Ipv4Addr::LOCALHOST, config.origin_port))).await?;
        let https_proxy = match config.https_proxy.clone() {
            Some(tls) => Some(
                UpstreamProxy::start(UpstreamProxyConfig {
                    kind: ProxyKind::Http,
                    listen_ip: config.listen_ip,
                    exit_ip: Ipv4Addr::new(127, 254, 1, 1),
                    credentials: config.credentials.clone(),
                    tls: Some(tls),
                    ..UpstreamProxyConfig::default()
                })
                .await?,
            ),
            None => None,
        };
        let vendor = VendorEndpoint::start_at(
            VendorConfig {
                format: config.format,
                fleet: FleetConfig {
                    size: config.proxies,
                    kinds: config.kinds,
                    credentials: config.credentials,
                    regions: config.regions,
                    carriers: config.carriers,
                    latency: config.latency,
                    failure_rate: config.failure_rate,
                    seed: config.seed,
                    first_exit: config.first_exit,
                    listen_ip: config.listen_ip,
                },
                ttl: config.ttl,
                faults: ListFaults::default(),
                api: crate::vendor::ApiConfig::default(),
            },
            SocketAddr::from((config.listen_ip, config.list_port)),
        )
        .await?;
        // Exits far from the fleet's, which counts up from `first_exit`.
        let backconnect = UpstreamProxy::start(UpstreamProxyConfig {
            kind: ProxyKind::Http,
            listen_ip: config.listen_ip,
            backconnect: Some(BackconnectConfig {
                account: BACKCONNECT_ACCOUNT.into(),
                password: BACKCONNECT_PASSWORD.into(),
                exits: (1..=8).map(|n| Ipv4Addr::new(127, 254, 0, n)).collect(),
                default_minutes: 10,
            }),
            ..UpstreamProxyConfig::default()
        })
        .await?;
        Ok(Self {
            vendor,
            origin,
            backconnect,
            https_proxy,
        })
    }

    /// The HTTPS proxy, when [`SimConfig::https_proxy`] asked for one.
    pub fn https_proxy(&self) -> Option<&UpstreamProxy> {
        self.https_proxy.as_ref()
    }

    /// The backconnect gateway (HTTP): `sim-bc[-country-CC][-session-ID][-sesstime-MIN]`
    /// with the password `sim-bc-pass`.
    pub fn backconnect(&self) -> &UpstreamProxy {
        &self.backconnect
    }

    /// The vendor list endpoint (also for fault knobs and rotation).
    pub fn vendor(&self) -> &VendorEndpoint {
        &self.vendor
    }

    /// The echo origin.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Serves the list over https too (see [`VendorEndpoint::serve_tls`]); its URL.
    pub async fn serve_list_tls(
        &self,
        config: std::sync::Arc<rustls::ServerConfig>,
    ) -> io::Result<String> {
        self.vendor.serve_tls(config).await
    }

    /// The list URL.
    pub fn list_url(&self) -> String {
        self.vendor.url()
    }

    /// The proxies currently listed.
    pub fn proxies(&self) -> Vec<Arc<UpstreamProxy>> {
        self.vendor.proxies()
    }
}
