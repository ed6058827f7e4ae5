//! Running PostgreSQL when the tests run as root.
//!
//! `initdb` and `postgres` refuse to run as root, and CI runs the tests as root. So when we
//! are root we pick an unprivileged account (`PROXYPOOL_TEST_PG_USER`, else the packaged
//! `postgres` account, else `nobody`, else a `proxypool-test` account we create with
//! `useradd`), hand it the server's directories with `chown`, and start the programs with
//! `CommandExt::uid/gid` (std also drops the supplementary groups for us). Not being root,
//! we run everything as ourselves and none of this applies.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::error::{Result, TestkitError};

/// Names the account PostgreSQL runs as when the tests run as root.
pub(crate) const POSTGRES_USER_ENV: &str = "PROXYPOOL_TEST_PG_USER";

/// The account the testkit creates when no suitable one exists.
const CREATED_ACCOUNT: &str = "proxypool-test";

/// An account to run a server as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerUser {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Whether this process runs with effective uid 0.
///
/// `/proc/self` is owned by the process's effective uid, which answers the question
/// without `libc::geteuid` (and so without `unsafe`); `id -u` covers systems without /proc.
pub(crate) fn running_as_root() -> bool {
    static IS_ROOT: OnceLock<bool> = OnceLock::new();
    *IS_ROOT.get_or_init(|| match std::fs::metadata("/proc/self") {
        Ok(metadata) => metadata.uid() == 0,
        Err(_) => Command::new("id")
            .arg("-u")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
            .unwrap_or(false),
    })
}

/// Finds `name` in /etc/passwd (then `id`, for NSS-only accounts).
fn lookup_user(name: &str) -> Option<ServerUser> {
    let from_passwd = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                if fields.len() < 4 || fields[0] != name {
                    return None;
                }
                Some(ServerUser {
                    name: name.to_owned(),
                    uid: fields[2].parse().ok()?,
                    gid: fields[3].parse().ok()?,
                })
            })
        });
    from_passwd.or_else(|| {
        let id_of = |flag: &str| -> Option<u32> {
            let output = Command::new("id").args([flag, name]).output().ok()?;
            if !output.status.success() {
                return None;
            }
            String::from_utf8_lossy(&output.stdout).trim().parse().ok()
        };
        Some(ServerUser {
            name: name.to_owned(),
            uid: id_of("-u")?,
            gid: id_of("-g")?,
        })
    })
}

fn create_account() -> Result<ServerUser> {
    let output = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--user-group",
            CREATED_ACCOUNT,
        ])
        .output()
        .map_err(|error| TestkitError::io("running useradd", error))?;
    // Exit status 9 = "already exists": another test process won the race, which is fine.
    if !output.status.success() && output.status.code() != Some(9) {
        return Err(TestkitError::CommandFailed {
            program: "useradd".to_owned(),
            status: output.status.to_string(),
            output: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    lookup_user(CREATED_ACCOUNT).ok_or_else(|| TestkitError::CommandFailed {
        program: "useradd".to_owned(),
        status: output.status.to_string(),
        output: format!("{CREATED_ACCOUNT} still missing after useradd"),
    })
}

/// The account PostgreSQL must run as: `None` when we are not root (run as ourselves).
pub(crate) fn postgres_server_user() -> Result<Option<ServerUser>> {
    static USER: OnceLock<Result<Option<ServerUser>, String>> = OnceLock::new();
    let chosen = USER.get_or_init(|| {
        if !running_as_root() {
            return Ok(None);
        }
        if let Ok(explicit) = std::env::var(POSTGRES_USER_ENV) {
            return lookup_user(&explicit)
                .map(Some)
                .ok_or_else(|| format!("{POSTGRES_USER_ENV}={explicit}: no such account"));
        }
        ["postgres", "nobody"]
            .iter()
            .filter_map(|name| lookup_user(name))
            .find(|user| user.uid != 0)
            .map_or_else(create_account, Ok)
            .map(Some)
            .map_err(|error| error.to_string())
    });
    chosen
        .clone()
        .map_err(|reason| TestkitError::CommandFailed {
            program: "choosing an unprivileged account for PostgreSQL".to_owned(),
            status: "no account".to_owned(),
            output: reason,
        })
}

/// Gives `path` and everything below it to `user` (no-op when `user` is `None`).
pub(crate) fn chown_tree(path: &Path, user: Option<&ServerUser>) -> Result<()> {
    let Some(user) = user else {
        return Ok(());
    };
    let chown = |target: &Path| {
        std::os::unix::fs::lchown(target, Some(user.uid), Some(user.gid)).map_err(|error| {
            TestkitError::io(
                format!("chown {} to {}", target.display(), user.name),
                error,
            )
        })
    };
    chown(path)?;
    if path.is_dir() && !path.is_symlink() {
        let entries = std::fs::read_dir(path)
            .map_err(|error| TestkitError::io(format!("reading {}", path.display()), error))?;
        for entry in entries {
            let entry = entry
                .map_err(|error| TestkitError::io(format!("reading {}", path.display()), error))?;
            chown_tree(&entry.path(), Some(user))?;
        }
    }
    Ok(())
}

/// Whether an unprivileged account can reach into `dir`: every ancestor must be
/// searchable by "others" (the server account is neither the owner nor in the group).
pub(crate) fn reachable_by_others(dir: &Path) -> bool {
    dir.ancestors().all(|ancestor| {
        ancestor
            .metadata()
            .map(|metadata| metadata.mode() & 0o001 != 0)
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_in_passwd() {
        let root = lookup_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(lookup_user("no-such-account-proxypool").is_none());
    }
}
