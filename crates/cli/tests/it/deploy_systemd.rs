//! The shipped systemd units (`deploy/systemd/`) as systemd reads them: each one passes
//! `systemd-analyze verify` without a single complaint (an unknown key or a bad value is
//! only a warning to systemd, so any output fails the test), with `ExecStart` pointed at
//! the built binary, and runs the subcommand the unit names. A unit with a typo fails the
//! same check, so the check can fail.
//!
//! The two services run as accounts of their own: `proxypool-controller.service` as
//! `proxypool`, `proxypool-gateway.service` as `proxypool-gateway`. `systemd-sysusers` makes
//! both from the shipped `proxypool.sysusers` in a scratch root: the gateway's account is
//! not in the controller's group (so it cannot read `/etc/proxypool/secrets/`), and the
//! controller's is in the gateway's (it checks the gateway's worker token).
//!
//! Without `systemd-analyze` the test skips loudly; under `CI=true` it fails
//! (`scripts/test.sh` installs systemd).

use crate::common::{BIN, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

/// (unit, the subcommand it runs, the account it runs as)
const UNITS: [(&str, &str, &str); 2] = [
    ("proxypool-controller.service", "controller", "proxypool"),
    ("proxypool-gateway.service", "gateway", "proxypool-gateway"),
];

fn shipped(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/systemd")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `systemd-analyze verify` of `unit`: its complaints (empty = none), or `None` when
/// systemd-analyze is not installed.
fn complaints(unit: &Path) -> Option<String> {
    let output = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(unit)
        .output()
        .ok()?;
    let mut said = String::from_utf8_lossy(&output.stderr).into_owned();
    said.push_str(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() && said.is_empty() {
        said = format!("exit {:?}", output.status.code());
    }
    Some(said)
}

fn systemd_analyze_or_skip() -> bool {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    assert!(
        !proxypool_testkit::running_in_ci(),
        "CI=true and systemd-analyze is not installed (scripts/test.sh installs systemd)"
    );
    eprintln!("SKIPPED: systemd-analyze is not installed; the units were NOT checked");
    false
}

#[test]
fn the_shipped_units_pass_systemd_analyze_verify_and_name_real_subcommands() {
    if !systemd_analyze_or_skip() {
        return;
    }
    let scratch = Scratch::new("systemd");
    for (name, subcommand, account) in UNITS {
        let text = shipped(name);
        let exec = format!("ExecStart=/usr/bin/proxypool {subcommand}\n");
        assert!(text.contains(&exec), "{name} runs `proxypool {subcommand}`");
        let user = format!("\nUser={account}\n");
        let group = format!("\nGroup={account}\n");
        for key in [
            user.as_str(),
            group.as_str(),
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "Restart=on-failure",
            "Environment=PROXYPOOL_CONFIG=/etc/proxypool/",
        ] {
            assert!(text.contains(key), "{name} has {key}");
        }
        let unit = scratch.write(name, &text.replace("/usr/bin/proxypool", BIN));
        let said = complaints(&unit).unwrap();
        assert!(said.trim().is_empty(), "{name}: {said}");
        // The subcommand exists: asked for help, the binary knows it.
        let help = Command::new(BIN)
            .args([subcommand, "--help"])
            .output()
            .unwrap();
        assert!(help.status.success(), "proxypool {subcommand} --help");

        // The same unit with a typo in a key and a bad value is caught.
        let broken = text
            .replace("/usr/bin/proxypool", BIN)
            .replace("NoNewPrivileges=yes", "NoNewPrivilege=yes")
            .replace("Restart=on-failure", "Restart=sometimes");
        let unit = scratch.write(&format!("broken-{name}"), &broken);
        let said = complaints(&unit).unwrap();
        assert!(said.contains("NoNewPrivilege"), "{name}: {said}");
        assert!(said.contains("sometimes"), "{name}: {said}");
    }
}

/// The accounts and groups `systemd-sysusers` makes in a scratch root: (passwd lines, group
/// lines), or `None` without systemd-sysusers.
fn sysusers(scratch: &Scratch, config: &str) -> Option<(Vec<String>, Vec<String>)> {
    let root = scratch.file("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let file = scratch.write("proxypool.conf", config);
    let output = Command::new("systemd-sysusers")
        .arg(format!("--root={}", root.display()))
        .arg(&file)
        .output()
        .ok()?;
    assert!(
        output.status.success(),
        "systemd-sysusers: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = |name: &str| {
        std::fs::read_to_string(root.join("etc").join(name))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    Some((lines("passwd"), lines("group")))
}

/// The members of `group` in /etc/group lines.
fn members<'a>(groups: &'a [String], group: &str) -> Vec<&'a str> {
    let line = groups
        .iter()
        .find(|line| line.starts_with(&format!("{group}:")))
        .unwrap_or_else(|| panic!("no group {group}: {groups:?}"));
    line.rsplit(':')
        .next()
        .unwrap()
        .split(',')
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn the_controller_and_the_gateway_run_as_accounts_of_their_own() {
    if !systemd_analyze_or_skip() {
        return;
    }
    let (controller, gateway) = (UNITS[0].2, UNITS[1].2);
    assert_ne!(controller, gateway);
    let scratch = Scratch::new("sysusers");
    let (passwd, groups) = sysusers(&scratch, &shipped("proxypool.sysusers"))
        .expect("systemd-sysusers comes with systemd-analyze");
    let account = |name: &str| -> Vec<String> {
        passwd
            .iter()
            .find(|line| line.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no account {name}: {passwd:?}"))
            .split(':')
            .map(str::to_owned)
            .collect()
    };
    let (c, g) = (account(controller), account(gateway));
    assert_ne!(c[2], g[2], "one uid for both");
    assert_ne!(c[3], g[3], "one primary group for both");
    assert_eq!(
        c[5], "/var/lib/proxypool",
        "the controller's home is its state"
    );
    for fields in [&c, &g] {
        assert!(fields[2].parse::<u32>().unwrap() < 1000, "{fields:?}");
        assert_eq!(fields[6], "/usr/sbin/nologin", "{fields:?}");
    }
    // The gateway cannot read the controller's secrets (group proxypool); the controller
    // reads the gateway's worker token (group proxypool-gateway).
    assert!(
        !members(&groups, controller).contains(&gateway),
        "{groups:?}"
    );
    assert_eq!(members(&groups, gateway), [controller], "{groups:?}");
}
