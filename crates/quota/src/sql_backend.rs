//! [`SqlBackend`]: what a SQL backend supplies to the one [`QuotaPort`](crate::QuotaPort)
//! implementation the SQL backends share (`sql_port.rs`): its driver, its statements, its
//! pool and its time bound. Everything else (validation, the decision flow, settling,
//! error mapping) is written once, over this trait.

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
///   otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Statements {
    pub(crate) store: Store,
    pub(crate) decide: &'static str,
    pub(crate) read: &'static str,
    pub(crate) refund: &'static str,
    pub(crate) spend: &'static str,
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
