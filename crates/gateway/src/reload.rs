//! [`GatewayReload`]: applying reloaded settings to a running gateway without dropping a
//! connection.
//!
//! What applies: connection limits (the cap, the per-IP cap and its IPv6 grouping, the
//! first-byte, header and idle timeouts,
//! header size), rotation, sticky-session lengths and the per-client sticky bound, the
//! capacity wait and its waiters' bounds,
//! dialing, the destination policy, the per-IP shield, the shutdown grace, the admin token, the access log
//! (which every reload reopens, for logrotate; its queue's size stays as started), the
//! trust inspected requests verify origins by (`origin_ca`, read again on every reload)
//! and TLS inspection itself (`[gateway.inspection]`: the bypass list, and the CA files
//! read again, a changed CA starting an empty leaf cache).
//! A connection reads the settings when it needs them, so a change applies to what comes
//! next; a connection keeps the shield it was admitted by. What needs a restart keeps its
//! running value: identity and controller, listeners, the limiter engine, the bounds of
//! tracked proxies and sticky sessions (memory sized at start) and control-loop pacing.
//! Clients are not settings of the gateway: they come with each snapshot, and a client a
//! snapshot no longer lists is refused from its next request, its open tunnels closed a
//! shutdown grace later.

use crate::config::{AccessLogConfig, ConfigError, GatewayConfig};
use crate::inspection::Authority;
use crate::origin_tls::OriginTls;
use crate::policy::limits::{LimiterClock, Shield};
use crate::state::Shared;
use std::sync::Arc;

/// A handle that applies reloaded settings to its gateway (cheap to clone).
#[derive(Debug, Clone)]
pub struct GatewayReload {
    shared: Arc<Shared>,
}

impl GatewayReload {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        GatewayReload { shared }
    }

    /// Applies what of `config` may change while running (see the module docs).
    pub fn apply(&self, config: &GatewayConfig) -> Result<(), ConfigError> {
        // Same paths, possibly new files (the listener polls them too).
        if let Some(tls) = &self.shared.admin_tls {
            tls.reload_or_keep();
        }
        let running = self.shared.config();
        let mut next = GatewayConfig::clone(&running);
        next.limits.max_connections = config.limits.max_connections;
        next.limits.max_connections_per_ip = config.limits.max_connections_per_ip;
        next.limits.ipv6_prefix = config.limits.ipv6_prefix;
        next.limits.first_byte_timeout = config.limits.first_byte_timeout;
        next.limits.header_read_timeout = config.limits.header_read_timeout;
        next.limits.max_header_bytes = config.limits.max_header_bytes;
        next.limits.keepalive_idle = config.limits.keepalive_idle;
        next.limits.tunnel_idle = config.limits.tunnel_idle;
        next.limits.max_sticky_sessions_per_client = config.limits.max_sticky_sessions_per_client;
        next.limits.capacity_wait = config.limits.capacity_wait;
        next.limits.max_capacity_waiters_per_client = config.limits.max_capacity_waiters_per_client;
        next.limits.max_capacity_waiters = config.limits.max_capacity_waiters;
        next.rotation = config.rotation;
        next.sessions = config.sessions.clone();
        next.dial = config.dial.clone();
        next.destinations = config.destinations.clone();
        next.shield = config.shield.clone();
        next.shutdown_grace = config.shutdown_grace;
        next.admin_token = config.admin_token.clone();
        next.access_log.enabled = config.access_log.enabled;
        next.access_log.file = config.access_log.file.clone();
        next.access_log.sample_one_in = config.access_log.sample_one_in;
        next.access_log.format = config.access_log.format;
        next.access_log.refusals_per_second = config.access_log.refusals_per_second;
        next.validate()?;
        next.inspection = config.inspection.clone();
        // Read before anything changes: a bundle that cannot be used fails the reload.
        let origin_tls = build_origin_tls(config)?;
        // The CA files are read again; a CA that cannot issue fails the reload whole.
        let authority = load_authority(&next)?;
        // Every reload reopens the access log (logrotate's SIGHUP); a file that cannot be
        // opened fails the reload before anything else changed.
        self.reconfigure_access_log(&next.access_log)?;
        if next.shield != running.shield {
            let shield = build_shield(&next, &self.shared.limiter_clock)?;
            self.shared.shield.store(shield.map(Arc::new));
        }
        // Open connections are never cut for a smaller cap: it applies as they close.
        self.shared.connections.set_cap(next.limits.max_connections);
        self.shared
            .per_ip
            .set_cap(next.limits.max_connections_per_ip);
        self.shared.per_ip.set_ipv6_prefix(next.limits.ipv6_prefix);
        self.shared.router.reconfigure(&next);
        self.shared.origin_tls.store(Arc::new(origin_tls));
        self.swap_authority(authority);
        self.shared.settings.store(Arc::new(next));
        tracing::info!("gateway settings applied");
        Ok(())
    }

    /// Puts `authority` in force, unless it would mint what the running one does (its
    /// leaf cache is kept then). Tunnels already inspected keep the leaf they were
    /// served.
    fn swap_authority(&self, authority: Option<Authority>) {
        let running = self.shared.inspection.load_full();
        match (running, authority) {
            (Some(running), Some(next)) if running.same_as(&next) => {}
            (_, next) => self.shared.inspection.store(next.map(Arc::new)),
        }
    }

    /// Reopens the access log where the settings in force say (after logrotate moved the
    /// file): what a reload does even when the file did not change. A file that cannot be
    /// opened is logged, and the log goes on where it was.
    pub fn reopen_access_log(&self) {
        if let Err(error) = self.reconfigure_access_log(&self.shared.config().access_log) {
            tracing::warn!(error = %error.0, "the access log could not be reopened");
        }
    }

    fn reconfigure_access_log(&self, log: &AccessLogConfig) -> Result<(), ConfigError> {
        self.shared
            .access
            .reconfigure(log)
            .map_err(|error| ConfigError(error.to_string()))
    }

    /// Shows `report` as the last reload on the admin `/status`.
    pub fn set_report(&self, report: serde_json::Value) {
        self.shared.last_reload.store(Some(Arc::new(report)));
    }
}

/// The trust inspected requests verify origins by: `[gateway.inspection] origin_ca`, or
/// the public roots. Built once per configuration (start and each reload).
pub(crate) fn build_origin_tls(config: &GatewayConfig) -> Result<OriginTls, ConfigError> {
    let origin_ca = config
        .inspection
        .as_ref()
        .and_then(|inspection| inspection.origin_ca.as_deref());
    OriginTls::load(origin_ca).map_err(ConfigError)
}

/// The CA of `[gateway.inspection]`, read and checked, or `None` without the table.
pub(crate) fn load_authority(config: &GatewayConfig) -> Result<Option<Authority>, ConfigError> {
    config
        .inspection
        .as_ref()
        .map(|inspection| Authority::load(inspection).map_err(ConfigError))
        .transpose()
}

/// The shield `config` asks for, on the gateway's limiter clock.
pub(crate) fn build_shield(
    config: &GatewayConfig,
    limiter_clock: &LimiterClock,
) -> Result<Option<Shield>, ConfigError> {
    config
        .shield
        .as_ref()
        .map(|policy| {
            Shield::with_clock(
                policy.clone(),
                config.limiter.clone(),
                Arc::clone(limiter_clock),
            )
            .map_err(|e| ConfigError(format!("shield: {e}")))
        })
        .transpose()
}
