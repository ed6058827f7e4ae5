//! What a driver error means for a decision: always [`QuotaDecision::Unavailable`], with a
//! reason for logs. The driver's text never leaves the process through a decision.
//!
//! [`QuotaDecision::Unavailable`]: crate::QuotaDecision::Unavailable

use crate::unavailable::UnavailableReason;

/// PostgreSQL's `query_canceled`, what `statement_timeout` and `lock_timeout` raise.
#[cfg(feature = "postgres")]
const PG_QUERY_CANCELED: &str = "57014";
/// PostgreSQL's `lock_not_available` (`lock_timeout`).
#[cfg(feature = "postgres")]
const PG_LOCK_NOT_AVAILABLE: &str = "55P03";
/// SQLite's primary codes `SQLITE_BUSY` (the busy timeout ran out) and `SQLITE_LOCKED`;
/// sqlx reports extended codes, whose low byte is the primary one.
#[cfg(feature = "sqlite")]
const SQLITE_BUSY_CODES: [i64; 2] = [5, 6];

/// Which store produced the error: their error codes live in different spaces. A variant
/// exists only with its backend's feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    #[cfg(feature = "postgres")]
    Postgres,
    #[cfg(feature = "sqlite")]
    Sqlite,
}

fn is_timeout_code(store: Store, code: &str) -> bool {
    match store {
        #[cfg(feature = "postgres")]
        Store::Postgres => code == PG_QUERY_CANCELED || code == PG_LOCK_NOT_AVAILABLE,
        #[cfg(feature = "sqlite")]
        Store::Sqlite => code
            .parse::<i64>()
            .is_ok_and(|code| SQLITE_BUSY_CODES.contains(&(code & 0xff))),
    }
}

pub(crate) fn reason(store: Store, error: &sqlx::Error) -> UnavailableReason {
    match error {
        sqlx::Error::PoolTimedOut => UnavailableReason::Timeout,
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => UnavailableReason::Connection,
        sqlx::Error::Database(database) => {
            let code = database.code();
            if is_timeout_code(store, code.as_deref().unwrap_or_default()) {
                UnavailableReason::Timeout
            } else {
                UnavailableReason::Database
            }
        }
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::TypeNotFound { .. }
        | sqlx::Error::RowNotFound => UnavailableReason::MalformedResult,
        _ => UnavailableReason::Database,
    }
}

// The test compares both stores' codes, so it needs both backends.
#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests {
    use super::*;

    #[test]
    fn timeout_codes_per_store() {
        assert!(is_timeout_code(Store::Postgres, "57014"));
        assert!(is_timeout_code(Store::Postgres, "55P03"));
        assert!(!is_timeout_code(Store::Postgres, "23514"));
        assert!(is_timeout_code(Store::Sqlite, "5"));
        assert!(is_timeout_code(Store::Sqlite, "517")); // SQLITE_BUSY_SNAPSHOT
        assert!(!is_timeout_code(Store::Sqlite, "275")); // SQLITE_CONSTRAINT_CHECK
        assert_eq!(
            reason(Store::Sqlite, &sqlx::Error::PoolTimedOut),
            UnavailableReason::Timeout
        );
        assert_eq!(
            reason(Store::Postgres, &sqlx::Error::PoolClosed),
            UnavailableReason::Connection
        );
    }
}
