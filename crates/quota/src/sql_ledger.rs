//! The store ledger ([`StoreLedger`]) of every SQL backend, written once over
//! [`SqlBackend`]: the input checked first (`ledger.rs`), then one statement of the
//! backend's [`LedgerStatements`] on one pooled connection, within the backend's time
//! bound. Each backend's `StoreLedger` calls [`SqlLedger`] (a foreign trait cannot be
//! implemented for every `SqlBackend` at once).
//!
//! Each write is a compare-and-set in one statement, so concurrent controllers (any number
//! of processes on one database) cannot both win: `INSERT … ON CONFLICT (pool) DO
//! NOTHING` for a pool without an entry, `UPDATE … WHERE pool = … AND identity = …`
//! otherwise; `RETURNING` says whether it wrote (a row back) or not. PostgreSQL re-checks
//! the `WHERE` of an `UPDATE` that waited for a concurrent writer's row lock against the
//! row that writer committed; SQLite runs one writer at a time.
//!
//! Nothing is retried: a write whose reply was lost may have committed, and trying it
//! again would report a lost race that was won. A failed call is
//! [`PoolError::store_down`] (a short text, never the driver's, which may name the
//! server or the role) and the caller asks again later; a row that does not decode is
//! [`PoolError::corrupt`].
//!
//! [`LedgerStatements`]: crate::sql_backend::LedgerStatements
//! [`StoreLedger`]: proxypool_core::store_mark::StoreLedger

use std::future::Future;

use proxypool_core::store_mark::LedgerEntry;
use proxypool_core::{PoolError, PoolResult};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use crate::attempt::Checkout;
use crate::ledger::{LedgerRow, check_identity, check_pool, replacement, to_stored};
use crate::sql_backend::SqlBackend;
use crate::sqlx_error::{self, Store};
use crate::unavailable::UnavailableReason;

/// The store ledger over one SQL backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SqlLedger<'a, B>(pub(crate) &'a B);

impl<B> SqlLedger<'_, B>
where
    B: SqlBackend,
    <B::Db as Database>::Arguments: IntoArguments<B::Db>,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'a> &'a str: Encode<'a, B::Db> + Type<B::Db>,
    for<'a> i64: Encode<'a, B::Db> + Decode<'a, B::Db> + Type<B::Db>,
    for<'a> bool: Encode<'a, B::Db> + Decode<'a, B::Db> + Type<B::Db>,
    for<'a> String: Decode<'a, B::Db> + Type<B::Db>,
    for<'a> Option<&'a str>: Encode<'a, B::Db> + Type<B::Db>,
    for<'a> Option<i64>: Encode<'a, B::Db> + Decode<'a, B::Db> + Type<B::Db>,
    for<'a> Option<String>: Decode<'a, B::Db> + Type<B::Db>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
{
    /// The entry of `pool`, if any.
    pub(crate) async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>> {
        check_pool(pool)?;
        let statements = &B::STATEMENTS;
        let rows = self
            .run(async |connection| {
                sqlx::query::<B::Db>(statements.ledger.load)
                    .bind(pool)
                    .fetch_all(connection)
                    .await
            })
            .await?;
        match rows.as_slice() {
            [] => Ok(None),
            [row] => decode(row)?.decode().map(Some),
            _ => Err(PoolError::corrupt(
                "store ledger: more than one row for a pool",
            )),
        }
    }

    /// Writes `entry` if the stored entry names `expected` (`None`: there is none).
    pub(crate) async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool> {
        let row = replacement(pool, expected, entry)?;
        let statements = &B::STATEMENTS;
        let written = self
            .run(async |connection| {
                let query = match expected {
                    None => sqlx::query::<B::Db>(statements.ledger.insert).bind(pool),
                    Some(expected) => sqlx::query::<B::Db>(statements.ledger.update)
                        .bind(pool)
                        .bind(expected),
                };
                query
                    .bind(row.identity.as_str())
                    .bind(row.generation)
                    .bind(row.lost_at_ms)
                    .bind(row.hold_ms)
                    .bind(row.loss.as_deref())
                    .bind(row.installed)
                    .fetch_all(connection)
                    .await
            })
            .await?;
        // The pool is the primary key: one row at most.
        match written.len() {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(PoolError::corrupt(
                "store ledger: a write changed more than one row",
            )),
        }
    }

    /// Raises the generation of `identity`'s entry to at least `generation`.
    pub(crate) async fn raise_generation(
        &self,
        pool: &str,
        identity: &str,
        generation: u64,
    ) -> PoolResult<()> {
        check_pool(pool)?;
        check_identity("the identity", identity)?;
        let generation = to_stored("the generation", generation)?;
        let statements = &B::STATEMENTS;
        self.run(async |connection| {
            sqlx::query::<B::Db>(statements.ledger.raise)
                .bind(pool)
                .bind(identity)
                .bind(generation)
                .execute(connection)
                .await
        })
        .await?;
        Ok(())
    }

    /// Runs `statement` on a pooled connection within the backend's time bound. A
    /// connection abandoned at the bound is closed, not returned (`Checkout`).
    async fn run<T, F>(&self, statement: F) -> PoolResult<T>
    where
        F: AsyncFnOnce(&mut <B::Db as Database>::Connection) -> Result<T, sqlx::Error>,
    {
        let store = B::STATEMENTS.store;
        let call = async {
            let connection = self
                .0
                .pool()
                .acquire()
                .await
                .map_err(|error| failed(store, &error))?;
            let mut checkout = Checkout::new(connection);
            let outcome = statement(checkout.connection()).await;
            checkout.finish();
            outcome.map_err(|error| failed(store, &error))
        };
        bounded(self.0.decision_timeout(), call).await
    }
}

async fn bounded<T>(
    timeout: std::time::Duration,
    call: impl Future<Output = PoolResult<T>>,
) -> PoolResult<T> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(PoolError::store_down(
                "store ledger: the quota database did not answer in time",
            ))
        })
}

/// What a driver error means for the ledger: a result it cannot read is corrupt, anything
/// else is the database being unavailable (named by its class, never by the driver's text).
fn failed(store: Store, error: &sqlx::Error) -> PoolError {
    match sqlx_error::reason(store, error) {
        UnavailableReason::MalformedResult => {
            PoolError::corrupt("store ledger: the quota database returned an unreadable row")
        }
        reason => PoolError::store_down(format!(
            "store ledger: the quota database is unavailable ({reason})"
        )),
    }
}

/// The six entry columns of `row`, in the statements' order; a wrong shape, type or a NULL
/// in a NOT NULL column is corrupt.
fn decode<R>(row: &R) -> PoolResult<LedgerRow>
where
    R: Row,
    for<'a> i64: Decode<'a, R::Database> + Type<R::Database>,
    for<'a> bool: Decode<'a, R::Database> + Type<R::Database>,
    for<'a> String: Decode<'a, R::Database> + Type<R::Database>,
    for<'a> Option<i64>: Decode<'a, R::Database> + Type<R::Database>,
    for<'a> Option<String>: Decode<'a, R::Database> + Type<R::Database>,
    usize: ColumnIndex<R>,
{
    let unreadable = |_| PoolError::corrupt("store ledger: a row with unreadable columns");
    if row.len() != 6 {
        return Err(PoolError::corrupt("store ledger: a row of the wrong shape"));
    }
    Ok(LedgerRow {
        identity: row.try_get(0).map_err(unreadable)?,
        generation: row.try_get(1).map_err(unreadable)?,
        lost_at_ms: row.try_get(2).map_err(unreadable)?,
        hold_ms: row.try_get(3).map_err(unreadable)?,
        loss: row.try_get(4).map_err(unreadable)?,
        installed: row.try_get(5).map_err(unreadable)?,
    })
}
