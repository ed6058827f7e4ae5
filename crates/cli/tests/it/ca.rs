//! `proxypool ca init` as an operator uses it: the CA's files and their modes, the lines
//! it prints (never the key), a second run refused and changing nothing unless `--force`,
//! a directory every user may write to refused, and the CA it made loading in a gateway's
//! file that `check-config` accepts (warning when the key is readable by others).

use crate::common::{Scratch, run};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The base64 lines of a PEM file (what must never be printed).
fn pem_body(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn ca_init_writes_the_ca_prints_how_to_use_it_and_keeps_an_existing_one() {
    let scratch = Scratch::new("ca-init");
    let dir = scratch.file("gateway-ca");
    let dir_arg = dir.to_str().unwrap();
    let (code, stdout, stderr) = run(&["ca", "init", "--dir", dir_arg, "--name", "Acme CA"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&cert), 0o644);
    assert_eq!(mode(&key), 0o600);
    assert!(
        std::fs::read_to_string(&cert)
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    assert!(
        std::fs::read_to_string(&key)
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
    for expected in [
        "[gateway.inspection]".to_owned(),
        format!("ca_cert = \"{}\"", cert.display()),
        format!("ca_key = \"{}\"", key.display()),
        "inspection = \"allowed\"".to_owned(),
        format!("--cacert {}", cert.display()),
        format!("verify=\"{}\"", cert.display()),
        "certutil".to_owned(),
    ] {
        assert!(stdout.contains(&expected), "{expected} in {stdout}");
    }
    for line in pem_body(&key) {
        assert!(
            !stdout.contains(&line) && !stderr.contains(&line),
            "the key was printed"
        );
    }

    // Again: refused, nothing changed.
    let before = (std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap());
    let (code, _, stderr) = run(&["ca", "init", "--dir", dir_arg], &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--force") && stderr.contains("ca.pem"),
        "{stderr}"
    );
    assert_eq!(
        before,
        (std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap())
    );
    // With --force: a new CA, the modes as before.
    let (code, _, stderr) = run(&["ca", "init", "--dir", dir_arg, "--force"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_ne!(before.1, std::fs::read(&key).unwrap());
    assert_eq!((mode(&cert), mode(&key)), (0o644, 0o600));

    // A directory every user may write to: refused before anything is written.
    let open = scratch.file("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, _, stderr) = run(&["ca", "init", "--dir", open.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    assert!(stderr.contains("every user may write"), "{stderr}");
    assert!(!open.join("ca-key.pem").exists());
}

#[test]
fn a_gateway_file_with_the_ca_checks_out_and_a_readable_key_is_warned_about() {
    let scratch = Scratch::new("ca-check");
    let dir = scratch.file("ca");
    let (code, _, stderr) = run(&["ca", "init", "--dir", dir.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gateway.toml"),
    )
    .unwrap();
    let text = format!(
        "{example}\n[gateway.inspection]\nca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca-key.pem\"\nbypass = [\"bank.example\"]\n"
    );
    let file = scratch.write("gateway.toml", &text);
    let env = [("PROXYPOOL_WORKER_TOKEN", "worker-secret-value-1")];
    let (code, stdout, stderr) = run(&["check-config", file.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(
        stdout.contains("inspection  CA ") && stdout.contains("1 bypassed domain(s)"),
        "{stdout}"
    );
    std::fs::set_permissions(
        dir.join("ca-key.pem"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let (code, _, stderr) = run(&["check-config", file.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("ca_key") && stderr.contains("chmod 600"),
        "{stderr}"
    );
    for line in pem_body(&dir.join("ca-key.pem")) {
        assert!(!stderr.contains(&line), "the key was printed");
    }
    // A key that does not belong to the certificate: the gateway's own check refuses it.
    let other = scratch.file("other");
    let (code, _, _) = run(&["ca", "init", "--dir", other.to_str().unwrap()], &[]);
    assert_eq!(code, 0);
    let mixed = text.replace("ca/ca-key.pem", "other/ca-key.pem");
    let file = scratch.write("mixed.toml", &mixed);
    let (code, _, stderr) = run(&["check-config", file.to_str().unwrap()], &env);
    assert_ne!(code, 0);
    assert!(stderr.contains("does not issue leaves"), "{stderr}");
}

#[test]
fn a_client_asking_for_inspection_from_a_gateway_without_it_is_warned_about() {
    let scratch = Scratch::new("ca-unused");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/proxypool.toml"),
    )
    .unwrap();
    std::fs::create_dir_all(scratch.file("secrets")).unwrap();
    scratch.write("secrets/dc-password", "dc-secret\n");
    let env = [
        ("PROXYPOOL_WORKER_TOKEN", "worker-secret-value-1"),
        ("ACME_PROXY_PASSWORD", "acme-secret"),
        ("SCRAPER_API_TOKEN", "api-secret-value-0001"),
        ("SCRAPER_GATEWAY_PASSWORD", "gateway-secret-value"),
    ];
    let plain = scratch.write("plain.toml", &example);
    let (code, _, stderr) = run(&["check-config", plain.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("inspection"), "{stderr}");
    let asking = example.replacen("# inspection = \"allowed\"", "inspection = \"allowed\"", 1);
    assert_ne!(asking, example, "the example has the commented key");
    let file = scratch.write("asking.toml", &asking);
    let (code, _, stderr) = run(&["check-config", file.to_str().unwrap()], &env);
    assert_eq!(code, 0, "a warning, not a refusal: {stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("never inspects"),
        "{stderr}"
    );
}
