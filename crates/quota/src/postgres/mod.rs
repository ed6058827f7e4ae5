//! [`PostgresQuota`]: the quota in PostgreSQL, shared by any number of replicas.
//!
//! Each decision is one statement ([`PostgresQuota::DECISION_SQL`]) deciding on the
//! database clock. For a full bucket the same statement also returns the row (and, when its
//! snapshot already shows the bucket full, skips the upsert: no row lock, no write); a
//! second statement ([`PostgresQuota::READ_SQL`]) reads the row only when the snapshot could
//! not see it (a bucket created concurrently). The result is checked strictly (`decision.rs`); driver errors, timeouts and broken rows
//! are [`QuotaDecision::Unavailable`], always within [`PostgresSettings::decision_timeout`]
//! (the pool's acquire timeout and the server's `statement_timeout` bound the parts, an
//! outer timer bounds the whole, including a server that accepts but never answers).
//!
//! Retrying is safe because of the receipts: a decision that committed but whose reply was
//! lost is, when repeated with the same receipt, admitted without a second charge. So a
//! decision that fails on a broken connection is tried once more on a fresh one.
//!
//! Submodules: `sql` (the statements), `schema` ([`migrate`], [`create_quota_role`]),
//! `operator` ([`operator::connect_operator`]: the operator's connection for the store ledger's
//! orders, which the runtime role may not write).
//!
//! [`PostgresSettings`]'s `Debug` hides the URL's credentials by cutting at `://` and the
//! last `@` rather than through a URL parser: it must hide them in a URL no parser accepts
//! too.

pub mod operator;
mod schema;
mod sql;

use std::fmt;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use async_trait::async_trait;
use proxypool_core::PoolResult;
use proxypool_core::store_mark::{LedgerEntry, StoreLedger};

use crate::error::SetupError;
use crate::sql_backend::{LedgerStatements, SqlBackend, Statements};
use crate::sql_ledger::SqlLedger;
use crate::sqlx_error::Store;

pub use schema::{SCHEMA, create_quota_role, migrate, migrate_url};

/// A pooled connection idle for longer than this is pinged before use: a server restart
/// leaves idle connections dead, and a ping is cheaper than a failed decision.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// Connection settings of [`PostgresQuota`].
#[derive(Clone)]
pub struct PostgresSettings {
    /// `postgres://user@host:port/database` of the quota role.
    pub url: String,
    /// The role's password, given apart from the URL so it never has to be written (or
    /// percent-encoded) into one.
    pub password: Option<String>,
    /// Connections per process. The seed runs 2 per replica; the default leaves headroom.
    pub max_connections: u32,
    /// How long a decision waits for a pooled connection (including connecting).
    pub acquire_timeout: Duration,
    /// The server-side `statement_timeout` of every statement (covers row-lock waits).
    pub statement_timeout: Duration,
    /// The bound on a whole decision, whatever hangs.
    pub decision_timeout: Duration,
}

impl PostgresSettings {
    /// Defaults: 4 connections, 2 s acquire, 2 s statement, 3 s per decision.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresSettings {
            url: url.into(),
            password: None,
            max_connections: 4,
            acquire_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(2),
            decision_timeout: Duration::from_secs(3),
        }
    }
}

impl fmt::Debug for PostgresSettings {
    // The URL may carry a password: show everything but the credentials.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = match (self.url.find("://"), self.url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}://***{}", &self.url[..scheme], &self.url[at..])
            }
            _ => self.url.clone(),
        };
        formatter
            .debug_struct("PostgresSettings")
            .field("url", &url)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("decision_timeout", &self.decision_timeout)
            .finish()
    }
}

/// The PostgreSQL quota. Run [`migrate`] and [`create_quota_role`] with an admin connection
/// first; the quota itself needs only the role's SELECT/INSERT/UPDATE.
#[derive(Debug, Clone)]
pub struct PostgresQuota {
    pool: PgPool,
    decision_timeout: Duration,
}

impl PostgresQuota {
    /// The decision statement (see the module docs).
    pub const DECISION_SQL: &'static str = sql::DECIDE;
    /// The fallback read of a full bucket the decision's snapshot could not see.
    pub const READ_SQL: &'static str = sql::READ_BUCKET;

    /// A quota over a lazily connecting pool: construction never waits for the server, and
    /// decisions taken while it is down are Unavailable. Fails only on an unusable URL.
    pub fn connect_lazy(settings: &PostgresSettings) -> Result<Self, SetupError> {
        let options: PgConnectOptions = settings
            .url
            .parse()
            .map_err(|_| SetupError::InvalidSetting("unparsable PostgreSQL URL".to_owned()))?;
        let options = match &settings.password {
            Some(password) => options.password(password),
            None => options,
        };
        let statement_timeout_ms = settings.statement_timeout.as_millis().max(1).to_string();
        let options = options
            .application_name("proxypool-quota")
            .options([("statement_timeout", statement_timeout_ms)]);
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            // Ping only connections that sat idle: a per-acquire ping would cost a round trip
            // on every decision, and a busy connection that broke is retried anyway.
            .test_before_acquire(false)
            .before_acquire(|connection, metadata| {
                Box::pin(async move {
                    if metadata.idle_for > PING_IF_IDLE_FOR {
                        sqlx::Connection::ping(connection).await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy_with(options);
        Ok(Self::from_pool(pool, settings.decision_timeout))
    }

    /// A quota over an existing pool; every decision is bounded by `decision_timeout`.
    pub fn from_pool(pool: PgPool, decision_timeout: Duration) -> Self {
        PostgresQuota {
            pool,
            decision_timeout,
        }
    }

    /// The pool (for health checks and shutdown).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

// Its `QuotaPort` is the one every SQL backend shares (`sql_port.rs`).
impl SqlBackend for PostgresQuota {
    type Db = sqlx::Postgres;

    const STATEMENTS: Statements = Statements {
        store: Store::Postgres,
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

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn decision_timeout(&self) -> Duration {
        self.decision_timeout
    }
}

// Its `StoreLedger` is the one every SQL backend shares (`sql_ledger.rs`).
#[async_trait]
impl StoreLedger for PostgresQuota {
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
