//! What a backend implements to run the suite: [`QuotaFactory`] makes fresh quotas,
//! [`QuotaHarness`] looks into the store behind one (its quota buckets and its store
//! ledger).

use async_trait::async_trait;
use proxypool_core::store_mark::StoreLedger;

use crate::{Operation, QuotaPort};

/// A bucket as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBucket {
    /// Admissions charged in the stored window.
    pub consumed_count: u32,
    /// The receipts charged in the stored window, in admission order.
    pub receipt_ids: Vec<String>,
    /// Start of the stored window (ms since the Unix epoch).
    pub window_started_at_ms: u64,
}

/// One quota under test, with a view into its store.
#[async_trait]
pub trait QuotaHarness: Send + Sync {
    /// The quota. `Clone` so concurrent tests can hand it to tasks.
    type Quota: QuotaPort + Clone + 'static;

    /// The quota under test.
    fn quota(&self) -> &Self::Quota;

    /// The store ledger of the same backend (the same database). `Clone` so concurrent
    /// tests can hand it to tasks.
    type Ledger: StoreLedger + Clone + 'static;

    /// The store ledger under test.
    fn ledger(&self) -> &Self::Ledger;

    /// How many pools have a ledger entry, read straight from the store.
    async fn ledger_count(&self) -> u64;

    /// The stored bucket of (project, subject, operation), read straight from the store.
    async fn stored(
        &self,
        project: &str,
        subject: &str,
        operation: Operation,
    ) -> Option<StoredBucket>;

    /// How many buckets the store holds.
    async fn bucket_count(&self) -> u64;

    /// Makes every stored window end, as if the store's clock had passed it (SQL stores:
    /// move the stored windows back, as the seed's tests do).
    async fn expire_windows(&self);
}

/// Makes fresh quotas for the suite.
#[async_trait]
pub trait QuotaFactory: Send + Sync {
    /// What [`QuotaFactory::create`] returns.
    type Harness: QuotaHarness;

    /// A fresh, empty quota, or `None` to skip (the factory says why, loudly). It holds no
    /// limits: every scenario passes its own with each call.
    async fn create(&self) -> Option<Self::Harness>;
}
