//! The embedded migrations of a SQL backend as one sqlx [`Migrator`]: each backend lists its
//! files (version, description, SQL) in order and builds its migrator from that list here.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// (version, description, SQL) of every migration file of one backend, in order.
pub(crate) type Migrations = &'static [(i64, &'static str, &'static str)];

/// A migrator that applies `migrations`, each a plain (not reversible) one.
pub(crate) fn migrator(migrations: Migrations) -> Migrator {
    Migrator::with_migrations(
        migrations
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

/// Asserts that `migrations` embeds exactly the files of `migrations/<dir>`, in order.
#[cfg(test)]
pub(crate) fn assert_embeds_every_file(dir: &str, migrations: Migrations) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dir);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), migrations.len());
    for (file, (version, _, sql)) in files.iter().zip(migrations) {
        assert!(file.starts_with(&format!("{version:04}_")), "{file}");
        assert_eq!(
            &std::fs::read_to_string(dir.join(file)).unwrap(),
            sql,
            "{file}"
        );
    }
}
