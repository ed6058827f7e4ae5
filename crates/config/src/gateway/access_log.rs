//! `[gateway.access_log]`: one line per request and per tunnel the gateway served or
//! refused, as JSON, squid's native format or the NCSA combined format, to standard output
//! or a file, with refusal lines on a budget of their own, and its checks. Every key but
//! `queue` applies on a reload, and a reload (SIGHUP) reopens the file, so logrotate can
//! move it away first.

use crate::check::Check;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[gateway.access_log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogConfig {
    /// Write the access log at all (off by default: a busy gateway writes a line per
    /// request).
    pub enabled: bool,
    /// The file lines are appended to (created with mode 0640 when missing; a relative
    /// path is relative to the config file); unset = standard output, apart from the
    /// process log on standard error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Log one in this many requests that were served; refusals and failures are not
    /// sampled (they have `refusals_per_second`). 1 = every request.
    pub sample_one_in: u32,
    /// The shape of a line: `json` (every field, for collectors), `squid` (squid's native
    /// `access.log`) or `combined` (the Apache/NCSA combined format), for the tools that
    /// already read those.
    pub format: AccessLogFormat,
    /// Lines waiting for the writer at most; beyond it lines are dropped and counted
    /// (`proxypool_gateway_access_log_lines_total{outcome="dropped"}`), so a slow disk never
    /// slows a request.
    pub queue: usize,
    /// Lines of refusals and failures written per second at most (a burst of one second's
    /// worth); refusal lines also never hold more than a quarter of `queue`. Beyond either,
    /// a refusal's line is dropped and counted
    /// (`proxypool_gateway_access_log_dropped_total{kind="refusal"}`), so a flood of refused
    /// requests cannot crowd out the lines of served ones. 0 = no refusal lines.
    pub refusals_per_second: u32,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            enabled: false,
            file: None,
            sample_one_in: 1,
            format: AccessLogFormat::Json,
            queue: 16_384,
            refusals_per_second: 1_000,
        }
    }
}

/// `[gateway.access_log] format`: the shape of each line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    /// One JSON object with the same keys on every line.
    #[default]
    Json,
    /// Squid's native `access.log` line (`logformat squid`).
    Squid,
    /// The Apache/NCSA combined log format.
    Combined,
}

/// Largest `sample_one_in`.
pub const MAX_SAMPLE_ONE_IN: u32 = 1_000_000;

/// Bounds of `queue`.
pub const QUEUE_RANGE: std::ops::RangeInclusive<usize> = 16..=1_048_576;

/// Largest `refusals_per_second`.
pub const MAX_REFUSALS_PER_SECOND: u32 = 1_000_000;

/// Checks `[gateway.access_log]` and makes a relative `file` relative to the config file.
pub(crate) fn validate(c: &mut Check<'_>, log: &mut AccessLogConfig) {
    if !(1..=MAX_SAMPLE_ONE_IN).contains(&log.sample_one_in) {
        c.at(
            "gateway.access_log.sample_one_in",
            format!("must be from 1 to {MAX_SAMPLE_ONE_IN}"),
        );
    }
    if !QUEUE_RANGE.contains(&log.queue) {
        c.at(
            "gateway.access_log.queue",
            format!(
                "must be from {} to {}",
                QUEUE_RANGE.start(),
                QUEUE_RANGE.end()
            ),
        );
    }
    if log.refusals_per_second > MAX_REFUSALS_PER_SECOND {
        c.at(
            "gateway.access_log.refusals_per_second",
            format!("must be between 0 and {MAX_REFUSALS_PER_SECOND}"),
        );
    }
    if let Some(file) = &mut log.file {
        c.require(
            !file.as_os_str().is_empty() && file.file_name().is_some(),
            "gateway.access_log.file",
            "must name a file (leave it out for standard output)",
        );
        c.anchor(file);
    }
}
