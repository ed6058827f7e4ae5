//! `[gateway] rotation` and `[gateway.sessions]`: how a proxy is picked for a request, and
//! how long a sticky session keeps one, with the sessions' checks.

use crate::check::Check;
use serde::{Deserialize, Serialize};

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

/// Checks `[gateway.sessions]`.
pub(crate) fn validate_sessions(c: &mut Check<'_>, sessions: &StickySessions) {
    if sessions.default_minutes == 0 {
        c.at("gateway.sessions.default_minutes", "must be at least 1");
    }
    if sessions.default_minutes > sessions.max_minutes {
        c.at(
            "gateway.sessions.default_minutes",
            "must not exceed sessions.max_minutes",
        );
    }
}
