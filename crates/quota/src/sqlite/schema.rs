//! The embedded SQLite migrations, applied with sqlx's migrator.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::SqlitePool;

use crate::error::SetupError;

/// (version, description, SQL) of every file in `migrations/sqlite`, in order. A unit test
/// checks that the directory and this list agree.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
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
];

fn migrator() -> Migrator {
    Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// Applies the quota migrations to the SQLite database behind `pool` (idempotent).
/// [`super::SqliteQuota::open`] calls it; the CLI's `migrate` may too.
pub async fn migrate(pool: &SqlitePool) -> Result<(), SetupError> {
    migrator().run(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len());
        for (file, (version, _, sql)) in files.iter().zip(MIGRATIONS) {
            assert!(file.starts_with(&format!("{version:04}_")), "{file}");
            assert_eq!(
                &std::fs::read_to_string(dir.join(file)).unwrap(),
                sql,
                "{file}"
            );
        }
    }
}
