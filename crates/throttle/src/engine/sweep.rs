//! Bounded cleanup: how the engine keeps its memory bound without stalling checks.
//!
//! A sweep first evicts keys idle for `stale_after` (never a key whose lockout is still
//! running: dropping it would pardon the client). A locked key's state is frozen at the
//! lockout's start, so a lockout longer than `stale_after` leaves the key evictable as soon
//! as it ends; that pardons nothing, since its bucket has refilled and its violation count
//! restarted anyway. If the engine is still full, it then evicts
//! the least recently seen unlocked keys until a tenth of `max_tracked` is free, so new
//! clients can be admitted again. A sweep never evicts more than its budget and holds one
//! shard lock at a time, so it can run beside live traffic; the caller (or
//! [`crate::Sweeper`]) repeats it while `more_work` says so.

use super::token_bucket_engine::TokenBucketEngine;
use crate::clock::Clock;
use serde::Serialize;
use std::sync::atomic::Ordering;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepOutcome {
    /// Idle keys evicted.
    pub evicted_stale: usize,
    /// Least recently seen keys evicted to make room.
    pub evicted_lru: usize,
    /// Keys tracked after the sweep.
    pub tracked_after: usize,
    /// True when the budget ran out before the sweep was done: call again soon.
    pub more_work: bool,
}

impl SweepOutcome {
    /// All keys evicted by this sweep.
    pub fn evicted(&self) -> usize {
        self.evicted_stale + self.evicted_lru
    }
}

impl<C: Clock> TokenBucketEngine<C> {
    /// Evicts at most `max_evictions` keys: stale ones first, then, when the engine is full,
    /// the least recently seen unlocked ones.
    pub fn sweep(&self, max_evictions: usize) -> SweepOutcome {
        let now_ns = self.clock.now_ns();
        let mut outcome = SweepOutcome::default();
        let mut budget = max_evictions;
        let shard_count = self.shards.len();
        let start = self.sweep_cursor.load(Ordering::Relaxed) % shard_count;

        let mut visited = 0;
        while visited < shard_count && budget > 0 {
            let mut guard = self.shards[(start + visited) % shard_count].lock();
            let removed = guard
                .entries
                .extract_if(|entry| {
                    let state = entry.state();
                    let limits = &self.scopes[entry.scope().index()].limits;
                    now_ns.saturating_sub(state.last_seen_ns()) >= self.stale_after_ns
                        && !state.is_locked_at(limits, now_ns)
                })
                .take(budget)
                .count();
            drop(guard);
            self.evicted_stale
                .fetch_add(removed as u64, Ordering::Relaxed);
            self.release_tracking(removed);
            outcome.evicted_stale += removed;
            budget -= removed;
            // A shard whose stale keys exceeded the budget is swept again first next time.
            if budget > 0 {
                visited += 1;
            }
        }
        self.sweep_cursor
            .store((start + visited) % shard_count, Ordering::Relaxed);
        outcome.more_work = visited < shard_count;

        if !outcome.more_work && self.tracked_keys() >= self.options.max_tracked {
            let (evicted, done) = self.evict_least_recent(now_ns, budget);
            outcome.evicted_lru = evicted;
            outcome.more_work = !done;
        }
        outcome.tracked_after = self.tracked_keys();
        outcome
    }

    fn entry_locked_at(&self, entry: &super::entry::Entry, now_ns: u64) -> bool {
        let limits = &self.scopes[entry.scope().index()].limits;
        entry.state().is_locked_at(limits, now_ns)
    }

    /// Returns how many keys were evicted and whether the low-water mark was reached.
    ///
    /// Two passes, one shard lock at a time: the first finds the cutoff timestamp (the
    /// `goal`-th oldest last-seen time among unlocked keys), the second evicts keys older than
    /// it (and keys exactly at it until the goal is met). That is a true global LRU without
    /// sorting the map; the price is a transient vector of one `u64` per tracked key.
    fn evict_least_recent(&self, now_ns: u64, budget: usize) -> (usize, bool) {
        let max = self.options.max_tracked;
        let low_water = max - (max / 10).max(1);
        let wanted = self.tracked_keys().saturating_sub(low_water);

        let mut last_seen: Vec<u64> = Vec::with_capacity(self.tracked_keys());
        for shard in self.shards.iter() {
            let guard = shard.lock();
            last_seen.extend(
                guard
                    .entries
                    .iter()
                    .filter(|entry| !self.entry_locked_at(entry, now_ns))
                    .map(|entry| entry.state().last_seen_ns()),
            );
        }
        let goal = wanted.min(budget).min(last_seen.len());
        if goal == 0 {
            return (0, wanted == 0);
        }
        let (older, cutoff, _) = last_seen.select_nth_unstable(goal - 1);
        let cutoff = *cutoff;
        let mut at_cutoff_allowance = goal - older.iter().filter(|&&seen| seen < cutoff).count();

        let mut evicted = 0;
        for shard in self.shards.iter() {
            if evicted >= goal {
                break;
            }
            let mut guard = shard.lock();
            let removed = guard
                .entries
                .extract_if(|entry| {
                    if self.entry_locked_at(entry, now_ns) {
                        return false;
                    }
                    let seen = entry.state().last_seen_ns();
                    if seen < cutoff {
                        return true;
                    }
                    if seen == cutoff && at_cutoff_allowance > 0 {
                        at_cutoff_allowance -= 1;
                        return true;
                    }
                    false
                })
                .take(goal - evicted)
                .count();
            drop(guard);
            self.evicted_lru
                .fetch_add(removed as u64, Ordering::Relaxed);
            self.release_tracking(removed);
            evicted += removed;
        }
        (evicted, evicted >= wanted)
    }
}
