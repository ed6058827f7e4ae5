//! The embedded SQLite migrations, applied with sqlx's migrator.

use sqlx::sqlite::SqlitePool;

use crate::error::SetupError;
use crate::sql_migrations::{self, Migrations};

/// (version, description, SQL) of every file in `migrations/sqlite`, in order. A unit test
/// checks that the directory and this list agree.
pub(crate) const MIGRATIONS: Migrations = &[
    (
        1,
        "quota buckets",
        include_str!("../../migrations/sqlite/0001_quota_buckets.sql"),
    ),
    (
        2,
        "settled receipts",
        include_str!("../../migrations/sqlite/0002_settled_receipts.sql"),
    ),
    (
        3,
        "store ledger",
        include_str!("../../migrations/sqlite/0003_store_ledger.sql"),
    ),
];

/// Applies the quota migrations to the SQLite database behind `pool` (idempotent).
/// [`super::SqliteQuota::open`] calls it; the CLI's `migrate` may too.
pub async fn migrate(pool: &SqlitePool) -> Result<(), SetupError> {
    sql_migrations::migrator(MIGRATIONS).run(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        sql_migrations::assert_embeds_every_file("sqlite", MIGRATIONS);
    }
}
