//! One decision against a SQL store, shared by PostgreSQL and SQLite.
//!
//! The backends differ only in their statements and error codes
//! ([`Statements`]); the flow is the same: take a connection, run the decision statement, read the bucket with a
//! second statement if the decision came back without a row (full), validate the row
//! strictly (`decision.rs`). Both statements run on the same connection.

use std::marker::PhantomData;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::attempt::{Attempt, Checkout};
use crate::command::QuotaCommand;
use crate::config::QuotaPolicy;
use crate::decision::{self, BucketRow, FullBucket};
use crate::settle::{Charge, SettleOutcome, Settlement};
use crate::sql_backend::Statements;
use crate::sqlx_error;
use crate::unavailable::UnavailableReason;

/// The flow over one sqlx driver `DB`; what it needs of the driver is stated once, here.
pub(crate) struct SqlFlow<DB>(PhantomData<DB>);

impl<DB> SqlFlow<DB>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Decode<'a, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    /// One try: a connection from `pool`, closed rather than returned if the try is abandoned.
    pub(crate) async fn attempt(
        pool: &Pool<DB>,
        statements: &Statements,
        command: &QuotaCommand,
        policy: QuotaPolicy,
    ) -> Attempt {
        let connection = match pool.acquire().await {
            Ok(connection) => connection,
            Err(error) => return Attempt::failed(statements.store, &error),
        };
        let mut checkout = Checkout::new(connection);
        let outcome = Self::decide_on(checkout.connection(), statements, command, policy).await;
        checkout.finish();
        outcome
    }

    async fn decide_on(
        connection: &mut DB::Connection,
        statements: &Statements,
        command: &QuotaCommand,
        policy: QuotaPolicy,
    ) -> Attempt {
        let window_ms = i64::try_from(policy.limits.window_ms()).unwrap_or(i64::MAX);
        let rows = sqlx::query::<DB>(statements.decide)
            .bind(command.project.as_str())
            .bind(command.subject.as_str())
            .bind(command.operation.as_str())
            .bind(command.receipt_id.as_str())
            .bind(window_ms)
            .bind(i64::from(policy.limits.limit()))
            .fetch_all(&mut *connection)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => return Attempt::failed(statements.store, &error),
        };
        let [row] = rows.as_slice() else {
            return if rows.is_empty() {
                Self::read_full(connection, statements, command, policy, window_ms).await
            } else {
                Attempt::unavailable(UnavailableReason::MalformedResult)
            };
        };
        match decided_row(row) {
            Some((1, charged @ (0 | 1), bucket)) => {
                Attempt::Decided(decision::admitted(bucket, policy, charged == 1))
            }
            Some((0, 0, bucket)) => full(bucket, policy),
            _ => Attempt::unavailable(UnavailableReason::MalformedResult),
        }
    }

    /// The decision admitted nothing: the bucket is full (or changed under us, then retry).
    async fn read_full(
        connection: &mut DB::Connection,
        statements: &Statements,
        command: &QuotaCommand,
        policy: QuotaPolicy,
        window_ms: i64,
    ) -> Attempt {
        let rows = sqlx::query::<DB>(statements.read)
            .bind(command.project.as_str())
            .bind(command.subject.as_str())
            .bind(command.operation.as_str())
            .bind(window_ms)
            .fetch_all(&mut *connection)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => return Attempt::failed(statements.store, &error),
        };
        // The decision conflicted with this row and nothing may delete it: exactly one row.
        let [row] = rows.as_slice() else {
            return Attempt::unavailable(UnavailableReason::MalformedResult);
        };
        match bucket_row(row, 0) {
            Some(bucket) => full(bucket, policy),
            None => Attempt::unavailable(UnavailableReason::MalformedResult),
        }
    }

    /// Settles `charge` on a connection from `pool`: one statement, tried once more after a
    /// broken connection. Repeating is safe: a settlement that committed but whose reply was
    /// lost finds its receipt gone the second time and changes nothing.
    pub(crate) async fn settle(
        pool: &Pool<DB>,
        statements: &Statements,
        charge: &Charge,
        settlement: &Settlement,
    ) -> SettleOutcome {
        let mut last = UnavailableReason::Connection;
        for _ in 0..2 {
            let connection = match pool.acquire().await {
                Ok(connection) => connection,
                Err(error) => match sqlx_error::reason(statements.store, &error) {
                    UnavailableReason::Connection => continue,
                    reason => return SettleOutcome::Unavailable { reason },
                },
            };
            let mut checkout = Checkout::new(connection);
            let outcome =
                Self::settle_on(checkout.connection(), statements, charge, settlement).await;
            checkout.finish();
            match outcome {
                Ok(outcome) => return outcome,
                Err(UnavailableReason::Connection) => last = UnavailableReason::Connection,
                Err(reason) => return SettleOutcome::Unavailable { reason },
            }
        }
        SettleOutcome::Unavailable { reason: last }
    }

    async fn settle_on(
        connection: &mut DB::Connection,
        statements: &Statements,
        charge: &Charge,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, UnavailableReason> {
        let command = &charge.command;
        let (Ok(window_start), Ok(window_ms)) = (
            i64::try_from(charge.window_started_at_ms),
            i64::try_from(charge.limits.window_ms()),
        ) else {
            return Ok(SettleOutcome::NotFound);
        };
        let statement = match settlement {
            Settlement::Refund => statements.refund,
            Settlement::Spend { .. } => statements.spend,
        };
        let mut query = sqlx::query::<DB>(statement)
            .bind(command.project.as_str())
            .bind(command.subject.as_str())
            .bind(command.operation.as_str())
            .bind(command.receipt_id.as_str())
            .bind(window_start)
            .bind(window_ms);
        if let Settlement::Spend { spent_as } = settlement {
            query = query.bind(spent_as.as_str());
        }
        match query.fetch_all(&mut *connection).await {
            Ok(rows) if rows.len() == 1 => Ok(SettleOutcome::Settled),
            Ok(rows) if rows.is_empty() => Ok(SettleOutcome::NotFound),
            Ok(_) => Err(UnavailableReason::MalformedResult),
            Err(error) => Err(sqlx_error::reason(statements.store, &error)),
        }
    }
}

/// A full bucket's row: `Exceeded`, or decide again if it changed under us.
fn full(bucket: BucketRow, policy: QuotaPolicy) -> Attempt {
    match decision::full(bucket, policy) {
        FullBucket::Decided(decision) => Attempt::Decided(decision),
        FullBucket::Changed => Attempt::Retry(UnavailableReason::Contended),
    }
}

/// Decodes `decide`'s six integer columns; a wrong shape, NULL or other type is `None`.
fn decided_row<R>(row: &R) -> Option<(i64, i64, BucketRow)>
where
    R: Row,
    for<'a> i64: Decode<'a, R::Database> + Type<R::Database>,
    usize: ColumnIndex<R>,
{
    if row.len() != 6 {
        return None;
    }
    Some((
        row.try_get(0).ok()?,
        row.try_get(1).ok()?,
        bucket_row(row, 2)?,
    ))
}

/// Decodes four integer columns from `first` on; a wrong shape, NULL or other type is
/// `None`.
fn bucket_row<R>(row: &R, first: usize) -> Option<BucketRow>
where
    R: Row,
    for<'a> i64: Decode<'a, R::Database> + Type<R::Database>,
    usize: ColumnIndex<R>,
{
    if row.len() != first + 4 {
        return None;
    }
    Some(BucketRow {
        consumed_count: row.try_get(first).ok()?,
        receipt_count: row.try_get(first + 1).ok()?,
        reset_at_ms: row.try_get(first + 2).ok()?,
        observed_at_ms: row.try_get(first + 3).ok()?,
    })
}
