//! proxypool-quota: the durable fixed-window quota per (project, subject, operation).
//!
//! The quota is consumed after authentication and authorization and before any mutation
//! (docs/ARCHITECTURE.md). It is what keeps several controller replicas fair to each other,
//! which a per-process limiter cannot do: the store's own clock decides the window and one
//! statement decides each request, so any number of replicas share one answer.
//!
//! Semantics, common to every backend:
//! - every decision is made under the limits the call brings (a client's own), so one backend
//!   instance serves every client and a changed limit applies from the next call;
//! - one bucket per (project, subject, operation): `window_started_at_ms`, `consumed_count`,
//!   `receipt_ids`, `updated_at_ms`; windows are aligned to multiples of the window length;
//! - an expired window resets count and receipts; a receipt already in the window is admitted
//!   without a second charge (a replay after a lost response is never charged twice); under
//!   the limit the count grows by one and the receipt is appended; a full bucket is not
//!   touched and the caller learns how long to wait;
//! - a decision says whether it charged or replayed, and only one that charged may settle
//!   its charge afterwards: refund it (the service failed the request) or spend it (keep the
//!   charge under another receipt, so the original is charged again when it returns);
//! - anything the backend cannot vouch for (store down, timeout, malformed row) is
//!   [`QuotaDecision::Unavailable`]: fail closed, never a silent allow.
//!
//! Every backend is also the store ledger (`proxypool_core::store_mark::StoreLedger`): the
//! durable identity and highest generation of each pool store, in the same database, so a
//! pool store (Redis) that lost its data is recognised even after every controller
//! restarted. One entry per pool name, written only by compare-and-set on its identity.
//!
//! Wiring it (what the CLI and the API do; the API maps decisions to HTTP itself, this
//! crate knows nothing of HTTP):
//!
//! ```no_run
//! # #[cfg(feature = "postgres")]
//! use proxypool_quota::{Operation, PostgresQuota, PostgresSettings, QuotaCommand, QuotaConfig, QuotaDecision, QuotaPort};
//! # #[cfg(feature = "postgres")]
//! # async fn wire(admin_url: &str, admin: &sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! // Once, as the owner (`proxypool migrate`):
//! proxypool_quota::postgres::migrate_url(admin_url, None).await?;
//! proxypool_quota::postgres::create_quota_role(admin, "proxypool_quota", Some("secret")).await?;
//!
//! // In every replica, as the least-privilege role:
//! let settings = PostgresSettings::new("postgres://proxypool_quota:secret@db:5432/proxypool");
//! let quota = PostgresQuota::connect_lazy(&settings)?;
//!
//! // Per request, after authentication and authorization, before any mutation, under the
//! // client's own limits (here the defaults):
//! let client_limits = QuotaConfig::default();
//! let command = QuotaCommand::new("project-1", "client-7", Operation::Extract, "idem-key-42");
//! match quota.consume(&command, client_limits.limits(command.operation)).await {
//!     Ok(QuotaDecision::Admitted { remaining, .. }) => { /* mutate; tell the client */ }
//!     Ok(QuotaDecision::Exceeded { retry_after_ms, .. }) => { /* refuse, retry later */ }
//!     Ok(QuotaDecision::Unavailable { .. }) => { /* fail closed */ }
//!     Err(invalid) => { /* the caller's input error; names the field only */ }
//! }
//! # Ok(()) }
//! ```
//!
//! Module map:
//! - `command`, `validate`: [`QuotaCommand`], [`Operation`] and the input rules checked before
//!   any store is touched.
//! - `config`: [`OperationLimits`] (one operation's window and limit, with hard caps), what
//!   every call brings; [`QuotaConfig`], one client's limits per operation with defaults,
//!   for callers to look them up (backends hold no limits).
//! - `decision`: [`QuotaDecision`] and the strict validation of what a store returned,
//!   shared by the SQL backends and the memory backend; `unavailable`: [`UnavailableReason`].
//! - `port`: the [`QuotaPort`] trait callers depend on.
//! - `settle`: [`Charge`], [`Settlement`], [`SettleOutcome`]: undoing a charge the service
//!   could not earn, or keeping it while freeing a receipt the client must pay again for.
//! - [`memory`]: [`MemoryQuota`], for tests and ephemeral runs (injectable clock).
//! - `ledger`: the store ledger's input rules and its stored form, shared by every backend;
//!   `memory_ledger`: [`MemoryLedger`] (what [`MemoryQuota`]'s ledger calls use);
//!   `sql_ledger`: the one ledger implementation the SQL backends call.
//! - `sqlite` (feature `sqlite`): `SqliteQuota`, the embedded default (one file, survives
//!   restarts).
//! - `postgres` (feature `postgres`): `PostgresQuota`, migrations and the least-privilege
//!   role.
//! - `contract` (feature `contract`, off by default): the public async test functions every
//!   backend runs (quota and store ledger); the test crates that run them enable it.
//! - `error`: [`InvalidCommand`], [`ConfigError`], and `SetupError` (with a SQL backend).
//! - `sql_backend`, `sql_port`: what a SQL backend supplies (its driver, statements, pool
//!   and time bound) and the one `QuotaPort` implementation written over it;
//!   `sql_decision`, `attempt`, `sqlx_error`: the decision and settlement flow the SQL
//!   backends share, the bounded retry, and what a driver error means for a decision;
//!   `sql_migrations`: the migrator both build from their embedded migration files.
//!
//! Features: `sqlite` and `postgres` (both default) add the SQL backends and sqlx. Without
//! them the crate is the port, the types and the memory backend: what a caller that is
//! handed a quota needs. `contract` adds the contract suite, for tests only.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod attempt;
mod command;
mod config;
#[cfg(feature = "contract")]
pub mod contract;
mod decision;
mod error;
mod ledger;
pub mod memory;
mod memory_ledger;
mod port;
#[cfg(feature = "postgres")]
pub mod postgres;
mod settle;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_backend;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_decision;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_ledger;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_migrations;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_port;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sqlx_error;
mod unavailable;
mod validate;

pub use command::{Operation, QuotaCommand};
pub use config::{OperationLimits, QuotaConfig, QuotaPolicy};
pub use decision::QuotaDecision;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use error::SetupError;
pub use error::{CommandField, ConfigError, InputProblem, InvalidCommand};
pub use memory::{ManualClock, MemoryQuota, QuotaClock, SystemClock};
pub use memory_ledger::MemoryLedger;
pub use port::QuotaPort;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresQuota, PostgresSettings};
pub use settle::{Charge, SettleOutcome, Settlement};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteQuota, SqliteSettings};
pub use unavailable::UnavailableReason;
