//! The shipped systemd units (`deploy/systemd/`) as systemd reads them: each one passes
//! `systemd-analyze verify` without a single complaint (an unknown key or a bad value is
//! only a warning to systemd, so any output fails the test), with `ExecStart` pointed at
//! the built binary, and runs the subcommand the unit names. A unit with a typo fails the
//! same check, so the check can fail.
//!
//! Without `systemd-analyze` the test skips loudly; under `CI=true` it fails
//! (`scripts/test.sh` installs systemd).

use crate::common::{BIN, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

const UNITS: [(&str, &str); 2] = [
    ("proxypool-controller.service", "controller"),
    ("proxypool-gateway.service", "gateway"),
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
    for (name, subcommand) in UNITS {
        let text = shipped(name);
        let exec = format!("ExecStart=/usr/bin/proxypool {subcommand}\n");
        assert!(text.contains(&exec), "{name} runs `proxypool {subcommand}`");
        for key in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "User=proxypool",
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
