//! The retry loop the SQL backends share.
//!
//! A decision may be tried twice: after a broken pooled connection, or when the bucket
//! changed between the decision statement and the follow-up read. Repeating is safe because
//! the receipt makes the statement idempotent inside a window.

use std::future::Future;

use crate::decision::QuotaDecision;
use crate::sqlx_error::{self, Store};
use crate::unavailable::UnavailableReason;

/// How many times one decision runs.
const ATTEMPTS: usize = 2;

/// The outcome of one try.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The answer.
    Decided(QuotaDecision),
    /// Worth one more try; `Unavailable` with this reason if it was the last.
    Retry(UnavailableReason),
}

impl Attempt {
    /// Unavailable with `reason`, final.
    pub(crate) fn unavailable(reason: UnavailableReason) -> Self {
        Attempt::Decided(QuotaDecision::unavailable(reason))
    }

    /// A failed statement: a broken connection is worth one more try, anything else is the
    /// answer.
    pub(crate) fn failed(store: Store, error: &sqlx::Error) -> Self {
        match sqlx_error::reason(store, error) {
            UnavailableReason::Connection => Attempt::Retry(UnavailableReason::Connection),
            reason => Attempt::unavailable(reason),
        }
    }
}

/// Runs `attempt` until it decides, at most [`ATTEMPTS`] times.
pub(crate) async fn decide<F, Fut>(mut attempt: F) -> QuotaDecision
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Attempt>,
{
    let mut last = UnavailableReason::Contended;
    for _ in 0..ATTEMPTS {
        match attempt().await {
            Attempt::Decided(decision) => return decision,
            Attempt::Retry(reason) => last = reason,
        }
    }
    QuotaDecision::unavailable(last)
}

/// A pooled connection that is closed instead of returned when the decision using it is
/// abandoned midway (the decision timeout fired). Its protocol state is then unknown, and
/// returning it would make the pool ping a possibly hung server with no time bound, holding
/// a pool slot for as long as the server stays silent.
#[derive(Debug)]
pub(crate) struct Checkout<DB: sqlx::Database> {
    connection: sqlx::pool::PoolConnection<DB>,
    finished: bool,
}

impl<DB: sqlx::Database> Checkout<DB> {
    pub(crate) fn new(connection: sqlx::pool::PoolConnection<DB>) -> Self {
        Checkout {
            connection,
            finished: false,
        }
    }

    /// The connection to run statements on.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        &mut self.connection
    }

    /// The decision completed (with an answer or an error): return the connection normally.
    pub(crate) fn finish(mut self) {
        self.finished = true;
    }
}

impl<DB: sqlx::Database> Drop for Checkout<DB> {
    fn drop(&mut self) {
        if !self.finished {
            self.connection.close_on_drop();
        }
    }
}
