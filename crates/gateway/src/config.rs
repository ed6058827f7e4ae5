//! [`GatewayConfig`]: everything a gateway worker runs with, as a plain struct. The file's
//! `[gateway]` table is read by `proxypool-config`; the binary turns it into this value
//! ([`GatewayConfig::from_section`]) with the worker's identity, and hands a new one to a
//! running gateway on reload ([`crate::Gateway`]'s reload handle).

use crate::policy::destination::DestinationPolicy;
use proxypool_config::gateway::InspectionConfig;
use proxypool_config::gateway::MAX_IO_THREADS;
pub use proxypool_config::gateway::{
    AccessLogConfig, AccessLogFormat, BansConfig, ControlConfig, Destinations, DialConfig,
    FleetConfig, Limits, Listeners, Rotation, StickySessions,
};
use proxypool_config::{ClientTlsConfig, GatewaySection, SecretRef, ServerTlsConfig};
use proxypool_core::{MIN_HEADER_BYTES, Secret, SecretHash, WorkerId};
use proxypool_edge::{ClientTls, Target};
use proxypool_throttle::{EngineOptions, Policy};
use std::time::Duration;

/// The whole gateway configuration.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// This worker's stable id (the controller assigns proxies to it).
    pub worker_id: WorkerId,
    /// Base URLs of the controllers' worker control API, `https://host:port` (or
    /// `http://host:port`), at least one: the control loop starts with the first and moves
    /// to the next when the one it talks to stops answering.
    pub controller_urls: Vec<String>,
    /// Trust and identity for an `https://` controller (`None` = the public roots, no
    /// client certificate).
    pub controller_tls: Option<ClientTlsConfig>,
    /// TLS on the admin listener.
    pub admin_tls: Option<ServerTlsConfig>,
    /// The TLS client listener's certificate (`listeners.https`), and `client_ca` for
    /// mutual TLS. Read at bind.
    pub tls: Option<ServerTlsConfig>,
    /// The bearer token the admin listener's `/metrics` and `/status` require, as a salted
    /// hash (`None`: open). Read on every request, so a reload applies it.
    pub admin_token: Option<SecretHash>,
    /// Bearer token the controller expects from this worker.
    pub worker_token: Secret,
    pub listeners: Listeners,
    pub limits: Limits,
    pub rotation: Rotation,
    pub sessions: StickySessions,
    pub dial: DialConfig,
    /// Ban statuses and retries for plain HTTP (`[gateway.bans]`).
    pub bans: BansConfig,
    /// One line per request and tunnel (`[gateway.access_log]`).
    pub access_log: AccessLogConfig,
    /// Which targets clients may reach (`[gateway.destinations]`), compiled.
    pub destinations: DestinationPolicy,
    /// TLS inspection of opted-in clients' `CONNECT` tunnels (`[gateway.inspection]`):
    /// the CA, bypass list and leaf settings; `None` = never inspected. Applies on reload
    /// (the CA files are read again).
    pub inspection: Option<InspectionConfig>,
    /// This gateway as a fleet member (`[gateway.fleet]`): the fleet listener, the address
    /// peers dial, hop timeouts; `None` = no fleet, every key stays here. `listen` and
    /// `advertise` are read at bind, the rest on reload.
    pub fleet: Option<FleetConfig>,
    /// The per-IP pre-authentication shield; `None` disables it.
    pub shield: Option<Policy>,
    /// Engine settings shared by the shield and the per-client policy limiter.
    pub limiter: EngineOptions,
    pub control: ControlConfig,
    /// How long a graceful shutdown waits for in-flight requests and tunnels.
    pub shutdown_grace: Duration,
    /// Load balancers (address, prefix length) whose connections start with a PROXY
    /// protocol header naming the client.
    pub trusted_proxies: Vec<(std::net::IpAddr, u8)>,
    /// Threads that serve the client listeners' connections, each on its own
    /// single-threaded runtime ([`crate::Gateway`]); `0` = on the runtime that runs the
    /// gateway. Read at bind.
    pub io_threads: usize,
}

/// The CPUs this process may run on (its affinity mask and cgroup quota): the default
/// number of I/O threads.
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid gateway config: {0}")]
pub struct ConfigError(pub String);

impl GatewayConfig {
    /// A config with defaults for everything but identity and the controller.
    pub fn new(worker_id: WorkerId, controller_url: impl Into<String>, token: Secret) -> Self {
        Self::from_section(
            &GatewaySection::default(),
            worker_id,
            vec![controller_url.into()],
            token,
        )
    }

    /// The settings of a loaded `[gateway]` table with this worker's identity (a split
    /// gateway's own from the table, an in-process gateway's made up by the binary).
    pub fn from_section(
        section: &GatewaySection,
        worker_id: WorkerId,
        controller_urls: Vec<String>,
        worker_token: Secret,
    ) -> Self {
        GatewayConfig {
            worker_id,
            controller_urls,
            controller_tls: section.controller_tls.clone(),
            admin_tls: section.admin_tls.clone(),
            tls: section.tls.clone(),
            admin_token: section
                .admin_token
                .as_ref()
                .and_then(SecretRef::verifier)
                .cloned(),
            worker_token,
            listeners: section.listeners.clone(),
            limits: section.limits.clone(),
            rotation: section.rotation,
            sessions: section.sessions.clone(),
            dial: section.dial.clone(),
            bans: section.bans.clone(),
            access_log: section.access_log.clone(),
            destinations: DestinationPolicy::new(&section.destinations),
            inspection: section.inspection.clone(),
            fleet: section.fleet.clone(),
            shield: Some(section.shield.to_throttle()),
            limiter: section.limiter.to_engine_options(),
            control: section.control.clone(),
            shutdown_grace: section.shutdown_grace.as_duration(),
            trusted_proxies: proxypool_config::parse_cidrs(&section.trusted_proxies),
            io_threads: section.io_threads.unwrap_or_else(usable_cpus),
        }
    }

    /// Checks what only the gateway can check (the configuration crate checked ranges):
    /// the controller URL's form, the listeners, the shield against its engine.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if self.controller_urls.is_empty() {
            return fail("controller_url must name at least one controller".into());
        }
        for url in &self.controller_urls {
            if ControllerAddr::parse(url).is_err() {
                return fail(format!(
                    "controller_url must look like https://host:port or http://host:port, got {url:?}"
                ));
            }
        }
        if self.worker_token.expose().is_empty() {
            return fail("worker_token must not be empty".into());
        }
        let listeners = &self.listeners;
        if listeners.http.is_none() && listeners.https.is_none() && listeners.socks5.is_none() {
            return fail(
                "at least one of listeners.http, listeners.https and listeners.socks5 is needed"
                    .into(),
            );
        }
        match (listeners.https.is_some(), self.tls.is_some()) {
            (true, false) => return fail("listeners.https needs [gateway.tls]".into()),
            (false, true) => return fail("[gateway.tls] is only for listeners.https".into()),
            _ => {}
        }
        if self.limits.max_header_bytes < MIN_HEADER_BYTES {
            return fail(format!(
                "limits.max_header_bytes must be at least {MIN_HEADER_BYTES}, got {}",
                self.limits.max_header_bytes
            ));
        }
        if self.io_threads > MAX_IO_THREADS {
            return fail(format!(
                "io_threads must be at most {MAX_IO_THREADS} (0 = serve on the shared runtime), got {}",
                self.io_threads
            ));
        }
        if let Some(fleet) = &self.fleet {
            if fleet.advertise.is_empty() {
                return fail("fleet.advertise must name the host:port peers dial".into());
            }
            if fleet.max_connections == 0 {
                return fail("fleet.max_connections must be at least 1".into());
            }
        }
        if self.dial.max_attempts == 0 {
            return fail("dial.max_attempts must be at least 1".into());
        }
        if let Some(problem) = self.destinations.problem() {
            return fail(problem.to_owned());
        }
        self.limiter
            .validate()
            .map_err(|error| ConfigError(format!("limiter: {error}")))?;
        if let Some(shield) = &self.shield {
            crate::policy::limits::Shield::new(shield.clone(), self.limiter.clone())
                .map_err(|error| ConfigError(format!("shield: {error}")))?;
        }
        Ok(())
    }
}

/// The controller's base URL: `https://host:port` (or `http://` on a trusted network),
/// and the TLS settings to reach it with.
#[derive(Debug, Clone)]
pub(crate) struct ControllerAddr {
    pub target: Target,
    pub tls: Option<ClientTls>,
}

impl ControllerAddr {
    /// Parses the URL (no path but `/`); the trust settings come with [`with_tls`](Self::with_tls).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let target = Target::parse(url).map_err(|_| {
            format!("controller URL {url:?} must be https://host:port or http://host:port")
        })?;
        let explicit_port = url
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'))
            .is_some_and(|authority| {
                authority
                    .rsplit_once(':')
                    .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
            });
        if target.path != "/" || !explicit_port {
            return Err(format!(
                "controller URL {url:?} must be https://host:port or http://host:port"
            ));
        }
        Ok(Self { target, tls: None })
    }

    /// The CA bundle and client certificate for an `https://` controller.
    pub(crate) fn with_tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Every configured controller's address, with the TLS settings to reach it.
    pub(crate) fn all_of(config: &GatewayConfig) -> Result<Vec<Self>, ConfigError> {
        let addrs = config
            .controller_urls
            .iter()
            .map(|url| ControllerAddr::parse(url).map_err(ConfigError))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(plain) = addrs.iter().position(|addr| !addr.target.tls)
            && config.controller_tls.is_some()
        {
            return Err(ConfigError(format!(
                "controller_tls is set but controller_url {:?} is not https://",
                config.controller_urls[plain]
            )));
        }
        if !addrs.iter().any(|addr| addr.target.tls) {
            return Ok(addrs);
        }
        // One trust setting for every controller, loaded once.
        let files = config
            .controller_tls
            .as_ref()
            .map_or_else(Default::default, |t| proxypool_edge::ClientTlsFiles {
                ca: t.ca.clone(),
                cert: t.cert.clone(),
                key: t.key.clone(),
            });
        let tls = proxypool_edge::ClientTls::load(&files)
            .map_err(|e| ConfigError(format!("controller_tls: {e}")))?;
        Ok(addrs
            .into_iter()
            .map(|addr| {
                if addr.target.tls {
                    addr.with_tls(tls.clone())
                } else {
                    addr
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> GatewayConfig {
        let mut config = GatewayConfig::new(
            WorkerId::new("gw-1").unwrap(),
            "http://127.0.0.1:9000",
            Secret::new("token"),
        );
        config.listeners.http = Some("127.0.0.1:0".parse().unwrap());
        config
    }

    #[test]
    fn defaults_validate() {
        base().validate().unwrap();
    }

    #[test]
    fn rejects_bad_settings_by_name() {
        let mut config = base();
        config.limits.max_header_bytes = 100;
        assert!(
            config
                .validate()
                .unwrap_err()
                .0
                .contains("max_header_bytes")
        );
        let mut config = base();
        config.dial.max_attempts = 0;
        assert!(
            config
                .validate()
                .unwrap_err()
                .0
                .contains("dial.max_attempts")
        );
        let mut config = base();
        config.controller_urls = vec!["http://127.0.0.1:1".into(), "ftp://x".into()];
        assert!(config.validate().unwrap_err().0.contains("controller_url"));
        let mut config = base();
        config.io_threads = MAX_IO_THREADS + 1;
        assert!(config.validate().unwrap_err().0.contains("io_threads"));
        let mut config = base();
        config.listeners.http = None;
        assert!(config.validate().is_err());
        let mut config = base();
        config.destinations = DestinationPolicy::new(&Destinations {
            deny_cidrs: vec!["10.0.0.0/40".into()],
            ..Destinations::default()
        });
        assert!(
            config
                .validate()
                .unwrap_err()
                .0
                .contains("destinations.deny_cidrs")
        );
    }
}
