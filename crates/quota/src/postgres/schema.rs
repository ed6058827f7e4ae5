//! Schema management for PostgreSQL: the embedded migrations and the least-privilege role.
//!
//! Both run with an owner/admin connection (the CLI's `proxypool migrate`), never with the
//! quota role. Migrations are compiled into the binary (`include_str!`) and applied with
//! sqlx's migrator, whose bookkeeping table lives in our own schema so it cannot collide
//! with another component's migrations in the same database.

use std::time::Duration;

use sqlx::AssertSqlSafe;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::error::SetupError;
use crate::sql_migrations::{self, Migrations};

/// The schema holding the quota's tables (and the migrator's bookkeeping).
pub const SCHEMA: &str = "proxypool_quota";

/// The migrator's table, inside [`SCHEMA`].
const MIGRATIONS_TABLE: &str = "proxypool_quota._sqlx_migrations";

/// (version, description, SQL) of every file in `migrations/postgres`, in order. A unit test
/// checks that the directory and this list agree.
pub(crate) const MIGRATIONS: Migrations = &[
    (
        1,
        "quota buckets",
        include_str!("../../migrations/postgres/0001_quota_buckets.sql"),
    ),
    (
        2,
        "settled receipts",
        include_str!("../../migrations/postgres/0002_settled_receipts.sql"),
    ),
    (
        3,
        "store ledger",
        include_str!("../../migrations/postgres/0003_store_ledger.sql"),
    ),
    (
        4,
        "store ledger operator",
        include_str!("../../migrations/postgres/0004_store_ledger_operator.sql"),
    ),
];

/// How long [`migrate_url`] waits for a connection.
const ADMIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn migrator() -> Migrator {
    let mut migrator = sql_migrations::migrator(MIGRATIONS);
    migrator.create_schema(SCHEMA);
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
}

/// Applies the quota migrations (idempotent; concurrent callers wait on sqlx's advisory lock).
/// Needs a role that may create schemas and tables in the database.
pub async fn migrate(admin: &PgPool) -> Result<(), SetupError> {
    migrator().run(admin).await?;
    Ok(())
}

/// Connects to `url` with one connection, applies the migrations, and disconnects.
pub async fn migrate_url(url: &str, password: Option<&str>) -> Result<(), SetupError> {
    let admin = admin_pool(url, password)?;
    let outcome = migrate(&admin).await;
    admin.close().await;
    outcome
}

fn admin_pool(url: &str, password: Option<&str>) -> Result<PgPool, SetupError> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(|_| SetupError::InvalidSetting("unparsable PostgreSQL URL".to_owned()))?;
    let options = match password {
        Some(password) => options.password(password),
        None => options,
    };
    Ok(PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ADMIN_CONNECT_TIMEOUT)
        .connect_lazy_with(options.application_name("proxypool-quota-admin")))
}

/// Role names we accept: a plain lowercase identifier that is not reserved (`pg_`).
fn valid_role_name(role: &str) -> bool {
    let bytes = role.as_bytes();
    (1..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || *byte == b'_')
        && !role.starts_with("pg_")
}

/// Creates (or re-asserts) `role` as the quota's least-privilege login role, in the
/// database `admin` is connected to:
///
/// - `LOGIN`, and nothing else: no superuser, createdb, createrole, replication, bypassrls,
///   no inherited privileges;
/// - `CONNECT` on the database, `USAGE` on [`SCHEMA`] (no `CREATE`), and exactly
///   `SELECT, INSERT, UPDATE` on `proxypool_quota.quota_buckets` and
///   `proxypool_quota.store_ledger`: no `DELETE`, `TRUNCATE`, ownership, or access to the
///   migrator's table. Its writes to the store ledger are held by the ledger's trigger to
///   what a controller does (migration 4): the operator's orders (`proxypool store
///   acknowledge`, `recover`) need the owner's role ([`super::operator::connect_operator`]).
///
/// `password` sets (or, for an existing role, replaces) the password; `None` leaves it as is
/// (a new role then logs in only through trust/peer/certificate authentication). Run
/// [`migrate`] first. Every statement runs in one transaction.
pub async fn create_quota_role(
    admin: &PgPool,
    role: &str,
    password: Option<&str>,
) -> Result<(), SetupError> {
    if !valid_role_name(role) {
        return Err(SetupError::InvalidSetting(
            "quota role name must match ^[a-z_][a-z0-9_]{0,62}$ and not start with pg_".to_owned(),
        ));
    }
    let mut transaction = admin.begin().await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
            .bind(role)
            .fetch_one(&mut *transaction)
            .await?;
    // The DDL text is built by the server's format(): %I quotes identifiers, %L literals,
    // so neither the role name nor the password is ever spliced by hand.
    let role_ddl: String = sqlx::query_scalar(
        "SELECT format('%s ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT \
         NOREPLICATION NOBYPASSRLS', $1::text, $2::text) \
         || CASE WHEN $3::text IS NULL THEN '' ELSE format(' PASSWORD %L', $3::text) END",
    )
    .bind(if exists { "ALTER" } else { "CREATE" })
    .bind(role)
    .bind(password)
    .fetch_one(&mut *transaction)
    .await?;
    let grants: Vec<String> = sqlx::query_scalar(
        "SELECT unnest(ARRAY[
            format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), $1::text),
            format('REVOKE ALL ON SCHEMA proxypool_quota FROM %I', $1::text),
            format('GRANT USAGE ON SCHEMA proxypool_quota TO %I', $1::text),
            format('REVOKE ALL ON ALL TABLES IN SCHEMA proxypool_quota FROM %I', $1::text),
            format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA proxypool_quota FROM %I', $1::text),
            format('GRANT SELECT, INSERT, UPDATE ON proxypool_quota.quota_buckets TO %I',
                   $1::text),
            format('GRANT SELECT, INSERT, UPDATE ON proxypool_quota.store_ledger TO %I',
                   $1::text)
        ])",
    )
    .bind(role)
    .fetch_all(&mut *transaction)
    .await?;
    for statement in std::iter::once(role_ddl).chain(grants) {
        sqlx::query(AssertSqlSafe(statement))
            .execute(&mut *transaction)
            .await?;
    }
    transaction.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_are_plain_identifiers() {
        for good in ["proxypool_quota", "_q", "q1", &"q".repeat(63)] {
            assert!(valid_role_name(good), "{good}");
        }
        for bad in [
            "",
            "Quota",
            "1q",
            "q-q",
            "q q",
            "q\"",
            "pg_quota",
            &"q".repeat(64),
        ] {
            assert!(!valid_role_name(bad), "{bad}");
        }
    }

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        sql_migrations::assert_embeds_every_file("postgres", MIGRATIONS);
    }
}
