//! [`RefusalBudget`]: how many refusal lines the access log takes, apart from served ones.
//!
//! Refusals are cheap for anyone to cause (a wrong password, a denied destination, a
//! flood the shield turns away), and each would be a line. Unbounded, a refusal flood
//! fills the writer's queue and the lines an operator needs (the requests served) are the
//! ones dropped. So refusal lines have a budget of their own, and what is beyond it is
//! dropped and counted (`proxypool_gateway_access_log_dropped_total{kind="refusal"}`):
//!
//! - **a rate**: `refusals_per_second` lines, with a burst of one second's worth (a
//!   generic cell rate algorithm on one atomic: the time the next line is due), so the
//!   disk takes a bounded stream of them however fast they come;
//! - **a share of the queue**: refusal lines waiting for the writer never exceed a quarter
//!   of the queue, so however slow the disk, three quarters of it are left to served lines.
//!
//! The served path never touches any of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

const SECOND_NS: u64 = 1_000_000_000;
/// `interval_ns` when no refusal line is to be written (`refusals_per_second = 0`).
const NEVER: u64 = u64::MAX;

/// The refusal lines' rate and share of the queue (see the module docs).
#[derive(Debug)]
pub(super) struct RefusalBudget {
    epoch: Instant,
    /// When the next refusal line is due at the rate, in nanoseconds since `epoch`.
    due_ns: AtomicU64,
    /// Nanoseconds per line at the configured rate ([`NEVER`] at 0).
    interval_ns: AtomicU64,
    /// Refusal lines queued and not written yet (the writer counts them down).
    queued: Arc<AtomicUsize>,
    /// The most refusal lines queued at once.
    max_queued: usize,
}

impl RefusalBudget {
    /// A budget of `per_second` lines and a quarter of a queue of `queue` lines.
    pub(super) fn new(per_second: u32, queue: usize) -> RefusalBudget {
        RefusalBudget {
            epoch: Instant::now(),
            due_ns: AtomicU64::new(0),
            interval_ns: AtomicU64::new(interval(per_second)),
            queued: Arc::new(AtomicUsize::new(0)),
            max_queued: (queue / 4).max(1),
        }
    }

    /// A reload's rate, from the next refusal on.
    pub(super) fn set_rate(&self, per_second: u32) {
        self.interval_ns
            .store(interval(per_second), Ordering::Relaxed);
    }

    /// The count the writer lowers as it writes refusal lines.
    pub(super) fn queued(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.queued)
    }

    /// Whether one more refusal line fits the rate and the queue's share; `true` takes a
    /// place in the share, which [`release`](Self::release) or the writer gives back.
    pub(super) fn take(&self) -> bool {
        if !self.take_rate(self.epoch.elapsed().as_nanos() as u64) {
            return false;
        }
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued < self.max_queued).then_some(queued + 1)
            })
            .is_ok()
    }

    /// A taken place whose line never reached the queue.
    pub(super) fn release(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// The rate's part of [`take`](Self::take) at `now_ns`: a line is due no earlier than
    /// one interval after the last, and at most one second's worth may be taken ahead.
    fn take_rate(&self, now_ns: u64) -> bool {
        let interval = self.interval_ns.load(Ordering::Relaxed);
        if interval == NEVER {
            return false;
        }
        let mut due = self.due_ns.load(Ordering::Acquire);
        loop {
            let next = due.max(now_ns).saturating_add(interval);
            if next > now_ns.saturating_add(SECOND_NS) {
                return false;
            }
            match self
                .due_ns
                .compare_exchange_weak(due, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => due = now,
            }
        }
    }
}

fn interval(per_second: u32) -> u64 {
    match per_second {
        0 => NEVER,
        rate => SECOND_NS / u64::from(rate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_allows_a_seconds_worth_then_one_per_interval() {
        let budget = RefusalBudget::new(10, 1_000_000);
        let start = 5 * SECOND_NS;
        let taken = (0..100).filter(|_| budget.take_rate(start)).count();
        assert_eq!(taken, 10, "one second's worth at once");
        assert!(!budget.take_rate(start + SECOND_NS / 20), "not due yet");
        assert!(
            budget.take_rate(start + SECOND_NS / 10),
            "one interval later"
        );
        assert!(!budget.take_rate(start + SECOND_NS / 10));
        // A quiet stretch refills at most one second's worth.
        let later = start + 60 * SECOND_NS;
        assert_eq!((0..100).filter(|_| budget.take_rate(later)).count(), 10);
    }

    #[test]
    fn refusal_lines_never_hold_more_than_a_quarter_of_the_queue() {
        let budget = RefusalBudget::new(1_000_000, 64);
        let taken = (0..100).filter(|_| budget.take()).count();
        assert_eq!(taken, 16);
        budget.release();
        assert!(budget.take(), "a place given back is taken again");
        assert!(!budget.take());
        budget.queued().fetch_sub(4, Ordering::AcqRel);
        assert_eq!((0..100).filter(|_| budget.take()).count(), 4);
    }

    #[test]
    fn a_rate_of_zero_takes_none_and_a_reload_changes_the_rate() {
        let budget = RefusalBudget::new(0, 1_000);
        assert!(!budget.take());
        budget.set_rate(5);
        assert_eq!((0..100).filter(|_| budget.take()).count(), 5);
    }
}
