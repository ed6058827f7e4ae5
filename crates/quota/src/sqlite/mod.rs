//! [`SqliteQuota`]: the embedded default, one SQLite file for one machine.
//!
//! Same semantics as PostgreSQL with SQLite's clock and the same single-statement decision
//! ([`SqliteQuota::DECISION_SQL`]). The file is in WAL mode with `synchronous=NORMAL`: every
//! decision survives a process crash or restart; only a power loss may forget the last
//! few commits, which at worst re-admits a few requests. Opening the quota applies the
//! migrations, so a fresh path just works.
//!
//! SQLite has one writer at a time, so the default pool has a single connection: extra
//! connections would only queue on the write lock (through the busy timeout's sleeps)
//! instead of in the pool.

mod sql;

use std::path::PathBuf;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use async_trait::async_trait;
use proxypool_core::PoolResult;
use proxypool_core::store_mark::{LedgerEntry, StoreLedger};

use crate::error::SetupError;
use crate::sql_backend::{LedgerStatements, SqlBackend, Statements};
use crate::sql_ledger::SqlLedger;
use crate::sqlx_error::Store;

mod schema;
pub use schema::migrate;

/// Settings of [`SqliteQuota`].
#[derive(Debug, Clone)]
pub struct SqliteSettings {
    /// The database file (created when missing).
    pub path: PathBuf,
    /// Connections (default 1: SQLite writes one at a time anyway).
    pub max_connections: u32,
    /// How long a statement waits for another connection's write lock.
    pub busy_timeout: Duration,
    /// How long a decision waits for a pooled connection.
    pub acquire_timeout: Duration,
    /// The bound on a whole decision.
    pub decision_timeout: Duration,
}

impl SqliteSettings {
    /// Defaults: 1 connection, 2 s busy, 2 s acquire, 3 s per decision.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteSettings {
            path: path.into(),
            max_connections: 1,
            busy_timeout: Duration::from_secs(2),
            acquire_timeout: Duration::from_secs(2),
            decision_timeout: Duration::from_secs(3),
        }
    }

    fn connect_options(&self) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(&self.path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(self.busy_timeout)
    }
}

/// The SQLite quota.
#[derive(Debug, Clone)]
pub struct SqliteQuota {
    pool: SqlitePool,
    decision_timeout: Duration,
}

impl SqliteQuota {
    /// The decision statement.
    pub const DECISION_SQL: &'static str = sql::DECIDE;
    /// The follow-up read of a full bucket.
    pub const READ_SQL: &'static str = sql::READ_BUCKET;

    /// Opens (creating if needed) the file and applies the migrations, within
    /// `settings.acquire_timeout` per connection.
    pub async fn open(settings: &SqliteSettings) -> Result<Self, SetupError> {
        let pool = SqlitePoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            .connect_lazy_with(settings.connect_options());
        migrate(&pool).await?;
        Ok(SqliteQuota {
            pool,
            decision_timeout: settings.decision_timeout,
        })
    }

    /// The pool (for health checks, tests and shutdown).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Closes the pool: waits for checked-out connections, then closes the file cleanly.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

// Its `QuotaPort` is the one every SQL backend shares (`sql_port.rs`).
impl SqlBackend for SqliteQuota {
    type Db = sqlx::Sqlite;

    const STATEMENTS: Statements = Statements {
        store: Store::Sqlite,
        decide: sql::DECIDE,
        read: sql::READ_BUCKET,
        refund: sql::REFUND,
        spend: sql::SPEND,
        ledger: LedgerStatements {
            load: sql::LEDGER_LOAD,
            insert: sql::LEDGER_INSERT,
            update: sql::LEDGER_UPDATE,
            raise: sql::LEDGER_RAISE,
        },
    };

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn decision_timeout(&self) -> Duration {
        self.decision_timeout
    }
}

// Its `StoreLedger` is the one every SQL backend shares (`sql_ledger.rs`).
#[async_trait]
impl StoreLedger for SqliteQuota {
    async fn load(&self, pool: &str) -> PoolResult<Option<LedgerEntry>> {
        SqlLedger(self).load(pool).await
    }

    async fn replace(
        &self,
        pool: &str,
        expected: Option<&str>,
        entry: &LedgerEntry,
    ) -> PoolResult<bool> {
        SqlLedger(self).replace(pool, expected, entry).await
    }

    async fn raise_generation(
        &self,
        pool: &str,
        identity: &str,
        generation: u64,
    ) -> PoolResult<()> {
        SqlLedger(self)
            .raise_generation(pool, identity, generation)
            .await
    }
}
