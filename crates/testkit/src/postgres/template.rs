//! The initdb'd cluster every private PostgreSQL server of this process starts from.
//!
//! initdb is the slow part of starting PostgreSQL (it builds three databases), so it runs
//! once per test process into a template directory; each server copies that directory,
//! which is several times faster. The template lives as long as the process: it sits in a
//! `static`, which is never dropped, so a directory-only janitor removes it when the process
//! exits (see `process`), however it exits.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::binaries::PostgresBinaries;
use crate::error::{Result, TestkitError};
use crate::privilege::{ServerUser, chown_tree};
use crate::process::Janitor;
use crate::scratch::{ScratchDir, scratch_base};

/// The superuser every private cluster is created with, whatever account runs it.
pub(crate) const SUPERUSER: &str = "postgres";

#[derive(Debug)]
struct Template {
    data_dir: PathBuf,
    // Never dropped (the template lives in a static); the janitor cleans up at exit.
    _dir: ScratchDir,
    _janitor: Janitor,
}

static TEMPLATE: OnceLock<std::result::Result<Template, String>> = OnceLock::new();

fn build(binaries: &PostgresBinaries, user: Option<&ServerUser>) -> Result<Template> {
    let dir = ScratchDir::create(&scratch_base(user), "pg-template")?;
    // Arm the janitor before the slow part, so even a kill during initdb cleans up.
    let janitor = Janitor::arm("KILL", None, Some(dir.path()))?;
    chown_tree(dir.path(), user)?;
    let data_dir = dir.path().join("data");
    let mut initdb = Command::new(&binaries.initdb);
    initdb
        .arg("--pgdata")
        .arg(&data_dir)
        .args([
            "--auth=trust",
            "--username",
            SUPERUSER,
            "--encoding=UTF8",
            "--locale=C",
            // The template is copied before use and thrown away after: durability is moot.
            "--no-sync",
            // 1 MiB WAL segments instead of 16: the initial segment is copied for every
            // server, and it was 40% of the template's bytes.
            "--wal-segsize=1",
        ])
        .current_dir(dir.path())
        .env("LC_ALL", "C");
    if let Some(user) = user {
        initdb.uid(user.uid).gid(user.gid);
    }
    let output = initdb.output().map_err(|error| {
        TestkitError::io(format!("running {}", binaries.initdb.display()), error)
    })?;
    if !output.status.success() {
        let account = user.map_or_else(String::new, |user| format!(" as {}", user.name));
        return Err(TestkitError::CommandFailed {
            program: format!("{}{account}", binaries.initdb.display()),
            status: output.status.to_string(),
            output: format!(
                "{}\n{}",
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(Template {
        data_dir,
        _dir: dir,
        _janitor: janitor,
    })
}

/// The template's data directory, created on first use.
pub(crate) fn template_data_dir(
    binaries: &PostgresBinaries,
    user: Option<&ServerUser>,
) -> Result<&'static Path> {
    let template =
        TEMPLATE.get_or_init(|| build(binaries, user).map_err(|error| error.to_string()));
    match template {
        Ok(template) => Ok(&template.data_dir),
        Err(reason) => Err(TestkitError::CommandFailed {
            program: "initdb (template cluster, cached for this test process)".to_owned(),
            status: "failed".to_owned(),
            output: reason.clone(),
        }),
    }
}

/// Copies a directory tree, keeping permissions (PostgreSQL insists on a 0700/0750 data
/// directory) and symlinks.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if file_type.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    fs::set_permissions(to, fs::metadata(from)?.permissions())
}

/// Gives a server its own copy of the template at `data_dir`, owned by `user`.
pub(crate) fn clone_into(
    binaries: &PostgresBinaries,
    user: Option<&ServerUser>,
    data_dir: &Path,
) -> Result<()> {
    let template = template_data_dir(binaries, user)?;
    copy_tree(template, data_dir).map_err(|error| {
        TestkitError::io(
            format!(
                "copying template {} to {}",
                template.display(),
                data_dir.display()
            ),
            error,
        )
    })?;
    chown_tree(data_dir, user)
}
