//! [`MemoryQuota`]: the quota in process memory, for tests and ephemeral runs.
//!
//! Same semantics as the SQL backends (aligned fixed windows, receipts in the bucket, the
//! same row validation), but the clock is injected ([`QuotaClock`]) so tests can move time
//! without sleeping, and the state dies with the process. It is not shared between replicas:
//! anything that needs fairness across processes uses SQLite (one machine) or PostgreSQL.
//!
//! Memory is bounded: at `max_buckets` the expired buckets are swept, and if every bucket is
//! still live a new bucket is refused as Unavailable (fail closed) rather than grown. Limits
//! come with each call, so a bucket remembers the window it was last decided with, and the
//! sweep judges it by that window.
//!
//! It is also a store ledger ([`StoreLedger`]): a [`MemoryLedger`] beside the buckets, so
//! a memory backend serves both ports, as the SQL backends do.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use proxypool_core::PoolResult;
use proxypool_core::store_mark::{LedgerEntry, StoreLedger};

use crate::command::{Operation, QuotaCommand};
use crate::config::{OperationLimits, QuotaPolicy};
use crate::decision::{self, BucketRow, FullBucket, QuotaDecision};
use crate::error::InvalidCommand;
use crate::memory_ledger::MemoryLedger;
use crate::port::QuotaPort;
use crate::settle::{Charge, SettleOutcome, Settlement};
use crate::unavailable::UnavailableReason;

/// Where [`MemoryQuota`] reads the time (ms since the Unix epoch).
pub trait QuotaClock: Send + Sync + Debug {
    /// The current time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl QuotaClock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| {
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
            })
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock showing `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        ManualClock {
            now_ms: AtomicU64::new(now_ms),
        }
    }

    /// Sets the time.
    pub fn set(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl QuotaClock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct BucketKey {
    project: String,
    subject: String,
    operation: Operation,
}

impl BucketKey {
    /// The bucket `command` counts against.
    fn of(command: &QuotaCommand) -> Self {
        Self {
            project: command.project.clone(),
            subject: command.subject.clone(),
            operation: command.operation,
        }
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    window_started_at_ms: u64,
    // The window length of the last decision: what the sweep measures expiry with. (A later
    // call with a longer window could still count a swept bucket as current; forgetting it
    // then only re-admits after a window change, and only under memory pressure.)
    window_ms: u64,
    // A Vec like the SQL arrays: at most 1000 entries, and the order is the admission order.
    receipt_ids: Vec<Box<str>>,
    updated_at_ms: u64,
}

/// A bucket as [`MemoryQuota::bucket`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBucket {
    /// Start of the bucket's window (ms since the Unix epoch).
    pub window_started_at_ms: u64,
    /// Admissions charged in the window.
    pub consumed_count: u32,
    /// The receipts charged in the window, in admission order.
    pub receipt_ids: Vec<String>,
    /// When the bucket last changed.
    pub updated_at_ms: u64,
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<BucketKey, Bucket>,
}

/// The in-memory quota. Cheap to clone handles via `Arc`; all state sits behind one mutex
/// that is never held across an `.await` (a decision is a few map operations).
#[derive(Debug)]
pub struct MemoryQuota {
    clock: Arc<dyn QuotaClock>,
    max_buckets: usize,
    state: Mutex<State>,
    ledger: MemoryLedger,
}

impl Default for MemoryQuota {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryQuota {
    /// Default bound on tracked buckets.
    pub const DEFAULT_MAX_BUCKETS: usize = 100_000;

    /// A memory quota on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A memory quota on `clock`.
    pub fn with_clock(clock: Arc<dyn QuotaClock>) -> Self {
        MemoryQuota {
            clock,
            max_buckets: Self::DEFAULT_MAX_BUCKETS,
            state: Mutex::new(State::default()),
            ledger: MemoryLedger::new(),
        }
    }

    /// Bounds the number of tracked buckets (at least 1).
    #[must_use]
    pub fn with_max_buckets(mut self, max_buckets: usize) -> Self {
        self.max_buckets = max_buckets.max(1);
        self
    }

    /// The stored bucket of (project, subject, operation), if any.
    pub fn bucket(
        &self,
        project: &str,
        subject: &str,
        operation: Operation,
    ) -> Option<MemoryBucket> {
        let key = BucketKey {
            project: project.to_owned(),
            subject: subject.to_owned(),
            operation,
        };
        let state = self.state();
        state.buckets.get(&key).map(|bucket| MemoryBucket {
            window_started_at_ms: bucket.window_started_at_ms,
            consumed_count: u32::try_from(bucket.receipt_ids.len()).unwrap_or(u32::MAX),
            receipt_ids: bucket.receipt_ids.iter().map(|id| id.to_string()).collect(),
            updated_at_ms: bucket.updated_at_ms,
        })
    }

    /// How many buckets are tracked.
    pub fn len(&self) -> usize {
        let state = self.state();
        state.buckets.len()
    }

    /// Whether no bucket is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The store ledger beside the buckets (what this quota's [`StoreLedger`] calls use).
    pub fn ledger(&self) -> &MemoryLedger {
        &self.ledger
    }

    fn decide(&self, command: &QuotaCommand, policy: QuotaPolicy) -> QuotaDecision {
        let window_ms = policy.limits.window_ms();
        let limit = policy.limits.limit() as usize;
        let key = BucketKey::of(command);
        let mut state = self.state();
        // Read the clock under the lock: decisions on one bucket see non-decreasing times.
        let now_ms = self.clock.now_ms();
        let window_start = now_ms - now_ms % window_ms;

        if !state.buckets.contains_key(&key) && state.buckets.len() >= self.max_buckets {
            state
                .buckets
                .retain(|_, bucket| bucket.window_started_at_ms + bucket.window_ms > now_ms);
            if state.buckets.len() >= self.max_buckets {
                return QuotaDecision::unavailable(UnavailableReason::Capacity);
            }
        }
        let receipt: Box<str> = command.receipt_id.as_str().into();
        let bucket = state.buckets.entry(key).or_insert_with(|| Bucket {
            window_started_at_ms: window_start,
            window_ms,
            receipt_ids: Vec::new(),
            updated_at_ms: now_ms,
        });
        bucket.window_ms = window_ms;

        // (admitted, charged)
        let (admitted, charged) = if bucket.window_started_at_ms < window_start {
            bucket.window_started_at_ms = window_start;
            bucket.receipt_ids.clear();
            bucket.receipt_ids.push(receipt);
            (true, true)
        } else if bucket.receipt_ids.contains(&receipt) {
            (true, false)
        } else if bucket.receipt_ids.len() < limit {
            bucket.receipt_ids.push(receipt);
            (true, true)
        } else {
            (false, false)
        };
        if admitted {
            bucket.updated_at_ms = bucket.updated_at_ms.max(now_ms);
        }

        let count = i64::try_from(bucket.receipt_ids.len()).unwrap_or(i64::MAX);
        let row = BucketRow {
            consumed_count: count,
            receipt_count: count,
            reset_at_ms: to_i64(bucket.window_started_at_ms + window_ms),
            observed_at_ms: to_i64(now_ms),
        };
        if admitted {
            return decision::admitted(row, policy, charged);
        }
        match decision::full(row, policy) {
            FullBucket::Decided(decision) => decision,
            // Under the lock nothing can change between deciding and reading.
            FullBucket::Changed => QuotaDecision::unavailable(UnavailableReason::Contended),
        }
    }
}

impl MemoryQuota {
    /// The state, locked. A poisoned lock only means another call panicked midway; every
    /// update is a single assignment or push, so the state is still consistent.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn settle_now(&self, charge: &Charge, settlement: &Settlement) -> SettleOutcome {
        let command = &charge.command;
        let key = BucketKey::of(command);
        let mut state = self.state();
        let now_ms = self.clock.now_ms();
        let Some(bucket) = state.buckets.get_mut(&key) else {
            return SettleOutcome::NotFound;
        };
        if bucket.window_started_at_ms != charge.window_started_at_ms
            || !charge.window_is_current(now_ms)
        {
            return SettleOutcome::NotFound;
        }
        let Some(position) = bucket
            .receipt_ids
            .iter()
            .position(|receipt| **receipt == *command.receipt_id)
        else {
            return SettleOutcome::NotFound;
        };
        match settlement {
            Settlement::Refund => {
                bucket.receipt_ids.remove(position);
            }
            Settlement::Spend { spent_as } => {
                if bucket
                    .receipt_ids
                    .iter()
                    .any(|receipt| **receipt == **spent_as)
                {
                    return SettleOutcome::NotFound;
                }
                // Kept in admission order like the SQL arrays: the renamed charge goes last.
                bucket.receipt_ids.remove(position);
                bucket.receipt_ids.push(spent_as.as_str().into());
            }
        }
        bucket.updated_at_ms = bucket.updated_at_ms.max(now_ms);
        SettleOutcome::Settled
    }
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[async_trait]
impl QuotaPort for MemoryQuota {
    async fn ready(&self) -> bool {
        true
    }

    async fn settle(
        &self,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, InvalidCommand> {
        charge.validate(settlement)?;
        Ok(self.settle_now(charge, settlement))
    }

    async fn consume(
        &self,
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<QuotaDecision, InvalidCommand> {
        let policy = QuotaPolicy::checked(command, limits)?;
        Ok(self.decide(command, policy))
    }
}

#[async_trait]
impl StoreLedger for MemoryQuota {
    async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>> {
        self.ledger.load(pool).await
    }

    async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool> {
        self.ledger.replace(pool, expected, entry).await
    }

    async fn raise_generation(
        &self,
        pool: &str,
        identity: &str,
        generation: u64,
    ) -> PoolResult<()> {
        self.ledger
            .raise_generation(pool, identity, generation)
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn full_memory_refuses_new_buckets_until_windows_expire() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let limits = OperationLimits::new(Duration::from_secs(1), 5).unwrap();
        let quota = MemoryQuota::with_clock(clock.clone()).with_max_buckets(2);
        let command = |subject: &str| QuotaCommand::new("p", subject, Operation::Extract, "r");
        let consume = async |subject: &str| quota.consume(&command(subject), limits).await;
        assert!(consume("a").await.unwrap().is_admitted());
        assert!(consume("b").await.unwrap().is_admitted());
        assert_eq!(
            consume("c").await.unwrap(),
            QuotaDecision::unavailable(UnavailableReason::Capacity)
        );
        // Known buckets still decide.
        assert!(consume("a").await.unwrap().is_admitted());
        clock.advance(1_000);
        assert!(consume("c").await.unwrap().is_admitted());
        assert_eq!(quota.len(), 1);
    }

    #[tokio::test]
    async fn the_sweep_measures_each_bucket_by_its_own_window() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let short = OperationLimits::new(Duration::from_secs(1), 5).unwrap();
        let long = OperationLimits::new(Duration::from_secs(60), 5).unwrap();
        let quota = MemoryQuota::with_clock(clock.clone()).with_max_buckets(2);
        let command = |subject: &str| QuotaCommand::new("p", subject, Operation::Extract, "r");
        assert!(
            quota
                .consume(&command("short"), short)
                .await
                .unwrap()
                .is_admitted()
        );
        assert!(
            quota
                .consume(&command("long"), long)
                .await
                .unwrap()
                .is_admitted()
        );
        clock.advance(1_000);
        // The 1 s bucket has expired and makes room; the 60 s one is still live and stays.
        assert!(
            quota
                .consume(&command("new"), short)
                .await
                .unwrap()
                .is_admitted()
        );
        assert!(quota.bucket("p", "long", Operation::Extract).is_some());
        assert!(quota.bucket("p", "short", Operation::Extract).is_none());
    }
}
