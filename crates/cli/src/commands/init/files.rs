//! Putting `init`'s files in place all or nothing, none readable by other users.
//!
//! Every file is first written to a staging directory inside DIR (mode 0700, each file
//! created new with mode 0600), the configurations are loaded from there as `check-config`
//! would, and only then is each file renamed into place. So a refusal or a failure leaves
//! DIR as it was (a DIR this run created is removed again), and a replaced file is
//! swapped whole, never left half written or with the mode of the file it replaced.
//!
//! A DIR every user may write to is refused: another user could replace the
//! configuration or plant a file where a secret goes.

use crate::failure::Failure;
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every file written: the owner reads and writes.
pub(super) const FILE_MODE: u32 = 0o600;
/// Mode of every directory created: the owner's only.
pub(super) const DIR_MODE: u32 = 0o700;

/// One file to write, at `relative` (a path inside DIR).
pub(super) struct Planned {
    pub relative: &'static str,
    pub text: String,
}

/// Checks DIR before anything is written: a directory (or nothing yet, to be created)
/// that not every user may write to.
pub(super) fn check_dir(dir: &Path) -> Result<(), Failure> {
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Failure::config(format!("{}: {e}", dir.display()))),
    };
    if !metadata.is_dir() {
        return Err(Failure::config(format!(
            "{}: not a directory",
            dir.display()
        )));
    }
    if metadata.permissions().mode() & 0o002 != 0 {
        return Err(Failure::config(format!(
            "{}: every user may write to this directory, so another could replace the \
             configuration or a secret file; choose a directory of your own (it is created \
             if missing, e.g. {})",
            dir.display(),
            dir.join("proxypool").display()
        )));
    }
    Ok(())
}

/// The planned files that exist already, and a refusal when one cannot be replaced even
/// with `--force` (a directory in its place).
pub(super) fn existing(dir: &Path, planned: &[Planned]) -> Result<Vec<PathBuf>, Failure> {
    let secrets = dir.join("secrets");
    if let Ok(metadata) = std::fs::symlink_metadata(&secrets)
        && !metadata.is_dir()
    {
        return Err(Failure::config(format!(
            "{}: not a directory, and the secret files go there",
            secrets.display()
        )));
    }
    let mut found = Vec::new();
    for file in planned {
        let path = dir.join(file.relative);
        if let Ok(metadata) = std::fs::symlink_metadata(&path) {
            if metadata.is_dir() {
                return Err(Failure::config(format!(
                    "{}: a directory is where this file goes",
                    path.display()
                )));
            }
            found.push(path);
        }
    }
    Ok(found)
}

/// The staging directory; removed with whatever it still holds when dropped.
pub(super) struct Staging {
    pub path: PathBuf,
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Creates DIR if it is missing (mode 0700); whether it did.
pub(super) fn create_dir(dir: &Path) -> Result<bool, Failure> {
    if dir.exists() {
        return Ok(false);
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", parent.display())))?;
    }
    make_dir(dir)?;
    // Between the check above and here another user may have made DIR: check it again.
    check_dir(dir)?;
    Ok(true)
}

/// Writes every planned file under a new staging directory inside `dir`.
pub(super) fn stage(dir: &Path, planned: &[Planned]) -> Result<Staging, Failure> {
    let path = dir.join(format!(".proxypool-init-{}", crate::random::token(12)));
    make_dir(&path)?;
    let staging = Staging { path };
    for file in planned {
        let target = staging.path.join(file.relative);
        if let Some(parent) = target.parent()
            && !parent.exists()
        {
            make_dir(parent)?;
        }
        write_new(&target, &file.text)?;
    }
    Ok(staging)
}

/// Renames every staged file into place (replacing what `--force` allowed).
pub(super) fn install(dir: &Path, staging: &Staging, planned: &[Planned]) -> Result<(), Failure> {
    for file in planned {
        let target = dir.join(file.relative);
        if let Some(parent) = target.parent()
            && !parent.exists()
        {
            make_dir(parent)?;
        }
        std::fs::rename(staging.path.join(file.relative), &target)
            .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", target.display())))?;
    }
    Ok(())
}

fn make_dir(path: &Path) -> Result<(), Failure> {
    DirBuilder::new()
        .mode(DIR_MODE)
        .create(path)
        .and_then(|()| std::fs::set_permissions(path, PermissionsExt::from_mode(DIR_MODE)))
        .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", path.display())))
}

/// Creates `path` (never an existing file, nor through a link) with mode 0600 whatever
/// the umask, and writes `text`.
fn write_new(path: &Path, text: &str) -> Result<(), Failure> {
    let failed =
        |e: std::io::Error| Failure::runtime(format!("cannot write {}: {e}", path.display()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(failed)?;
    file.set_permissions(PermissionsExt::from_mode(FILE_MODE))
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}
