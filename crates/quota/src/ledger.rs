//! The rules of the store ledger ([`StoreLedger`]) every backend shares: what a pool name,
//! an identity and an entry must look like before any store is touched, and how an entry is
//! stored in SQL (and read back, strictly).
//!
//! The ledger is the durable memory of each pool store (`proxypool_core::store_mark`): its
//! identity and highest generation, kept in the quota's database so a pool store that lost
//! its data is recognised even after every controller restarted. Every backend keeps one
//! entry per pool name:
//! - `load` reads it;
//! - `replace` is a compare-and-set on the identity (`expected = None`: only when there is
//!   no entry yet);
//! - `raise_generation` raises the generation of the identity the entry names, never lowers
//!   it, and leaves an entry of another identity alone.
//!
//! Input errors are [`PoolError::InvalidInput`] and write nothing: a pool name that is not
//! 1 to [`MAX_POOL_NAME`] printable ASCII characters (space to `~`), an identity that is
//! not 32 hex digits ([`is_identity`]), or a number the SQL stores cannot hold (above
//! `i64::MAX`; every backend refuses it, so they all accept the same entries). A stored
//! row that does not decode into an entry is [`PoolError::corrupt`].
//!
//! [`StoreLedger`]: proxypool_core::store_mark::StoreLedger

use proxypool_core::store_mark::{LedgerEntry, LossReason, Recovery, is_identity};
use proxypool_core::{PoolError, PoolResult};

/// The longest pool name (the pool store's Redis key prefix) the ledger accepts.
pub(crate) const MAX_POOL_NAME: usize = 128;

/// Checks a pool name: 1 to [`MAX_POOL_NAME`] printable ASCII characters.
pub(crate) fn check_pool(pool: &str) -> PoolResult<()> {
    let printable = pool.bytes().all(|byte| (b' '..=b'~').contains(&byte));
    if (1..=MAX_POOL_NAME).contains(&pool.len()) && printable {
        Ok(())
    } else {
        Err(PoolError::invalid(format!(
            "store ledger: the pool name must be 1-{MAX_POOL_NAME} printable ASCII characters"
        )))
    }
}

/// Checks an identity a caller names (`what` says which, for the message).
pub(crate) fn check_identity(what: &str, identity: &str) -> PoolResult<()> {
    if is_identity(identity) {
        Ok(())
    } else {
        Err(PoolError::invalid(format!(
            "store ledger: {what} must be 32 hex digits"
        )))
    }
}

/// Checks every input of `StoreLedger::replace` (the pool, the identity expected, the
/// entry) and gives the row to store: one rule for every backend.
pub(crate) fn replacement(
    pool: &str,
    expected: Option<&str>,
    entry: &LedgerEntry,
) -> PoolResult<LedgerRow> {
    check_pool(pool)?;
    if let Some(expected) = expected {
        check_identity("the expected identity", expected)?;
    }
    LedgerRow::of(entry)
}

/// `value` as the SQL stores hold it (BIGINT); above `i64::MAX` is an input error.
pub(crate) fn to_stored(what: &str, value: u64) -> PoolResult<i64> {
    i64::try_from(value).map_err(|_| {
        PoolError::invalid(format!("store ledger: {what} must not exceed {}", i64::MAX))
    })
}

/// An entry as a SQL row holds it: numbers as BIGINT, the loss as its text, the recovery as
/// two columns that are both set or both NULL. The memory backend keeps its entries in this
/// form too, so every backend stores and reads back through the same rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LedgerRow {
    pub(crate) identity: String,
    pub(crate) generation: i64,
    pub(crate) lost_at_ms: Option<i64>,
    pub(crate) hold_ms: Option<i64>,
    pub(crate) loss: Option<String>,
    pub(crate) installed: bool,
}

impl LedgerRow {
    /// The row of `entry`, or the input error that makes it unstorable.
    pub(crate) fn of(entry: &LedgerEntry) -> PoolResult<LedgerRow> {
        check_identity("the entry's identity", &entry.identity)?;
        let generation = to_stored("the generation", entry.generation)?;
        let (lost_at_ms, hold_ms) = match entry.recovery {
            Some(recovery) => (
                Some(to_stored("the recovery's lost_at_ms", recovery.lost_at_ms)?),
                Some(to_stored("the recovery's hold_ms", recovery.hold_ms)?),
            ),
            None => (None, None),
        };
        Ok(LedgerRow {
            identity: entry.identity.clone(),
            generation,
            lost_at_ms,
            hold_ms,
            loss: entry.loss.map(|loss| loss.as_str().to_owned()),
            installed: entry.installed,
        })
    }

    /// The entry this row holds; anything that breaks the rules above is corrupt (the text
    /// names the column, never its value).
    pub(crate) fn decode(self) -> PoolResult<LedgerEntry> {
        if !is_identity(&self.identity) {
            return Err(corrupt("identity is not 32 hex digits"));
        }
        let generation = from_stored("generation", self.generation)?;
        let recovery = match (self.lost_at_ms, self.hold_ms) {
            (Some(lost_at_ms), Some(hold_ms)) => Some(Recovery {
                lost_at_ms: from_stored("lost_at_ms", lost_at_ms)?,
                hold_ms: from_stored("hold_ms", hold_ms)?,
            }),
            (None, None) => None,
            _ => return Err(corrupt("a recovery has only one of lost_at_ms and hold_ms")),
        };
        let loss = match self.loss.as_deref() {
            Some(text) => Some(LossReason::parse(text).ok_or_else(|| corrupt("unknown loss"))?),
            None => None,
        };
        Ok(LedgerEntry {
            identity: self.identity,
            generation,
            recovery,
            loss,
            installed: self.installed,
        })
    }
}

fn from_stored(column: &str, value: i64) -> PoolResult<u64> {
    u64::try_from(value).map_err(|_| corrupt(&format!("{column} is negative")))
}

fn corrupt(detail: &str) -> PoolError {
    PoolError::corrupt(format!("store ledger row: {detail}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::Unavailable;

    const ID: &str = "0123456789abcdefABCDEF0123456789";

    fn row() -> LedgerRow {
        LedgerRow {
            identity: ID.to_owned(),
            generation: 7,
            lost_at_ms: Some(1_000),
            hold_ms: Some(60_000),
            loss: Some("rolled_back".to_owned()),
            installed: true,
        }
    }

    fn is_corrupt(result: PoolResult<LedgerEntry>) -> bool {
        matches!(result, Err(PoolError::Unavailable(Unavailable::Corrupt(_))))
    }

    #[test]
    fn a_row_round_trips_through_its_entry() {
        let entry = row().decode().unwrap();
        assert_eq!(
            entry,
            LedgerEntry {
                identity: ID.to_owned(),
                generation: 7,
                recovery: Some(Recovery {
                    lost_at_ms: 1_000,
                    hold_ms: 60_000
                }),
                loss: Some(LossReason::RolledBack),
                installed: true,
            }
        );
        assert_eq!(LedgerRow::of(&entry).unwrap(), row());
    }

    #[test]
    fn rows_that_break_a_rule_are_corrupt() {
        let broken: [fn(&mut LedgerRow); 7] = [
            |row| row.identity = "0123".to_owned(),
            |row| row.identity = "g".repeat(32),
            |row| row.generation = -1,
            |row| row.lost_at_ms = None,
            |row| row.hold_ms = None,
            |row| row.hold_ms = Some(-5),
            |row| row.loss = Some("gone".to_owned()),
        ];
        for (index, breaks) in broken.iter().enumerate() {
            let mut row = row();
            breaks(&mut row);
            assert!(is_corrupt(row.decode()), "case {index}");
        }
        let mut bare = row();
        (bare.lost_at_ms, bare.hold_ms, bare.loss) = (None, None, None);
        assert!(bare.decode().is_ok());
    }

    #[test]
    fn pool_names_are_short_printable_ascii() {
        for good in ["p", "proxypool", " spaced ~!", &"x".repeat(128)] {
            assert!(check_pool(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "a\nb",
            "tab\t",
            "del\u{7f}",
            "caf\u{e9}",
            &"x".repeat(129),
        ] {
            assert!(
                matches!(check_pool(bad), Err(PoolError::InvalidInput(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn numbers_above_the_sql_range_are_input_errors() {
        assert_eq!(to_stored("n", i64::MAX as u64).unwrap(), i64::MAX);
        assert!(matches!(
            to_stored("n", i64::MAX as u64 + 1),
            Err(PoolError::InvalidInput(_))
        ));
    }
}
