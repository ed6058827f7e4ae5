//! What makes Chromium trust a test's certificates: the pin of a key
//! (`--ignore-certificate-errors-spki-list`) or a CA in an NSS database under a private
//! `HOME`.

use crate::error::{Result, TestkitError};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

fn io_error(context: &str) -> impl FnOnce(io::Error) -> TestkitError + '_ {
    move |source| TestkitError::io(context.to_owned(), source)
}

/// Names the NSS `certutil` binary explicitly (skips the `PATH` search).
pub const CERTUTIL_ENV: &str = "PROXYPOOL_TEST_CERTUTIL";

fn certutil_binary() -> Result<PathBuf> {
    if let Some(explicit) = std::env::var_os(CERTUTIL_ENV) {
        return Ok(PathBuf::from(explicit));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("certutil"))
        .find(|candidate| candidate.is_file())
        .ok_or(TestkitError::BinaryNotFound {
            binary: "certutil",
            searched: format!("${CERTUTIL_ENV}, then certutil on PATH (libnss3-tools)"),
        })
}

/// Makes `home` a `HOME` whose NSS database (`.pki/nssdb`, where Chromium on Linux reads
/// the user's trust) trusts `ca_pem` to issue server certificates; launch with
/// `HOME=home` in [`LaunchOptions::env`]. For certificates a pin cannot name, such as
/// leaves minted per host with fresh keys.
pub fn trust_ca_in_nss(home: &Path, ca_pem: &Path) -> Result<()> {
    let certutil = certutil_binary()?;
    let db = home.join(".pki/nssdb");
    std::fs::create_dir_all(&db).map_err(io_error("creating the NSS database directory"))?;
    let db_arg = format!("sql:{}", db.display());
    let ca = ca_pem.display().to_string();
    let steps: [&[&str]; 2] = [
        &["-N", "-d", &db_arg, "--empty-password"],
        &["-A", "-d", &db_arg, "-n", "test ca", "-t", "C,,", "-i", &ca],
    ];
    for args in steps {
        let output = Command::new(&certutil)
            .args(args)
            .output()
            .map_err(io_error("running certutil"))?;
        if !output.status.success() {
            return Err(TestkitError::CommandFailed {
                program: "certutil".into(),
                status: output.status.to_string(),
                output: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
    }
    Ok(())
}

/// [`trust_ca_in_nss`], or `None` (after a loud banner) when certutil is not installed;
/// panics under `CI=true` or when certutil fails.
pub fn trust_ca_in_nss_or_skip(home: &Path, ca_pem: &Path) -> Option<()> {
    crate::skip::skip_or_fail("certutil", CERTUTIL_ENV, trust_ca_in_nss(home, ca_pem))
}

/// What `--ignore-certificate-errors-spki-list` takes for a certificate whose key is the
/// PEM file `key_pem`: the base64 SHA-256 of its SubjectPublicKeyInfo.
pub fn spki_pin(key_pem: &Path) -> Result<String> {
    use sha2::Digest;
    let pem = std::fs::read_to_string(key_pem).map_err(io_error("reading the key to pin"))?;
    let key = rcgen::KeyPair::from_pem(&pem).map_err(|e| {
        TestkitError::io(
            format!("parsing {}", key_pem.display()),
            io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        )
    })?;
    let digest = sha2::Sha256::digest(rcgen::PublicKeyData::subject_public_key_info(&key));
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        digest,
    ))
}
