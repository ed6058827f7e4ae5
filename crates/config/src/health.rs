//! An upstream's `health` table: how the checker proves one of its proxies works (the
//! `http://` and `https://` targets fetched through it, the interval, the failure count and latency
//! bound), and its checks.

use crate::check::Check;
use crate::duration::Millis;
use crate::target::TargetUrl;
use serde::{Deserialize, Serialize};

/// How the checker proves a proxy works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// URLs fetched through the proxy; every one must answer as expected. An `https://`
    /// target is fetched over TLS inside a `CONNECT` tunnel, its certificate verified.
    pub targets: Vec<CheckTarget>,
    /// The CA bundle `https://` targets must chain to. Unset = the public roots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
    /// An AVAILABLE proxy is checked again when its last check is this old.
    pub interval: Millis,
    /// Consecutive failures that make a proxy UNHEALTHY (fewer make it SUSPECT).
    pub unhealthy_after: u32,
    /// A proxy slower than this fails its check as `slow` (unset: only the timeout).
    pub max_latency: Option<Millis>,
    /// How HTTP proxies are checked: `absolute` (absolute-form request) or `connect`
    /// (CONNECT tunnel, then the request). HTTPS-labelled proxies and `https://` targets
    /// always use `connect`.
    pub via: HttpCheckMode,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            targets: Vec::new(),
            ca: None,
            interval: Millis::from_secs(30),
            unhealthy_after: 3,
            max_latency: None,
            via: HttpCheckMode::Absolute,
        }
    }
}

/// See [`HealthConfig::via`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpCheckMode {
    Absolute,
    Connect,
}

/// One URL a healthy proxy must reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckTarget {
    pub url: String,
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    #[serde(skip)]
    pub parsed: Option<TargetUrl>,
}

fn default_expect_status() -> u16 {
    200
}

/// Checks an upstream's `health` table at `path` and parses its targets; `check_timeout`
/// is `checker.timeout`, which a latency bound must stay under.
pub(crate) fn validate(
    c: &mut Check<'_>,
    path: &str,
    health: &mut HealthConfig,
    check_timeout: Millis,
) {
    c.require(
        !health.targets.is_empty(),
        format!("{path}.targets"),
        "at least one check target is needed: proxies are served only after a check through them",
    );
    if let Some(ca) = &mut health.ca {
        crate::tls::pem_file(c, &format!("{path}.ca"), ca);
    }
    for (j, target) in health.targets.iter_mut().enumerate() {
        match TargetUrl::parse(&target.url) {
            Ok(parsed) => target.parsed = Some(parsed),
            Err(message) => c.at(format!("{path}.targets[{j}].url"), message),
        }
        c.require(
            (100..=599).contains(&target.expect_status),
            format!("{path}.targets[{j}].expect_status"),
            "must be an HTTP status code, between 100 and 599",
        );
    }
    c.duration(
        &format!("{path}.interval"),
        health.interval,
        Millis(100),
        Millis::from_secs(86_400),
    );
    c.require(
        health.unhealthy_after >= 1,
        format!("{path}.unhealthy_after"),
        "must be at least 1",
    );
    if let Some(max) = health.max_latency {
        c.require(
            max.0 >= 1 && max < check_timeout,
            format!("{path}.max_latency"),
            "must be at least 1ms and shorter than checker.timeout",
        );
    }
}
