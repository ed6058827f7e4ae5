//! [`SqlBackend`]: what a SQL backend supplies to the one [`QuotaPort`](crate::QuotaPort)
//! implementation the SQL backends share (`sql_port.rs`), and to the one store ledger
//! (`sql_ledger.rs`): its driver, its statements, its pool and its time bound. Everything
//! else (validation, the decision flow, settling, the ledger's compare-and-set, error
//! mapping) is written once, over this trait.

use std::fmt::Debug;
use std::time::Duration;

use sqlx::{Database, Pool};

use crate::sqlx_error::Store;

/// What a SQL backend runs, as integers throughout:
/// - `decide` takes (project, subject, operation, receipt, window_ms, limit) and returns
///   `(admitted, charged, count, receipts, reset, observed)`: `admitted = 1` for the bucket
///   it just admitted into (`charged = 1` for a new charge, `0` for a replay), `0` for a
///   full bucket it read instead, or no row (full, not read);
/// - `read` takes (project, subject, operation, window_ms) and returns
///   `(count, receipts, reset, observed)`;
/// - `refund` takes (project, subject, operation, receipt, window start, window_ms) and
///   `spend` the same plus the new receipt; each returns one row when it applied, none
///   otherwise;
/// - `ledger`: the store ledger's statements ([`LedgerStatements`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Statements {
    pub(crate) store: Store,
    pub(crate) decide: &'static str,
    pub(crate) read: &'static str,
    pub(crate) refund: &'static str,
    pub(crate) spend: &'static str,
    pub(crate) ledger: LedgerStatements,
}

/// The store ledger's statements, each one statement (its own transaction), with the
/// entry's columns in one order everywhere: identity, generation, lost_at_ms, hold_ms,
/// loss, installed.
/// - `load` takes (pool) and returns those six columns, or no row;
/// - `insert` takes (pool, the six) and inserts unless the pool has a row (`ON CONFLICT
///   DO NOTHING`): one row affected when it inserted;
/// - `update` takes (pool, expected identity, the six) and writes them only where the row
///   still names the expected identity: one row affected when it wrote;
/// - `raise` takes (pool, identity, generation) and raises the generation of the row
///   naming that identity to at least the one given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LedgerStatements {
    pub(crate) load: &'static str,
    pub(crate) insert: &'static str,
    pub(crate) update: &'static str,
    pub(crate) raise: &'static str,
}

/// One SQL dialect's connection and statements: all a backend has to provide.
pub(crate) trait SqlBackend: Send + Sync + Debug {
    /// The sqlx driver.
    type Db: Database;

    /// The statements in this dialect.
    const STATEMENTS: Statements;

    /// The pool every decision and settlement takes a connection from.
    fn pool(&self) -> &Pool<Self::Db>;

    /// The bound on one whole decision, settlement or readiness probe.
    fn decision_timeout(&self) -> Duration;
}
