//! The Debian package: `scripts/build-deb.sh` builds it from the release binary
//! (`PROXYPOOL_TEST_RELEASE_BINARY`, which `scripts/test.sh` sets to the
//! `target/dist/proxypool` it built; skipped with a banner when unset, failed under
//! `CI=true`), once per run, into the target directory.
//!
//! Without an engine: the control file (name, the workspace's version, dpkg's
//! architecture, a maintainer, Depends as `dpkg-shlibdeps` computes it and as the script
//! computes it without it), every file where it belongs, owned by root, with its mode, the
//! conffiles, maintainer scripts that parse, the very binary, units and sysusers file of
//! the tree, and the shipped configurations loading with `check-config` once their secrets
//! exist (refused, naming the file, while one is missing), the commented vendor included.
//!
//! With a Docker Engine (skipped with a banner otherwise, as the compose test is): the
//! package installed with `dpkg -i` on the Debian bookworm base of `deploy_compose` (no
//! systemd: it installs and says how to make the account) and on the `debian-host`
//! stand-in (systemd's tools, not running): the accounts made by `systemd-sysusers` (the
//! controller's `proxypool`, the gateway's `proxypool-gateway`), each secrets directory
//! given to its service's group, `systemd-analyze verify` clean on the installed units,
//! `proxypool --version`, `check-config` of each file as its service's user with throwaway
//! secrets (and refused a secret only root may read; the gateway's user refused the
//! controller's file, whose secrets it cannot read), an edited conffile kept by a
//! reinstall and by `dpkg -r`, and `dpkg -P` removing the conffiles, the statoverrides and
//! the services' state but not the accounts.

use crate::common::Scratch;
use crate::deploy_compose::{base_image, exec, log, must, stand_in};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

const CONFFILES: [&str; 2] = [
    "/etc/proxypool/proxypool.toml",
    "/etc/proxypool/gateway.toml",
];
/// The secret files the shipped configurations name, relative to /etc/proxypool, and the
/// group that reads each: the gateway's worker token is the gateway's (the controller's
/// account is in its group), the rest the controller's alone.
const SECRETS: [(&str, &str); 3] = [
    ("gateway-secrets/worker-token", "proxypool-gateway"),
    ("secrets/scraper-api-token", "proxypool"),
    ("secrets/scraper-gateway-password", "proxypool"),
];
/// (configuration file, the account of the service that reads it)
const SERVICES: [(&str, &str); 2] = [
    ("/etc/proxypool/proxypool.toml", "proxypool"),
    ("/etc/proxypool/gateway.toml", "proxypool-gateway"),
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `[workspace.package] version` of the root Cargo.toml (read as the script reads it:
/// the first `version = "..."` line of that table).
fn workspace_version() -> String {
    let manifest = String::from_utf8(read(&repo().join("Cargo.toml"))).unwrap();
    let table = manifest
        .split("\n[workspace.package]\n")
        .nth(1)
        .expect("Cargo.toml has [workspace.package]");
    let table = table.split("\n[").next().unwrap();
    let line = table
        .lines()
        .find(|line| line.starts_with("version"))
        .expect("[workspace.package] has a version");
    line.split('"').nth(1).unwrap().to_owned()
}

/// The package of this run and the release binary it was built from.
struct Package {
    deb: PathBuf,
    binary: PathBuf,
}

/// Builds the package once per run; `None` (skipped) without a release binary or dpkg-deb.
fn package() -> Option<&'static Package> {
    static PACKAGE: OnceLock<Option<Package>> = OnceLock::new();
    PACKAGE
        .get_or_init(|| {
            let Some(binary) = std::env::var_os("PROXYPOOL_TEST_RELEASE_BINARY") else {
                assert!(
                    !proxypool_testkit::running_in_ci(),
                    "CI=true and PROXYPOOL_TEST_RELEASE_BINARY is unset (scripts/test.sh sets it)"
                );
                eprintln!(
                    "\n*** SKIPPED: PROXYPOOL_TEST_RELEASE_BINARY is unset: the Debian package \
                     is built from the release binary (scripts/build-release.sh; \
                     scripts/test.sh sets it) ***\n"
                );
                return None;
            };
            if !crate::common::tool_or_skip("dpkg-deb") {
                return None;
            }
            let binary = std::fs::canonicalize(&binary).unwrap();
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("debian-package");
            let _ = std::fs::remove_dir_all(&out);
            let started = Instant::now();
            let (ok, said, err) = in_repo(
                "scripts/build-deb.sh",
                &[binary.to_str().unwrap(), out.to_str().unwrap()],
                &[],
            );
            assert!(ok, "scripts/build-deb.sh failed:\n{said}{err}");
            eprintln!("{said}(in {:.1}s)", started.elapsed().as_secs_f64());
            let deb = out.join(format!(
                "proxypool_{}_{}.deb",
                workspace_version(),
                must("dpkg", &["--print-architecture"], &[]).trim()
            ));
            assert!(deb.is_file(), "{said}");
            Some(Package { deb, binary })
        })
        .as_ref()
}

/// Runs the repository's `script` (a path in the repository) from the repository.
fn in_repo(script: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let program = repo().join(script);
    let mut command = Command::new(&program);
    command.args(args).current_dir(repo());
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `check-config FILE` with `binary`: (success, stdout, stderr).
fn check_config(binary: &Path, file: &Path) -> (bool, String, String) {
    exec(
        binary.to_str().unwrap(),
        &["check-config", file.to_str().unwrap()],
        &[],
    )
}

/// The shipped controller file with its commented vendor turned on.
fn with_vendor(text: &str) -> String {
    let start = text.find("# [[upstreams]]\n").expect("a commented vendor");
    let end = start
        + text[start..]
            .find("\n\n")
            .expect("the commented vendor ends");
    let vendor: String = text[start..end]
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("# ").unwrap_or(line)))
        .collect();
    format!("{}{vendor}{}", &text[..start], &text[end + 1..])
}

#[test]
fn the_package_has_a_proper_control_file_its_files_in_place_and_configurations_that_load() {
    let Some(package) = package() else {
        return;
    };
    let deb = package.deb.to_str().unwrap();
    let field = |name: &str| {
        must("dpkg-deb", &["--field", deb, name], &[])
            .trim()
            .to_owned()
    };

    // The control file.
    assert_eq!(field("Package"), "proxypool");
    assert_eq!(field("Version"), workspace_version());
    assert_eq!(
        field("Architecture"),
        must("dpkg", &["--print-architecture"], &[]).trim()
    );
    let maintainer = field("Maintainer");
    assert!(
        maintainer.contains(" <") && maintainer.ends_with('>'),
        "{maintainer}"
    );
    assert_eq!(field("Section"), "net");
    assert!(field("Description").starts_with("pool of short-lived vendor proxies"));
    assert!(field("Installed-Size").parse::<u64>().unwrap() > 10_000);
    // Depends from the binary's symbols: dpkg-shlibdeps (when installed) and the script's
    // own reading agree, and name the C library with a version.
    let depends = field("Depends");
    assert!(depends.starts_with("libc6 (>= 2."), "{depends}");
    let binary = package.binary.to_str().unwrap();
    let shlibdeps = Command::new("dpkg-shlibdeps")
        .arg("--version")
        .output()
        .is_ok();
    assert!(
        shlibdeps || !proxypool_testkit::running_in_ci(),
        "CI=true and dpkg-shlibdeps is not installed (scripts/test.sh installs dpkg-dev)"
    );
    for env in [vec![], vec![("PROXYPOOL_DEB_NO_SHLIBDEPS", "1")]] {
        let (ok, said, err) = in_repo("scripts/build-deb.sh", &["--depends", binary], &env);
        assert!(ok, "{err}");
        assert_eq!(said.trim(), depends, "computed with {env:?}");
    }

    // Every file where it belongs, owned by root, with its mode; nothing else.
    let listing = must("dpkg-deb", &["--contents", deb], &[]);
    let mut files = BTreeMap::new();
    for line in listing.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts[1], "root/root", "{line}");
        files.insert(parts[5].to_owned(), parts[0].to_owned());
    }
    let expected = [
        ("./usr/bin/proxypool", "-rwxr-xr-x"),
        (
            "./lib/systemd/system/proxypool-controller.service",
            "-rw-r--r--",
        ),
        (
            "./lib/systemd/system/proxypool-gateway.service",
            "-rw-r--r--",
        ),
        ("./usr/lib/sysusers.d/proxypool.conf", "-rw-r--r--"),
        ("./etc/proxypool/proxypool.toml", "-rw-r--r--"),
        ("./etc/proxypool/gateway.toml", "-rw-r--r--"),
        ("./etc/proxypool/secrets/", "drwxr-x---"),
        ("./etc/proxypool/gateway-secrets/", "drwxr-x---"),
        ("./usr/share/doc/proxypool/copyright", "-rw-r--r--"),
        ("./usr/share/doc/proxypool/changelog.gz", "-rw-r--r--"),
        ("./usr/share/doc/proxypool/README.md.gz", "-rw-r--r--"),
        ("./usr/share/doc/proxypool/vendors.md.gz", "-rw-r--r--"),
        (
            "./usr/share/doc/proxypool/examples/proxypool.toml",
            "-rw-r--r--",
        ),
        (
            "./usr/share/doc/proxypool/examples/gateway.toml",
            "-rw-r--r--",
        ),
        ("./usr/share/man/man1/proxypool.1.gz", "-rw-r--r--"),
        ("./usr/share/lintian/overrides/proxypool", "-rw-r--r--"),
    ];
    for (path, mode) in expected {
        assert_eq!(files.get(path).map(String::as_str), Some(mode), "{path}");
    }
    let regular: Vec<&String> = files
        .iter()
        .filter(|(_, mode)| !mode.starts_with('d'))
        .map(|(path, _)| path)
        .collect();
    let directories = expected.iter().filter(|(p, _)| p.ends_with('/')).count();
    assert_eq!(regular.len(), expected.len() - directories, "{regular:?}");

    // The conffiles and maintainer scripts.
    let scratch = Scratch::new("debian-package");
    let control = scratch.file("DEBIAN");
    must(
        "dpkg-deb",
        &["--control", deb, control.to_str().unwrap()],
        &[],
    );
    let conffiles = String::from_utf8(read(&control.join("conffiles"))).unwrap();
    assert_eq!(conffiles.lines().collect::<Vec<_>>(), CONFFILES);
    for script in ["postinst", "prerm", "postrm"] {
        let path = control.join(script);
        must("sh", &["-n", path.to_str().unwrap()], &[]);
        let mode = std::fs::metadata(&path).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o755,
            "{script}"
        );
    }

    // The very binary, units, account and configurations of the tree.
    let root = scratch.file("root");
    must("dpkg-deb", &["--extract", deb, root.to_str().unwrap()], &[]);
    let same = [
        ("usr/bin/proxypool", package.binary.clone()),
        (
            "lib/systemd/system/proxypool-controller.service",
            repo().join("deploy/systemd/proxypool-controller.service"),
        ),
        (
            "lib/systemd/system/proxypool-gateway.service",
            repo().join("deploy/systemd/proxypool-gateway.service"),
        ),
        (
            "usr/lib/sysusers.d/proxypool.conf",
            repo().join("deploy/systemd/proxypool.sysusers"),
        ),
        (
            "etc/proxypool/proxypool.toml",
            repo().join("deploy/debian/config/proxypool.toml"),
        ),
        (
            "etc/proxypool/gateway.toml",
            repo().join("deploy/debian/config/gateway.toml"),
        ),
    ];
    for (packaged, source) in same {
        assert!(
            read(&root.join(packaged)) == read(&source),
            "{packaged} is not {}",
            source.display()
        );
    }
    let unit = String::from_utf8(read(
        &root.join("lib/systemd/system/proxypool-controller.service"),
    ))
    .unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/proxypool controller"));

    // The configurations load with their secrets, and not while one is missing.
    let proxypool = root.join("usr/bin/proxypool");
    let etc = root.join("etc/proxypool");
    let (ok, _, err) = check_config(&proxypool, &etc.join("gateway.toml"));
    assert!(!ok, "gateway.toml loaded without its worker token");
    assert!(err.contains("gateway-secrets/worker-token"), "{err}");
    for (i, (secret, _)) in SECRETS.iter().enumerate() {
        std::fs::write(
            etc.join(secret),
            format!("throwaway-secret-{i}-0123456789\n"),
        )
        .unwrap();
    }
    for file in ["proxypool.toml", "gateway.toml"] {
        let (ok, said, err) = check_config(&proxypool, &etc.join(file));
        assert!(ok, "{file}: {err}");
        assert!(said.contains(": OK"), "{file}: {said}");
    }
    // The vendor the controller's file shows in comments loads once turned on.
    let text = String::from_utf8(read(&etc.join("proxypool.toml"))).unwrap();
    std::fs::write(etc.join("vendor.toml"), with_vendor(&text)).unwrap();
    let (ok, _, err) = check_config(&proxypool, &etc.join("vendor.toml"));
    assert!(!ok, "the vendor loaded without its password file");
    assert!(err.contains("secrets/acme-password"), "{err}");
    std::fs::write(etc.join("secrets/acme-password"), "vendor-password\n").unwrap();
    let (ok, said, err) = check_config(&proxypool, &etc.join("vendor.toml"));
    assert!(ok, "{err}");
    assert!(said.contains("upstreams   1"), "{said}");
}

/// A container of `image` running until dropped, fed the package.
struct Container {
    id: String,
}

impl Container {
    fn start(image: &str, deb: &Path) -> Container {
        let id = must("docker", &["run", "-d", image, "sleep", "infinity"], &[])
            .trim()
            .to_owned();
        let container = Container { id };
        let to = format!("{}:/tmp/proxypool.deb", container.id);
        must("docker", &["cp", deb.to_str().unwrap(), &to], &[]);
        container
    }

    /// `sh -c SCRIPT` in the container: (success, stdout, stderr).
    fn sh(&self, script: &str) -> (bool, String, String) {
        exec("docker", &["exec", &self.id, "sh", "-c", script], &[])
    }

    /// Like [`Container::sh`], failing the test unless it succeeds; its stdout.
    fn must(&self, script: &str) -> String {
        let (ok, stdout, stderr) = self.sh(script);
        assert!(ok, "{script}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        stdout
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = exec("docker", &["rm", "-f", &self.id], &[]);
    }
}

fn docker_answers() -> bool {
    Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|output| output.status.success())
}

#[test]
fn the_package_installs_on_debian_makes_its_account_and_keeps_conffiles_until_purged() {
    let started = Instant::now();
    if !docker_answers() {
        eprintln!("\n*** SKIPPED: no Docker Engine answers `docker info` ***\n");
        return;
    }
    let Some(package) = package() else {
        return;
    };
    let Some(base) = base_image(started) else {
        return;
    };
    let host = stand_in("debian-host", &base, started);
    let version = workspace_version();

    // Without systemd's tools (the bare base) it installs and says how to make the account.
    let bare = Container::start(&base, &package.deb);
    let (ok, _, said) = bare.sh("dpkg -i /tmp/proxypool.deb");
    assert!(ok, "{said}");
    assert!(said.contains("systemd-sysusers not found"), "{said}");
    assert!(!bare.sh("getent passwd proxypool").0);
    drop(bare);
    log(started, "installed without systemd-sysusers");

    let host = Container::start(&host, &package.deb);
    let (ok, said, err) = host.sh("dpkg -i /tmp/proxypool.deb");
    assert!(ok, "{said}{err}");
    log(started, "installed on the debian-host stand-in");

    // The files, where they belong; the secrets directory is its group's.
    let stat = host.must(
        "stat -c '%U:%G %a %n' /usr/bin/proxypool /lib/systemd/system/proxypool-controller.service \
         /lib/systemd/system/proxypool-gateway.service /usr/lib/sysusers.d/proxypool.conf \
         /etc/proxypool/proxypool.toml /etc/proxypool/gateway.toml /etc/proxypool/secrets \
         /etc/proxypool/gateway-secrets /usr/share/doc/proxypool/copyright",
    );
    assert_eq!(
        stat.lines().collect::<Vec<_>>(),
        [
            "root:root 755 /usr/bin/proxypool",
            "root:root 644 /lib/systemd/system/proxypool-controller.service",
            "root:root 644 /lib/systemd/system/proxypool-gateway.service",
            "root:root 644 /usr/lib/sysusers.d/proxypool.conf",
            "root:root 644 /etc/proxypool/proxypool.toml",
            "root:root 644 /etc/proxypool/gateway.toml",
            "root:proxypool 750 /etc/proxypool/secrets",
            "root:proxypool-gateway 750 /etc/proxypool/gateway-secrets",
            "root:root 644 /usr/share/doc/proxypool/copyright",
        ]
    );

    // The accounts: system users with no login, the controller's home its state directory;
    // the controller's account is in the gateway's group, never the other way round.
    let account = host.must("getent passwd proxypool");
    let fields: Vec<&str> = account.trim().split(':').collect();
    assert!(fields[2].parse::<u32>().unwrap() < 1000, "{account}");
    assert_eq!(fields[5], "/var/lib/proxypool", "{account}");
    assert_eq!(fields[6], "/usr/sbin/nologin", "{account}");
    let gateway = host.must("getent passwd proxypool-gateway");
    let gateway_fields: Vec<&str> = gateway.trim().split(':').collect();
    assert!(
        gateway_fields[2].parse::<u32>().unwrap() < 1000,
        "{gateway}"
    );
    assert_ne!(gateway_fields[2], fields[2], "one uid for both services");
    assert_eq!(gateway_fields[6], "/usr/sbin/nologin", "{gateway}");
    assert_eq!(
        host.must("id -nG proxypool-gateway").trim(),
        "proxypool-gateway"
    );
    assert_eq!(
        host.must("id -nG proxypool").trim(),
        "proxypool proxypool-gateway"
    );

    // The installed units as systemd reads them: not one complaint.
    let (ok, said, err) = host.sh(
        "systemd-analyze verify --man=no /lib/systemd/system/proxypool-controller.service \
         /lib/systemd/system/proxypool-gateway.service",
    );
    assert!(
        ok && said.trim().is_empty() && err.trim().is_empty(),
        "{said}{err}"
    );

    assert_eq!(
        host.must("proxypool --version").trim(),
        format!("proxypool {version}")
    );

    // Each file loads as its service's user once the operator wrote the secrets, readable
    // by their group only; a secret only root may read is refused, and so is the
    // controller's file to the gateway's user.
    let write_secrets: String = SECRETS
        .iter()
        .map(|(secret, group)| {
            format!(
                "head -c 32 /dev/urandom | base64 | install -m 0640 -g {group} /dev/stdin \
                 /etc/proxypool/{secret}\n"
            )
        })
        .collect();
    host.must(&write_secrets);
    for (file, user) in SERVICES {
        let said = host.must(&format!(
            "runuser -u {user} -- proxypool check-config {file}"
        ));
        assert!(said.contains(": OK"), "{file}: {said}");
    }
    let (ok, _, err) = host
        .sh("runuser -u proxypool-gateway -- proxypool check-config /etc/proxypool/proxypool.toml");
    assert!(!ok, "the gateway's user read the controller's secrets");
    assert!(err.contains("permission denied"), "{err}");
    let (ok, _, _) =
        host.sh("runuser -u proxypool-gateway -- cat /etc/proxypool/secrets/scraper-api-token");
    assert!(!ok, "the gateway's user read a client's API token");
    let (ok, _, err) = host.sh("chmod 0600 /etc/proxypool/gateway-secrets/worker-token \
         && runuser -u proxypool-gateway -- proxypool check-config /etc/proxypool/gateway.toml");
    assert!(!ok, "a secret only root may read was read");
    assert!(err.contains("permission denied"), "{err}");
    host.must("chmod 0640 /etc/proxypool/gateway-secrets/worker-token");

    // An edited conffile survives a reinstall, and so does the statoverride.
    host.must("echo '# edited here' >> /etc/proxypool/gateway.toml");
    let (ok, said, err) = host.sh("dpkg -i /tmp/proxypool.deb");
    assert!(ok, "{said}{err}");
    assert!(
        host.sh("tail -n 1 /etc/proxypool/gateway.toml")
            .1
            .contains("edited here")
    );
    let overrides =
        host.must("dpkg-statoverride --list /etc/proxypool/secrets /etc/proxypool/gateway-secrets");
    let mut overrides: Vec<&str> = overrides.lines().collect();
    overrides.sort_unstable();
    assert_eq!(
        overrides,
        [
            "root proxypool 750 /etc/proxypool/secrets",
            "root proxypool-gateway 750 /etc/proxypool/gateway-secrets",
        ]
    );

    // What the controller's service would have written.
    host.must(
        "install -d -o proxypool -g proxypool -m 0700 /var/lib/proxypool \
         && install -o proxypool -g proxypool -m 0600 /dev/null /var/lib/proxypool/quota.sqlite3",
    );

    // dpkg -r: the program goes, the configuration stays.
    host.must("dpkg -r proxypool");
    assert_eq!(
        host.must("dpkg-query -W -f '${db:Status-Abbrev}' proxypool")
            .trim(),
        "rc"
    );
    for gone in [
        "/usr/bin/proxypool",
        "/lib/systemd/system/proxypool-controller.service",
        "/usr/lib/sysusers.d/proxypool.conf",
    ] {
        assert!(
            !host.sh(&format!("test -e {gone}")).0,
            "{gone} after dpkg -r"
        );
    }
    assert!(
        host.sh("tail -n 1 /etc/proxypool/gateway.toml")
            .1
            .contains("edited here")
    );
    host.must("test -f /etc/proxypool/proxypool.toml && test -d /var/lib/proxypool");

    // dpkg -P: the conffiles, the statoverrides and the state go; the accounts and the
    // operator's own secret files stay.
    let (ok, said, err) = host.sh("dpkg -P proxypool");
    assert!(ok, "{said}{err}");
    for gone in [CONFFILES[0], CONFFILES[1], "/var/lib/proxypool"] {
        assert!(
            !host.sh(&format!("test -e {gone}")).0,
            "{gone} after dpkg -P"
        );
    }
    for dir in ["/etc/proxypool/secrets", "/etc/proxypool/gateway-secrets"] {
        assert!(
            !host.sh(&format!("dpkg-statoverride --list {dir}")).0,
            "the statoverride of {dir} outlived the purge"
        );
    }
    assert!(!host.sh("dpkg-query -W proxypool").0, "still known to dpkg");
    host.must("getent passwd proxypool && getent passwd proxypool-gateway");
    host.must("test -f /etc/proxypool/gateway-secrets/worker-token");
    log(started, "removed and purged");
}
