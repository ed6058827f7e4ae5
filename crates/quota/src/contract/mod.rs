//! The quota contract suite: one set of public async test functions every backend runs.
//!
//! A backend implements [`QuotaFactory`] (fresh, empty, isolated quotas, each with its
//! store ledger) and [`QuotaHarness`] (a look at what was stored, and a way to end the
//! current windows), then invokes [`contract_suite!`](crate::contract_suite) in a test
//! file. The macro lists every function once, so memory, SQLite and PostgreSQL run the
//! same suite, never a copy.
//!
//! Real stores decide on their own clock, so a scenario that must stay inside one window
//! runs through [`fixtures::in_one_window`], which repeats it in a fresh bucket if it
//! happened to straddle a window boundary (instead of sleeping to avoid one).
//!
//! Modules: `admission` (limits, retry-after, concurrency), `per_call` (limits that differ
//! between callers or change between calls, on one instance), `replay` (receipts),
//! `settle` (charged or replayed, refunds and spends, under concurrency too),
//! `window` (alignment and expiry), `isolation` (bucket keys), `validation` (input rules,
//! boundary sizes), `ledger` (the store ledger: exact entries, compare-and-set, generations,
//! races, input rules), `fixtures` (the memory factory and helpers), `harness` (the traits a
//! backend implements), `suite` (the macro).
//!
//! Behind the crate's `contract` feature: the suite is for tests, never in a production
//! build.

pub mod admission;
pub mod fixtures;
mod harness;
pub mod isolation;
pub mod ledger;
pub mod per_call;
pub mod replay;
pub mod settle;
mod suite;
pub mod validation;
pub mod window;

pub use harness::{QuotaFactory, QuotaHarness, StoredBucket};
