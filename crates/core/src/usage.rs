//! Usage accounting: who used how much of which upstream, through the gateways and the
//! extraction API.
//!
//! A gateway counts per (client, upstream) the requests it routed, the ones that failed and
//! the payload bytes in each direction, cumulatively since its process started
//! ([`GatewayUsage`], under a random `instance` id), and sends the totals in every runtime
//! report. The store keeps, per worker, the last totals it accounted for each instance, and
//! adds only the difference ([`usage_delta`]) in the same atomic step that accepts the
//! report. So a report that is lost is covered by the next one, a retried or replayed one
//! adds nothing, and a restarted gateway (a new instance) starts from zero: nothing is
//! counted twice or lost while the store keeps the worker's last totals.
//!
//! Extractions are counted in the extraction's own atomic step: each proxy handed out adds
//! one `extracted` to its (client, upstream).
//!
//! The store answers per client ([`ClientUsage`]): totals since the store began, per-minute
//! buckets for the last hour and per-hour buckets for the last day, each split by upstream.

use crate::error::PoolError;
use crate::ids::{ClientId, UpstreamId};
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// Per-minute buckets kept (the last hour).
pub const USAGE_MINUTES: u64 = 60;
/// Per-hour buckets kept (the last day).
pub const USAGE_HOURS: u64 = 24;
/// One minute in milliseconds.
pub const MINUTE_MS: u64 = 60_000;
/// One hour in milliseconds.
pub const HOUR_MS: u64 = 3_600_000;
/// How long the store remembers a worker's last totals after its last report: a gateway
/// silent for longer is counted from zero again when it comes back.
pub const USAGE_SEEN_TTL_MS: u64 = 24 * HOUR_MS;
/// Most (client, upstream) pairs one report may carry.
pub const MAX_USAGE_ENTRIES: usize = 100_000;

/// What a gateway counted for one (client, upstream), cumulatively.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayCounters {
    /// Requests (plain HTTP) and tunnels (CONNECT, SOCKS5) routed to an upstream proxy.
    pub requests: u64,
    /// Of those, the ones that failed at or after the dial (no answer from upstream).
    pub failures: u64,
    /// Payload bytes from the client towards the upstream.
    pub bytes_up: u64,
    /// Payload bytes from the upstream back to the client.
    pub bytes_down: u64,
}

impl GatewayCounters {
    /// `self - earlier`, field by field; a field that went down means the counters were
    /// reset, and then all of `self` is new.
    fn since(self, earlier: GatewayCounters) -> GatewayCounters {
        let step = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        GatewayCounters {
            requests: step(self.requests, earlier.requests),
            failures: step(self.failures, earlier.failures),
            bytes_up: step(self.bytes_up, earlier.bytes_up),
            bytes_down: step(self.bytes_down, earlier.bytes_down),
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == GatewayCounters::default()
    }
}

/// One (client, upstream) of a gateway's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayUsageEntry {
    pub client: ClientId,
    pub upstream: UpstreamId,
    #[serde(flatten)]
    pub counters: GatewayCounters,
}

/// A gateway process's cumulative usage, carried in its runtime reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayUsage {
    /// Random per process: totals of another instance are never compared with these.
    pub instance: String,
    pub entries: Vec<GatewayUsageEntry>,
}

impl GatewayUsage {
    pub fn validate(&self) -> Result<(), PoolError> {
        if self.instance.is_empty()
            || self.instance.len() > 64
            || !self.instance.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(PoolError::invalid(
                "usage instance must be 1-64 ASCII letters and digits",
            ));
        }
        if self.entries.len() > MAX_USAGE_ENTRIES {
            return Err(PoolError::invalid(format!(
                "a runtime report carries usage for at most {MAX_USAGE_ENTRIES} pairs"
            )));
        }
        let mut seen = HashSet::with_capacity(self.entries.len());
        for entry in &self.entries {
            if entry.counters.failures > entry.counters.requests {
                return Err(PoolError::invalid(format!(
                    "usage of {} on {}: more failures than requests",
                    entry.client, entry.upstream
                )));
            }
            if !seen.insert((&entry.client, &entry.upstream)) {
                return Err(PoolError::invalid(format!(
                    "usage of {} on {} appears twice in the report",
                    entry.client, entry.upstream
                )));
            }
        }
        Ok(())
    }
}

/// What the store has not counted yet of `current`, given the totals it last accounted
/// for this (worker, client, upstream): `previous` is `(instance, totals)`.
pub fn usage_delta(
    previous: Option<(&str, GatewayCounters)>,
    instance: &str,
    current: GatewayCounters,
) -> GatewayCounters {
    match previous {
        Some((seen, earlier)) if seen == instance => current.since(earlier),
        _ => current,
    }
}

/// Usage amounts of one (client, upstream) in one period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageAmounts {
    pub requests: u64,
    pub failures: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Proxies handed out by extractions.
    pub extracted: u64,
}

impl UsageAmounts {
    /// Adds a gateway delta.
    pub fn add_gateway(&mut self, delta: GatewayCounters) {
        self.requests = self.requests.saturating_add(delta.requests);
        self.failures = self.failures.saturating_add(delta.failures);
        self.bytes_up = self.bytes_up.saturating_add(delta.bytes_up);
        self.bytes_down = self.bytes_down.saturating_add(delta.bytes_down);
    }
}

/// One upstream's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamUsage {
    pub upstream: UpstreamId,
    #[serde(flatten)]
    pub amounts: UsageAmounts,
}

/// One period (a minute or an hour) starting at `start_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageBucket {
    pub start_ms: UnixMillis,
    pub upstreams: Vec<UpstreamUsage>,
}

/// A client's usage as the store answers it. Lists are sorted (upstreams by id, buckets by
/// start) and leave out what is all zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientUsage {
    pub client: ClientId,
    pub totals: Vec<UpstreamUsage>,
    /// The last [`USAGE_MINUTES`] minutes (the current one included).
    pub minutes: Vec<UsageBucket>,
    /// The last [`USAGE_HOURS`] hours (the current one included).
    pub hours: Vec<UsageBucket>,
}

/// Amounts per upstream.
pub type UpstreamAmounts = BTreeMap<UpstreamId, UsageAmounts>;

impl UsageAmounts {
    /// Sets or adds the amount of one kind by its name; false for an unknown kind.
    pub fn add_kind(&mut self, kind: &str, amount: u64) -> bool {
        let field = match kind {
            "requests" => &mut self.requests,
            "failures" => &mut self.failures,
            "bytes_up" => &mut self.bytes_up,
            "bytes_down" => &mut self.bytes_down,
            "extracted" => &mut self.extracted,
            _ => return false,
        };
        *field = field.saturating_add(amount);
        true
    }
}

impl ClientUsage {
    /// The answer from what a store holds: totals, and buckets by minute and hour number.
    /// Zero amounts and empty buckets are left out; buckets are sorted by start.
    pub fn from_parts(
        client: ClientId,
        totals: &UpstreamAmounts,
        minutes: &BTreeMap<u64, UpstreamAmounts>,
        hours: &BTreeMap<u64, UpstreamAmounts>,
    ) -> ClientUsage {
        let upstreams = |amounts: &UpstreamAmounts| {
            amounts
                .iter()
                .filter(|(_, a)| **a != UsageAmounts::default())
                .map(|(upstream, a)| UpstreamUsage {
                    upstream: upstream.clone(),
                    amounts: *a,
                })
                .collect::<Vec<_>>()
        };
        let buckets = |periods: &BTreeMap<u64, UpstreamAmounts>, length: u64| {
            periods
                .iter()
                .map(|(at, amounts)| UsageBucket {
                    start_ms: at.saturating_mul(length),
                    upstreams: upstreams(amounts),
                })
                .filter(|bucket| !bucket.upstreams.is_empty())
                .collect()
        };
        ClientUsage {
            client,
            totals: upstreams(totals),
            minutes: buckets(minutes, MINUTE_MS),
            hours: buckets(hours, HOUR_MS),
        }
    }
}

/// The first minute and hour still kept at `now`.
pub fn usage_horizon(now: UnixMillis) -> (u64, u64) {
    let minute = now / MINUTE_MS;
    let hour = now / HOUR_MS;
    (
        minute.saturating_sub(USAGE_MINUTES - 1),
        hour.saturating_sub(USAGE_HOURS - 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(requests: u64, bytes_up: u64) -> GatewayCounters {
        GatewayCounters {
            requests,
            failures: 0,
            bytes_up,
            bytes_down: 0,
        }
    }

    #[test]
    fn deltas_count_each_total_once() {
        assert_eq!(usage_delta(None, "a", counters(5, 10)), counters(5, 10));
        assert_eq!(
            usage_delta(Some(("a", counters(5, 10))), "a", counters(8, 10)),
            counters(3, 0)
        );
        // The same totals again (a replayed report): nothing new.
        assert!(usage_delta(Some(("a", counters(8, 10))), "a", counters(8, 10)).is_zero());
        // Another instance (a restarted gateway) counts from zero.
        assert_eq!(
            usage_delta(Some(("a", counters(8, 10))), "b", counters(2, 4)),
            counters(2, 4)
        );
        // A field that went down was reset: all of it is new.
        assert_eq!(
            usage_delta(Some(("a", counters(8, 10))), "a", counters(9, 3)),
            counters(1, 3)
        );
    }

    #[test]
    fn invalid_usage_is_refused() {
        let entry = |client: &str| GatewayUsageEntry {
            client: ClientId::new(client).unwrap(),
            upstream: UpstreamId::new("u").unwrap(),
            counters: counters(1, 1),
        };
        let ok = GatewayUsage {
            instance: "abc123".into(),
            entries: vec![entry("a"), entry("b")],
        };
        assert!(ok.validate().is_ok());
        let twice = GatewayUsage {
            entries: vec![entry("a"), entry("a")],
            ..ok.clone()
        };
        assert!(twice.validate().is_err());
        let bad_instance = GatewayUsage {
            instance: "a b".into(),
            ..ok.clone()
        };
        assert!(bad_instance.validate().is_err());
        let mut failing = ok;
        failing.entries[0].counters.failures = 2;
        assert!(failing.validate().is_err());
    }
}
