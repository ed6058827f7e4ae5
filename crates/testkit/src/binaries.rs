//! Finding the server binaries.
//!
//! redis-server comes from `PATH` (or `PROXYPOOL_TEST_REDIS_SERVER`), redis-cli (the cluster
//! guard's) from beside it, or `PATH` (or `PROXYPOOL_TEST_REDIS_CLI`). PostgreSQL is awkward
//! on Debian/Ubuntu: the packages put `initdb` and `postgres` in
//! `/usr/lib/postgresql/<major>/bin`, which is not on `PATH`, so we also look there (newest
//! major first) and in the other usual places. `initdb` and `postgres` must come from the
//! same directory: a template made by one major version does not start under another.

use std::env;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, TestkitError};

/// Names a redis-server binary explicitly (skips the `PATH` search).
pub(crate) const REDIS_SERVER_ENV: &str = "PROXYPOOL_TEST_REDIS_SERVER";
/// Names a redis-cli binary explicitly (skips the search); the cluster guard runs it.
pub(crate) const REDIS_CLI_ENV: &str = "PROXYPOOL_TEST_REDIS_CLI";
/// Names the PostgreSQL bin directory explicitly (skips the search).
pub(crate) const POSTGRES_BIN_DIR_ENV: &str = "PROXYPOOL_TEST_PG_BIN_DIR";

/// Fixed places redis-server lands when installed by a package manager but `PATH` is thin
/// (e.g. cron-like environments without `/usr/sbin`).
const REDIS_FALLBACK_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
];

/// Parents of versioned PostgreSQL bin directories (Debian/Ubuntu, RHEL's PGDG layout).
const POSTGRES_VERSIONED_ROOTS: &[(&str, &str)] =
    &[("/usr/lib/postgresql", "bin"), ("/usr", "bin")];

/// Unversioned PostgreSQL bin directories (source builds, some distributions).
const POSTGRES_FIXED_DIRS: &[&str] = &["/usr/local/pgsql/bin", "/usr/lib/postgresql/bin"];

/// The PostgreSQL programs the testkit runs, all from one directory.
#[derive(Debug, Clone)]
pub(crate) struct PostgresBinaries {
    pub(crate) initdb: PathBuf,
    pub(crate) postgres: PathBuf,
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Locates redis-server.
pub(crate) fn redis_server() -> Result<PathBuf> {
    if let Some(explicit) = env::var_os(REDIS_SERVER_ENV) {
        let explicit = PathBuf::from(explicit);
        return if is_executable(&explicit) {
            Ok(explicit)
        } else {
            Err(TestkitError::BinaryNotFound {
                binary: "redis-server",
                searched: format!("{REDIS_SERVER_ENV}={}", explicit.display()),
            })
        };
    }
    find_in_path("redis-server")
        .or_else(|| {
            REDIS_FALLBACK_DIRS
                .iter()
                .map(|dir| Path::new(dir).join("redis-server"))
                .find(|candidate| is_executable(candidate))
        })
        .ok_or_else(|| TestkitError::BinaryNotFound {
            binary: "redis-server",
            searched: format!("PATH, {}", REDIS_FALLBACK_DIRS.join(", ")),
        })
}

/// Locates redis-cli: next to the redis-server in use first (the same installation, so the
/// same version), then `PATH` and the usual places.
pub(crate) fn redis_cli() -> Result<PathBuf> {
    if let Some(explicit) = env::var_os(REDIS_CLI_ENV) {
        let explicit = PathBuf::from(explicit);
        return if is_executable(&explicit) {
            Ok(explicit)
        } else {
            Err(TestkitError::BinaryNotFound {
                binary: "redis-cli",
                searched: format!("{REDIS_CLI_ENV}={}", explicit.display()),
            })
        };
    }
    let beside_server = redis_server()
        .ok()
        .and_then(|server| Some(server.parent()?.join("redis-cli")))
        .filter(|candidate| is_executable(candidate));
    beside_server
        .or_else(|| find_in_path("redis-cli"))
        .or_else(|| {
            REDIS_FALLBACK_DIRS
                .iter()
                .map(|dir| Path::new(dir).join("redis-cli"))
                .find(|candidate| is_executable(candidate))
        })
        .ok_or_else(|| TestkitError::BinaryNotFound {
            binary: "redis-cli",
            searched: format!(
                "beside redis-server, PATH, {}",
                REDIS_FALLBACK_DIRS.join(", ")
            ),
        })
}

/// A bin directory counts only if it has both programs.
fn postgres_in(dir: &Path) -> Option<PostgresBinaries> {
    let initdb = dir.join("initdb");
    let postgres = dir.join("postgres");
    (is_executable(&initdb) && is_executable(&postgres))
        .then_some(PostgresBinaries { initdb, postgres })
}

/// Sorts version-like directory names ("9.6", "15", "pgsql-16") numerically, newest first.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .filter_map(|part| part.parse().ok())
        .collect()
}

fn versioned_bin_dirs() -> Vec<PathBuf> {
    let mut found: Vec<(Vec<u64>, PathBuf)> = Vec::new();
    for (root, bin) in POSTGRES_VERSIONED_ROOTS {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Under /usr only the PGDG layout (/usr/pgsql-16) is ours to look at.
            if *root == "/usr" && !name.starts_with("pgsql") {
                continue;
            }
            let key = version_key(&name);
            if key.is_empty() {
                continue;
            }
            found.push((key, entry.path().join(bin)));
        }
    }
    found.sort_by(|left, right| right.0.cmp(&left.0));
    found.into_iter().map(|(_, dir)| dir).collect()
}

/// Locates `initdb` and `postgres` in one directory.
pub(crate) fn postgres() -> Result<PostgresBinaries> {
    if let Some(explicit) = env::var_os(POSTGRES_BIN_DIR_ENV) {
        let explicit = PathBuf::from(explicit);
        return postgres_in(&explicit).ok_or_else(|| TestkitError::BinaryNotFound {
            binary: "initdb/postgres",
            searched: format!("{POSTGRES_BIN_DIR_ENV}={}", explicit.display()),
        });
    }
    // PATH first, resolving symlinks: /usr/local/bin/postgres -> /usr/lib/postgresql/15/bin
    // must find the initdb of the same installation, not whichever initdb PATH lists first.
    let from_path = find_in_path("postgres")
        .and_then(|postgres| postgres.canonicalize().ok())
        .and_then(|postgres| postgres.parent().and_then(postgres_in))
        .or_else(|| {
            let dir = find_in_path("initdb")?.canonicalize().ok()?;
            postgres_in(dir.parent()?)
        });
    if let Some(binaries) = from_path {
        return Ok(binaries);
    }
    let fixed_dirs = POSTGRES_FIXED_DIRS.iter().map(PathBuf::from);
    versioned_bin_dirs()
        .into_iter()
        .chain(fixed_dirs)
        .find_map(|dir| postgres_in(&dir))
        .ok_or_else(|| TestkitError::BinaryNotFound {
            binary: "initdb/postgres",
            searched: format!(
                "PATH, /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin, {}",
                POSTGRES_FIXED_DIRS.join(", ")
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_numerically_not_lexically() {
        let mut names = vec!["9.6", "15", "10", "pgsql-16", "13"];
        names.sort_by_key(|name| std::cmp::Reverse(version_key(name)));
        assert_eq!(names, ["pgsql-16", "15", "13", "10", "9.6"]);
    }
}
