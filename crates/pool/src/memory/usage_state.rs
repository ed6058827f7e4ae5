//! Usage accounting in MemoryPool's state (the reference for
//! `crates/redis/src/lua/report.lua`, `extract.lua` and `usage.lua`): per worker the
//! gateway totals last accounted, per client the totals and the minute and hour buckets.
//! The `UsageReader` port reads it in `usage.rs`.

use proxypool_core::usage::{
    ClientUsage, GatewayUsage, HOUR_MS, MINUTE_MS, USAGE_SEEN_TTL_MS, UpstreamAmounts,
    UsageAmounts, usage_delta, usage_horizon,
};
use proxypool_core::{ClientId, UnixMillis, UpstreamId, WorkerId};
use std::collections::{BTreeMap, HashMap};

/// The gateway totals last accounted for one (worker, client, upstream).
#[derive(Debug, Clone)]
struct Seen {
    instance: String,
    counters: proxypool_core::usage::GatewayCounters,
    at_ms: UnixMillis,
}

/// Everything usage accounting keeps.
#[derive(Debug, Default)]
pub(crate) struct UsageState {
    seen: HashMap<(WorkerId, ClientId, UpstreamId), Seen>,
    totals: HashMap<ClientId, UpstreamAmounts>,
    /// (minute or hour number, upstream) per client.
    minutes: HashMap<ClientId, BTreeMap<(u64, UpstreamId), UsageAmounts>>,
    hours: HashMap<ClientId, BTreeMap<(u64, UpstreamId), UsageAmounts>>,
}

impl UsageState {
    /// Accounts a report's usage (the report was accepted at `now`).
    pub(crate) fn record_gateway(
        &mut self,
        now: UnixMillis,
        worker: &WorkerId,
        usage: &GatewayUsage,
    ) {
        for entry in &usage.entries {
            let key = (worker.clone(), entry.client.clone(), entry.upstream.clone());
            let previous = self
                .seen
                .get(&key)
                .filter(|seen| now < seen.at_ms.saturating_add(USAGE_SEEN_TTL_MS))
                .map(|seen| (seen.instance.as_str(), seen.counters));
            let delta = usage_delta(previous, &usage.instance, entry.counters);
            self.seen.insert(
                key,
                Seen {
                    instance: usage.instance.clone(),
                    counters: entry.counters,
                    at_ms: now,
                },
            );
            if !delta.is_zero() {
                self.add(now, &entry.client, &entry.upstream, |amounts| {
                    amounts.add_gateway(delta)
                });
            }
        }
    }

    /// Accounts `count` proxies of `upstream` handed out to `client` at `now`.
    pub(crate) fn record_extracted(
        &mut self,
        now: UnixMillis,
        client: &ClientId,
        upstream: &UpstreamId,
        count: u64,
    ) {
        self.add(now, client, upstream, |amounts| {
            amounts.extracted = amounts.extracted.saturating_add(count)
        });
    }

    fn add(
        &mut self,
        now: UnixMillis,
        client: &ClientId,
        upstream: &UpstreamId,
        change: impl Fn(&mut UsageAmounts),
    ) {
        change(
            self.totals
                .entry(client.clone())
                .or_default()
                .entry(upstream.clone())
                .or_default(),
        );
        let (first_minute, first_hour) = usage_horizon(now);
        for (buckets, period, first) in [
            (&mut self.minutes, now / MINUTE_MS, first_minute),
            (&mut self.hours, now / HOUR_MS, first_hour),
        ] {
            let client_buckets = buckets.entry(client.clone()).or_default();
            change(
                client_buckets
                    .entry((period, upstream.clone()))
                    .or_default(),
            );
            // Buckets older than the horizon are gone, as their keys expire in Redis.
            client_buckets.retain(|(at, _), _| *at >= first);
        }
    }

    /// Forgets the totals of workers silent for longer than the usage memory.
    pub(crate) fn prune(&mut self, now: UnixMillis) {
        self.seen
            .retain(|_, seen| now < seen.at_ms.saturating_add(USAGE_SEEN_TTL_MS));
    }

    /// One client's usage as of `now`.
    pub(crate) fn read(&self, now: UnixMillis, client: &ClientId) -> ClientUsage {
        let (first_minute, first_hour) = usage_horizon(now);
        let periods = |all: &HashMap<ClientId, BTreeMap<(u64, UpstreamId), UsageAmounts>>,
                       first: u64| {
            let mut grouped: BTreeMap<u64, UpstreamAmounts> = BTreeMap::new();
            for ((at, upstream), amounts) in all.get(client).into_iter().flatten() {
                if *at >= first {
                    grouped
                        .entry(*at)
                        .or_default()
                        .insert(upstream.clone(), *amounts);
                }
            }
            grouped
        };
        ClientUsage::from_parts(
            client.clone(),
            self.totals.get(client).unwrap_or(&UpstreamAmounts::new()),
            &periods(&self.minutes, first_minute),
            &periods(&self.hours, first_hour),
        )
    }
}
