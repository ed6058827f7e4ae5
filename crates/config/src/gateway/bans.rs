//! `[gateway.bans]`: ban-aware rotation for plain HTTP (which origin statuses mean a ban,
//! how many retries follow one), and its checks; a client's `ban_statuses` is checked by
//! the same rule.

use crate::check::Check;
use serde::{Deserialize, Serialize};

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
pub(crate) fn validate_statuses(c: &mut Check<'_>, key: &str, statuses: &[u16]) {
    if statuses.iter().any(|s| !(400..=599).contains(s)) {
        c.at(key, "every status must be from 400 to 599");
    }
    if statuses.len() > 16 {
        c.at(key, "at most 16 statuses");
    }
}

/// Checks `[gateway.bans]`.
pub(crate) fn validate(c: &mut Check<'_>, bans: &BansConfig) {
    validate_statuses(c, "gateway.bans.statuses", &bans.statuses);
    c.require(
        bans.max_retries <= MAX_BAN_RETRIES,
        "gateway.bans.max_retries",
        "must be at most 5",
    );
}
