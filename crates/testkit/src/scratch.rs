//! Private scratch directories, removed on drop.
//!
//! A few lines instead of the `tempfile` crate: the testkit only needs "a fresh directory
//! nobody else uses", and every test crate links this one.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Result, TestkitError};
use crate::privilege::{ServerUser, reachable_by_others};

/// Puts the scratch directories somewhere else than the system temp dir.
pub(crate) const SCRATCH_BASE_ENV: &str = "PROXYPOOL_TEST_TMPDIR";

/// Where scratch directories go: `PROXYPOOL_TEST_TMPDIR`, else `/dev/shm` when it is a
/// roomy tmpfs, else the system temp dir.
///
/// Why `/dev/shm`: a PostgreSQL cluster is ~1000 files, and creating them on a busy disk
/// took ~0.85 s per server where tmpfs takes ~0.03 s (measured on the CI-sized machine).
/// Containers often give `/dev/shm` only 64 MiB, hence the free-space check.
///
/// A server that runs as another account (PostgreSQL under root) must be able to reach
/// its directory, so a private `TMPDIR` such as `/root/tmp` is replaced by `/tmp` then.
pub(crate) fn scratch_base(for_user: Option<&ServerUser>) -> PathBuf {
    if let Some(explicit) = std::env::var_os(SCRATCH_BASE_ENV) {
        return PathBuf::from(explicit);
    }
    if let Some(shm) = roomy_shared_memory_dir() {
        return shm.to_path_buf();
    }
    let base = std::env::temp_dir();
    if for_user.is_some() && !reachable_by_others(&base) {
        return PathBuf::from("/tmp");
    }
    base
}

/// Free space `/dev/shm` must have before the testkit puts clusters there.
const MIN_SHM_AVAILABLE_KIB: u64 = 1024 * 1024;

/// `/dev/shm` if it is a tmpfs with at least [`MIN_SHM_AVAILABLE_KIB`] free that we can
/// write to; decided once per process.
fn roomy_shared_memory_dir() -> Option<&'static Path> {
    static SHM: OnceLock<Option<&'static Path>> = OnceLock::new();
    *SHM.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
        let is_tmpfs = mounts.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(1) == Some(&"/dev/shm") && fields.get(2) == Some(&"tmpfs")
        });
        if !is_tmpfs {
            return None;
        }
        // statvfs needs libc (and unsafe); df reports the same number.
        let df = Command::new("df").args(["-Pk", "/dev/shm"]).output().ok()?;
        let available_kib: u64 = String::from_utf8_lossy(&df.stdout)
            .lines()
            .nth(1)?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        if available_kib < MIN_SHM_AVAILABLE_KIB || !reachable_by_others(shm) {
            return None;
        }
        let probe = ScratchDir::create(shm, "probe").ok()?;
        drop(probe);
        Some(shm)
    })
}

/// Distinguishes directories created by one process; the pid distinguishes processes.
static NEXT_SCRATCH_ID: AtomicU64 = AtomicU64::new(0);

/// A directory that belongs to one guard and disappears with it.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates `<base>/proxypool-testkit-<kind>-<pid>-<n>-<nanos>`.
    ///
    /// `create_dir` fails on an existing path, so two creators can never share a directory
    /// even if the name were to collide; on collision we simply try the next name.
    pub(crate) fn create(base: &Path, kind: &str) -> Result<Self> {
        for _ in 0..100 {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|elapsed| elapsed.subsec_nanos())
                .unwrap_or(0);
            let path = base.join(format!(
                "proxypool-testkit-{kind}-{}-{}-{nanos}",
                std::process::id(),
                NEXT_SCRATCH_ID.fetch_add(1, Ordering::Relaxed),
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(TestkitError::io(
                        format!("creating scratch directory {}", path.display()),
                        error,
                    ));
                }
            }
        }
        Err(TestkitError::io(
            format!("creating a scratch directory under {}", base.display()),
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                "every candidate name was taken",
            ),
        ))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory in the temp dir is not worth a panic in Drop.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_dirs_are_distinct_and_removed_on_drop() {
        let base = std::env::temp_dir();
        let first = ScratchDir::create(&base, "unit").unwrap();
        let second = ScratchDir::create(&base, "unit").unwrap();
        assert_ne!(first.path(), second.path());
        let first_path = first.path().to_path_buf();
        std::fs::write(first_path.join("file"), b"x").unwrap();
        drop(first);
        assert!(!first_path.exists());
        assert!(second.path().is_dir());
    }
}
