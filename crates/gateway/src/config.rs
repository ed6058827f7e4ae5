//! [`GatewayConfig`]: everything a gateway worker is started with, as plain serde data the
//! CLI reads from its config file, and its validation.
//!
//! Durations are whole milliseconds in fields ending in `_ms`, so a config file never
//! depends on a duration syntax. Unknown fields are rejected: a typo must not silently fall
//! back to a default.

use proxypool_core::{Secret, WorkerId};
use proxypool_throttle::{EngineOptions, Policy};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The whole gateway configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// This worker's stable id (the controller assigns proxies to it).
    pub worker_id: WorkerId,
    /// Base URL of the controller's worker control API, `http://host:port`.
    pub controller_url: String,
    /// Bearer token the controller expects from this worker.
    pub worker_token: Secret,
    #[serde(default)]
    pub listeners: Listeners,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub rotation: Rotation,
    #[serde(default)]
    pub sessions: StickySessions,
    #[serde(default)]
    pub dial: DialConfig,
    /// The per-IP pre-authentication shield; `None` disables it.
    #[serde(default = "default_shield")]
    pub shield: Option<Policy>,
    /// Engine settings shared by the shield and the per-client policy limiter.
    #[serde(default)]
    pub limiter: EngineOptions,
    #[serde(default)]
    pub control: ControlConfig,
    /// How long a graceful shutdown waits for in-flight requests and tunnels.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
}

/// Where the gateway listens. A listener left out is not started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listeners {
    /// HTTP proxy (absolute-form requests and `CONNECT`).
    pub http: Option<SocketAddr>,
    /// SOCKS5 proxy.
    pub socks5: Option<SocketAddr>,
    /// Admin: `/metrics`, `/healthz`, `/status`.
    pub admin: Option<SocketAddr>,
}

/// Protection of the gateway itself against clients.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Client connections open at once over all listeners; more are closed on accept.
    pub max_connections: usize,
    /// Time a client has to send a complete request head (HTTP) or handshake (SOCKS5).
    pub header_read_timeout_ms: u64,
    /// Largest request head accepted (HTTP); at least 8192 (hyper's minimum buffer).
    pub max_header_bytes: usize,
    /// A kept-alive HTTP connection with no traffic for this long is closed.
    pub keepalive_idle_ms: u64,
    /// A tunnel (CONNECT or SOCKS5) with no traffic either way for this long is closed.
    pub tunnel_idle_ms: u64,
    /// Most proxies whose local counters are tracked (current snapshot plus draining ones).
    /// A snapshot that would exceed it is rejected and the old view kept (bounded memory).
    pub max_tracked_proxies: usize,
    /// Most sticky sessions remembered at once.
    pub max_sticky_sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_read_timeout_ms: 10_000,
            max_header_bytes: 16 * 1024,
            keepalive_idle_ms: 60_000,
            tunnel_idle_ms: 300_000,
            max_tracked_proxies: 100_000,
            max_sticky_sessions: 100_000,
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
    /// A random eligible proxy.
    Random,
}

/// Sticky sessions (`-session-S-sesstime-MIN` in the username).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DialConfig {
    /// TCP connect timeout to an upstream proxy.
    pub connect_timeout_ms: u64,
    /// Time for the upstream proxy's CONNECT / SOCKS5 handshake (and a plain HTTP
    /// response head).
    pub handshake_timeout_ms: u64,
    /// Proxies tried for one request before the client gets 502 (at least 1).
    pub max_attempts: u32,
    /// Consecutive failures after which a proxy is skipped for `failure_cooldown_ms`.
    pub failure_threshold: u32,
    pub failure_cooldown_ms: u64,
    /// Idle kept-alive upstream connections kept per proxy for plain HTTP.
    pub pool_idle_per_proxy: usize,
    /// An idle upstream connection older than this is not reused.
    pub pool_idle_timeout_ms: u64,
}

impl Default for DialConfig {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 5_000,
            handshake_timeout_ms: 10_000,
            max_attempts: 3,
            failure_threshold: 3,
            failure_cooldown_ms: 10_000,
            pool_idle_per_proxy: 32,
            pool_idle_timeout_ms: 30_000,
        }
    }
}

/// Pacing of the control loop (the controller's grant decides the report interval and
/// long-poll wait; these bound what the worker itself does).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlConfig {
    /// Timeout of one control call other than the long poll.
    pub request_timeout_ms: u64,
    /// First retry delay after a failed call; doubles up to `max_backoff_ms`.
    pub initial_backoff_ms: u64,
    pub max_backoff_ms: u64,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            request_timeout_ms: 10_000,
            initial_backoff_ms: 200,
            max_backoff_ms: 5_000,
        }
    }
}

fn default_shield() -> Option<Policy> {
    // Generous: the shield only stops floods from one address before authentication.
    Some(Policy::new(1_000.0, 2_000.0))
}

fn default_shutdown_grace_ms() -> u64 {
    10_000
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid gateway config: {0}")]
pub struct ConfigError(pub String);

impl GatewayConfig {
    /// A config with defaults for everything but identity and the controller.
    pub fn new(worker_id: WorkerId, controller_url: impl Into<String>, token: Secret) -> Self {
        Self {
            worker_id,
            controller_url: controller_url.into(),
            worker_token: token,
            listeners: Listeners::default(),
            limits: Limits::default(),
            rotation: Rotation::default(),
            sessions: StickySessions::default(),
            dial: DialConfig::default(),
            shield: default_shield(),
            limiter: EngineOptions::default(),
            control: ControlConfig::default(),
            shutdown_grace_ms: default_shutdown_grace_ms(),
        }
    }

    /// Checks every setting; the first problem is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if crate::control::ControllerAddr::parse(&self.controller_url).is_err() {
            return fail(format!(
                "controller_url must look like http://host:port, got {:?}",
                self.controller_url
            ));
        }
        if self.worker_token.expose().is_empty() {
            return fail("worker_token must not be empty".into());
        }
        if self.listeners.http.is_none() && self.listeners.socks5.is_none() {
            return fail("at least one of listeners.http and listeners.socks5 is needed".into());
        }
        let limits = &self.limits;
        if limits.max_header_bytes < 8192 {
            return fail(format!(
                "limits.max_header_bytes must be at least 8192, got {}",
                limits.max_header_bytes
            ));
        }
        for (name, value) in [
            ("limits.max_connections", limits.max_connections as u64),
            (
                "limits.header_read_timeout_ms",
                limits.header_read_timeout_ms,
            ),
            ("limits.keepalive_idle_ms", limits.keepalive_idle_ms),
            ("limits.tunnel_idle_ms", limits.tunnel_idle_ms),
            (
                "limits.max_tracked_proxies",
                limits.max_tracked_proxies as u64,
            ),
            (
                "limits.max_sticky_sessions",
                limits.max_sticky_sessions as u64,
            ),
            (
                "sessions.default_minutes",
                u64::from(self.sessions.default_minutes),
            ),
            ("dial.connect_timeout_ms", self.dial.connect_timeout_ms),
            ("dial.handshake_timeout_ms", self.dial.handshake_timeout_ms),
            ("dial.max_attempts", u64::from(self.dial.max_attempts)),
            (
                "dial.failure_threshold",
                u64::from(self.dial.failure_threshold),
            ),
            (
                "control.request_timeout_ms",
                self.control.request_timeout_ms,
            ),
            (
                "control.initial_backoff_ms",
                self.control.initial_backoff_ms,
            ),
        ] {
            if value == 0 {
                return fail(format!("{name} must be at least 1"));
            }
        }
        if self.sessions.default_minutes > self.sessions.max_minutes {
            return fail("sessions.default_minutes exceeds sessions.max_minutes".into());
        }
        if self.control.max_backoff_ms < self.control.initial_backoff_ms {
            return fail("control.max_backoff_ms is below control.initial_backoff_ms".into());
        }
        self.limiter
            .validate()
            .map_err(|error| ConfigError(format!("limiter: {error}")))?;
        if let Some(shield) = &self.shield {
            crate::admission::Shield::new(shield.clone(), self.limiter.clone())
                .map_err(|error| ConfigError(format!("shield: {error}")))?;
        }
        Ok(())
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
        config.controller_url = "ftp://x".into();
        assert!(config.validate().unwrap_err().0.contains("controller_url"));
        let mut config = base();
        config.listeners.http = None;
        assert!(config.validate().is_err());
    }

    #[test]
    fn reads_json_and_rejects_unknown_fields() {
        let json = r#"{
            "worker_id": "gw-1", "controller_url": "http://127.0.0.1:1", "worker_token": "t",
            "listeners": {"http": "127.0.0.1:8080"},
            "rotation": "least_connections",
            "limits": {"max_connections": 5}
        }"#;
        let config: GatewayConfig = serde_json::from_str(json).unwrap();
        assert_eq!(config.rotation, Rotation::LeastConnections);
        assert_eq!(config.limits.max_connections, 5);
        assert!(config.shield.is_some());
        let typo = json.replace("\"rotation\"", "\"rotaton\"");
        assert!(serde_json::from_str::<GatewayConfig>(&typo).is_err());
    }
}
