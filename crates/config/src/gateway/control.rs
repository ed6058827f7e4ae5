//! `[gateway] controller_url` and `[gateway.control]`: the controllers a split gateway
//! talks to (one, or every controller to fail over between) and the pacing of its control
//! loop, with their checks.

use crate::check::Check;
use crate::duration::Millis;
use crate::floors;
use crate::target::split_host_port;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

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

/// Checks `[gateway.control]`.
pub(crate) fn validate(c: &mut Check<'_>, control: &ControlConfig) {
    for (key, message) in floors::at_least_one([
        ("request_timeout", control.request_timeout.0),
        ("initial_backoff", control.initial_backoff.0),
    ]) {
        c.at(format!("gateway.control.{key}"), message);
    }
    if control.max_backoff < control.initial_backoff {
        c.at(
            "gateway.control.max_backoff",
            "must not be below control.initial_backoff",
        );
    }
}

/// Most controllers one gateway lists.
pub const MAX_CONTROLLER_URLS: usize = 16;

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

/// Checks a split gateway's `controller_url`.
pub(crate) fn validate_urls(c: &mut Check<'_>, urls: &ControllerUrls) {
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
