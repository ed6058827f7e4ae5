//! Shared fixtures of the contract suite: the memory factory, command builders, and the
//! "one window" guard for stores whose clock keeps running.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::harness::{QuotaFactory, QuotaHarness, StoredBucket};
use crate::memory::{ManualClock, MemoryQuota};
use crate::memory_ledger::MemoryLedger;
// Every contract module imports the fixtures with a glob; the port trait comes along so its
// methods are callable on any harness's quota.
pub use crate::QuotaPort;
use crate::{Operation, OperationLimits, QuotaCommand, QuotaConfig, QuotaDecision};

/// The project most scenarios use.
pub const PROJECT: &str = "proj-a";
/// The memory clock's start: deliberately not aligned to any window.
pub const T0_MS: u64 = 1_700_000_000_123;
/// The window most scenarios use: the longest allowed, so a scenario rarely straddles a
/// window boundary of a real store's clock.
pub const WINDOW: Duration = OperationLimits::MAX_WINDOW;
/// [`WINDOW`] in milliseconds.
pub const WINDOW_MS: u64 = 300_000;

/// `limit` per [`WINDOW`].
pub fn limits(limit: u32) -> OperationLimits {
    OperationLimits::new(WINDOW, limit).expect("suite limits are valid")
}

/// `limit` per `seconds`.
pub fn limits_in(seconds: u64, limit: u32) -> OperationLimits {
    OperationLimits::new(Duration::from_secs(seconds), limit).expect("suite limits are valid")
}

/// The same `limit` per [`WINDOW`] for every operation.
pub fn uniform(limit: u32) -> QuotaConfig {
    QuotaConfig::uniform(limits(limit))
}

/// A command.
pub fn command(project: &str, subject: &str, operation: Operation, receipt: &str) -> QuotaCommand {
    QuotaCommand::new(project, subject, operation, receipt)
}

/// Consumes `command` under `limits`; the command must be valid.
pub async fn consume<Q: QuotaPort + ?Sized>(
    quota: &Q,
    command: &QuotaCommand,
    limits: OperationLimits,
) -> QuotaDecision {
    quota
        .consume(command, limits)
        .await
        .unwrap_or_else(|error| panic!("valid command {command:?} rejected: {error}"))
}

/// `remaining` of an admission; panics on anything else.
pub fn remaining(decision: &QuotaDecision) -> u32 {
    match decision {
        QuotaDecision::Admitted { remaining, .. } => *remaining,
        other => panic!("expected Admitted, got {other:?}"),
    }
}

/// `retry_after_ms` of an exceeded decision; panics on anything else.
pub fn retry_after(decision: &QuotaDecision) -> u64 {
    match decision {
        QuotaDecision::Exceeded { retry_after_ms, .. } => *retry_after_ms,
        other => panic!("expected Exceeded, got {other:?}"),
    }
}

/// A scenario's decisions fell into more than one window: run it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossed;

/// Tracks that a scenario's decisions all fall into one window.
#[derive(Debug, Default)]
pub struct OneWindow {
    reset_at_ms: Option<u64>,
}

impl OneWindow {
    /// `Err(Crossed)` when `decision` is in another window than the ones before it. A healthy
    /// store must decide, so `Unavailable` fails the test.
    pub fn check(&mut self, decision: &QuotaDecision) -> Result<(), Crossed> {
        let reset_at_ms = decision
            .reset_at_ms()
            .unwrap_or_else(|| panic!("a healthy store must decide, got {decision:?}"));
        match self.reset_at_ms.replace(reset_at_ms) {
            Some(previous) if previous != reset_at_ms => Err(Crossed),
            _ => Ok(()),
        }
    }
}

/// Runs `scenario(attempt)` until one run stays inside one window (at most 3 runs). Each
/// run must use buckets of its own, e.g. a subject that includes `attempt`.
pub async fn in_one_window<F>(mut scenario: F)
where
    F: AsyncFnMut(u32) -> Result<(), Crossed>,
{
    for attempt in 0..3 {
        if scenario(attempt).await.is_ok() {
            return;
        }
    }
    panic!("three runs in a row straddled a window boundary; the store clock is unusable");
}

/// A fresh harness from the factory, or return from the test (the factory skipped).
#[macro_export]
#[doc(hidden)]
macro_rules! fresh_quota {
    ($factory:expr) => {
        match $crate::contract::QuotaFactory::create($factory).await {
            Some(harness) => harness,
            None => return,
        }
    };
}

/// [`MemoryQuota`] on a [`ManualClock`] as a [`QuotaFactory`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryFactory;

/// The memory harness: the quota and its clock.
#[derive(Debug)]
pub struct MemoryHarness {
    quota: Arc<MemoryQuota>,
    clock: Arc<ManualClock>,
}

#[async_trait]
impl QuotaFactory for MemoryFactory {
    type Harness = MemoryHarness;

    async fn create(&self) -> Option<MemoryHarness> {
        let clock = Arc::new(ManualClock::new(T0_MS));
        Some(MemoryHarness {
            quota: Arc::new(MemoryQuota::with_clock(clock.clone())),
            clock,
        })
    }
}

#[async_trait]
impl QuotaHarness for MemoryHarness {
    type Quota = Arc<MemoryQuota>;

    fn quota(&self) -> &Arc<MemoryQuota> {
        &self.quota
    }

    type Ledger = MemoryLedger;

    fn ledger(&self) -> &MemoryLedger {
        self.quota.ledger()
    }

    async fn ledger_count(&self) -> u64 {
        self.quota.ledger().len() as u64
    }

    async fn stored(
        &self,
        project: &str,
        subject: &str,
        operation: Operation,
    ) -> Option<StoredBucket> {
        self.quota
            .bucket(project, subject, operation)
            .map(|bucket| StoredBucket {
                consumed_count: bucket.consumed_count,
                receipt_ids: bucket.receipt_ids,
                window_started_at_ms: bucket.window_started_at_ms,
            })
    }

    async fn bucket_count(&self) -> u64 {
        self.quota.len() as u64
    }

    async fn expire_windows(&self) {
        // The longest window has passed: every bucket is in an older window.
        self.clock.advance(WINDOW_MS);
    }
}
