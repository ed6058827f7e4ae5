//! The quota contract suite: one set of public async test functions every backend runs.
//!
//! A backend implements [`QuotaFactory`] (fresh, empty, isolated quotas) and
//! [`QuotaHarness`] (a look at what was stored, and a way to end the current windows), then
//! invokes [`contract_suite!`](crate::contract_suite) in a test file. The macro lists every
//! function once, so memory, SQLite and PostgreSQL run the same suite, never a copy.
//!
//! Real stores decide on their own clock, so a scenario that must stay inside one window
//! runs through [`fixtures::in_one_window`], which repeats it in a fresh bucket if it
//! happened to straddle a window boundary (instead of sleeping to avoid one).
//!
//! Modules: `admission` (limits, retry-after, concurrency), `per_call` (limits that differ
//! between callers or change between calls, on one instance), `replay` (receipts),
//! `settle` (charged or replayed, refunds and spends, under concurrency too),
//! `window` (alignment and expiry), `isolation` (bucket keys), `validation` (input rules,
//! boundary sizes), `fixtures` (the memory factory and helpers).

pub mod admission;
pub mod fixtures;
pub mod isolation;
pub mod per_call;
pub mod replay;
pub mod settle;
pub mod validation;
pub mod window;

use async_trait::async_trait;

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

/// Generates one `#[tokio::test]` per contract function for the factory expression given.
///
/// ```ignore
/// proxypool_quota::contract_suite!(proxypool_quota::contract::fixtures::MemoryFactory);
/// ```
#[macro_export]
macro_rules! contract_suite {
    ($factory:expr) => {
        $crate::contract_suite!(@each $factory;
            admission::admits_up_to_the_limit_then_exceeds,
            admission::retry_after_never_exceeds_the_window,
            admission::limits_are_per_operation,
            admission::concurrent_distinct_receipts_admit_exactly_the_limit,
            replay::replayed_receipt_is_admitted_without_charge,
            replay::replay_is_admitted_after_the_window_filled_up,
            window::windows_are_aligned_to_their_length,
            window::window_expiry_resets_count_and_receipts,
            isolation::buckets_are_separate_per_project_subject_and_operation,
            per_call::clients_on_one_instance_are_charged_under_their_own_limits,
            per_call::lowered_limit_denies_new_receipts_and_replays_stay_admitted,
            per_call::raised_limit_admits_more_in_the_same_window,
            validation::invalid_input_is_rejected_and_writes_nothing,
            validation::longest_valid_inputs_are_stored_intact,
            validation::full_bucket_holds_a_thousand_longest_receipts,
            settle::decisions_say_whether_they_charged,
            settle::refund_undoes_exactly_one_charge,
            settle::refund_makes_room_and_can_empty_a_bucket,
            settle::spend_keeps_the_charge_and_frees_the_receipt,
            settle::settling_after_the_window_ended_changes_nothing,
            settle::invalid_settlements_are_rejected_and_write_nothing,
            settle::concurrent_charges_and_refunds_stay_exact,
            settle::concurrent_same_receipt_is_charged_once,
        );
    };
    (@each $factory:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::contract::$module::$name(&$factory).await;
            }
        )*
    };
}
