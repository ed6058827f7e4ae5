//! `[gateway.dial]`: dialing upstream proxies (timeouts, attempts, failure cooldowns, the
//! kept-alive pool), and its checks.

use crate::check::Check;
use crate::duration::Millis;
use crate::floors;
use serde::{Deserialize, Serialize};

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
    /// Consecutive failures of the proxy itself after which it is skipped for
    /// `failure_cooldown`; a target failing behind it never counts (the gateway decides
    /// whom to blame in one place, its outbound failure classification).
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

/// Checks `[gateway.dial]`.
pub(crate) fn validate(c: &mut Check<'_>, dial: &DialConfig) {
    for (key, message) in floors::at_least_one([
        ("connect_timeout", dial.connect_timeout.0),
        ("handshake_timeout", dial.handshake_timeout.0),
        ("max_attempts", u64::from(dial.max_attempts)),
        ("failure_threshold", u64::from(dial.failure_threshold)),
    ]) {
        c.at(format!("gateway.dial.{key}"), message);
    }
}
