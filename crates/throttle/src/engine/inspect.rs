//! Building an [`EngineReport`]: counters, per-scope key counts, locked keys and the keys
//! under most pressure. Walks every shard (one lock at a time); meant for diagnostics, not
//! for the request path.

use super::shard::ShardCounters;
use super::token_bucket_engine::TokenBucketEngine;
use crate::bucket::Snapshot;
use crate::clock::Clock;
use crate::key::BucketKey;
use crate::limits::NANOS_PER_MILLI;
use crate::report::{EngineReport, KeyPressure, ScopeReport};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::{SystemTime, UNIX_EPOCH};

/// A key's pressure: locked keys first (longest remaining lockout first), then the largest
/// deficit in units (all scopes of one engine share the token scale, so units compare).
struct Ranked {
    rank: (bool, u64, u64),
    key: BucketKey,
    snapshot: Snapshot,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank.cmp(&other.rank)
    }
}

impl<C: Clock> TokenBucketEngine<C> {
    /// A report with the `top_n` keys under most pressure.
    pub fn report(&self, top_n: usize) -> EngineReport {
        let now_ns = self.clock.now_ns();
        let mut shard_counters = ShardCounters::default();
        let mut keys_per_scope = vec![0usize; self.scopes.len()];
        let mut hard_blocked = 0;
        // A min-heap of at most `top_n`: the weakest of the current top is evicted first.
        let mut top: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(top_n + 1);

        for shard in self.shards.iter() {
            let guard = shard.lock();
            shard_counters.add(&guard.counters);
            for entry in &guard.entries {
                let (key, state) = (&entry.key(), entry.state());
                keys_per_scope[key.scope().index()] += 1;
                let limits = &self.scopes[key.scope().index()].limits;
                let snapshot = state.snapshot(limits, now_ns);
                let locked = snapshot.lockout_remaining_ns > 0;
                hard_blocked += usize::from(locked);
                let deficit = u64::from(limits.capacity_units - snapshot.units);
                if top_n == 0 || (!locked && deficit == 0) {
                    continue;
                }
                top.push(Reverse(Ranked {
                    rank: (locked, snapshot.lockout_remaining_ns, deficit),
                    key: *key,
                    snapshot,
                }));
                if top.len() > top_n {
                    top.pop();
                }
            }
        }

        let counters = self.total_counters(&shard_counters);
        let scale = f64::from(self.options.token_scale);
        let top_keys = top
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(ranked)| {
                let limits = &self.scopes[ranked.key.scope().index()].limits;
                let snapshot = ranked.snapshot;
                KeyPressure {
                    scope: self.scopes[ranked.key.scope().index()].name.to_string(),
                    client: ranked.key.client().display(self.options.aggregation),
                    locked: snapshot.lockout_remaining_ns > 0,
                    lockout_remaining_ms: snapshot.lockout_remaining_ns.div_ceil(NANOS_PER_MILLI),
                    tokens: f64::from(snapshot.units) / scale,
                    deficit: f64::from(limits.capacity_units - snapshot.units) / scale,
                    soft_violations: snapshot.soft_violations,
                    idle_ms: snapshot.idle_ns / NANOS_PER_MILLI,
                }
            })
            .collect();

        let scopes = self
            .scopes
            .iter()
            .zip(keys_per_scope)
            .map(|(scope, tracked_keys)| ScopeReport {
                name: scope.name.to_string(),
                requests_per_second: scope.limits.requests_per_second(),
                burst: scope.limits.burst(),
                hard_lockout_ms: scope.limits.hard_lockout_ms(),
                max_soft_violations: scope.limits.max_soft_violations(),
                tracked_keys,
            })
            .collect();

        EngineReport {
            generated_at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64),
            clock_ms: now_ns / NANOS_PER_MILLI,
            options: self.options.clone(),
            scopes,
            counters,
            tracked_keys: self.tracked_keys(),
            peak_tracked: self.peak_tracked(),
            hard_blocked,
            top_keys,
        }
    }
}
