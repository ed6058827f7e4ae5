//! Private scratch directories, removed on drop: `tempfile` makes them, this module picks
//! where (`scratch_base`) and keeps them reachable by a server running as another account.

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tempfile::TempDir;

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

/// A directory that belongs to one guard and disappears with it.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    dir: TempDir,
}

impl ScratchDir {
    /// Creates `<base>/proxypool-testkit-<kind>-<random>` (created exclusively, so two
    /// creators never share a directory).
    ///
    /// Mode 0755 rather than tempfile's 0700: a server that runs as another account (see
    /// `privilege`) must reach the files the testkit puts there before it hands the tree
    /// over, as with a directory made by `mkdir`.
    pub(crate) fn create(base: &Path, kind: &str) -> Result<Self> {
        tempfile::Builder::new()
            .prefix(&format!("proxypool-testkit-{kind}-"))
            .permissions(Permissions::from_mode(0o755))
            .tempdir_in(base)
            .map(|dir| Self { dir })
            .map_err(|error| {
                TestkitError::io(
                    format!("creating a scratch directory under {}", base.display()),
                    error,
                )
            })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
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
