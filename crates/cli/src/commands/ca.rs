//! `proxypool ca init [--dir DIR] [--name NAME] [--force]`: makes the CA a gateway mints
//! the leaves of TLS inspection from (`[gateway.inspection]`), and says how to use it.
//!
//! Writes `ca.pem` (the certificate, mode 0644: every inspected client trusts it) and
//! `ca-key.pem` (its PKCS#8 key, mode 0600: the gateway's account alone reads it) into
//! DIR, created with mode 0700 when missing. Existing files are kept, and the run refused,
//! unless `--force`; each file is written to a temporary name first and renamed into
//! place, so a file is never half written. A DIR every user may write to is refused.
//!
//! The CA: an ECDSA P-256 key, a self-signed certificate valid ten years (from an hour
//! ago) for signing leaves only (path length 0). Then it prints the table to paste into
//! the gateway's file and how clients trust the CA (curl, Python requests, Chromium).
//! Nothing printed holds the key.

use crate::args::{CaArgs, CaCommand, CaInitArgs};
use crate::failure::Failure;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The certificate's file name in DIR.
pub(crate) const CERT_FILE: &str = "ca.pem";
/// The key's file name in DIR.
pub(crate) const KEY_FILE: &str = "ca-key.pem";

/// How long the CA is valid.
const VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

pub(crate) fn run(args: CaArgs) -> Result<(), Failure> {
    match args.command {
        CaCommand::Init(args) => init(&args),
    }
}

fn init(args: &CaInitArgs) -> Result<(), Failure> {
    let (cert, key) = write_ca(&args.dir, &args.name, args.force)?;
    print!("{}", instructions(&cert, &key));
    Ok(())
}

/// The CA files in `dir` (made when missing, or replaced with `force`): where the
/// certificate and the key are.
pub(crate) fn write_ca(dir: &Path, name: &str, force: bool) -> Result<(PathBuf, PathBuf), Failure> {
    if name.trim().is_empty() {
        return Err(Failure::config("--name must not be empty"));
    }
    prepare_dir(dir)?;
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| Failure::runtime(format!("{}: {e}", dir.display())))?;
    let (cert_path, key_path) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    let present: Vec<String> = [&cert_path, &key_path]
        .into_iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok())
        .map(|path| path.display().to_string())
        .collect();
    if !present.is_empty() && !force {
        return Err(Failure::config(format!(
            "{} already exist(s); nothing was written. Replacing the CA means every inspected \
             client must trust the new one: add --force to do it",
            present.join(" and ")
        )));
    }
    let (cert_pem, key_pem) = generate(name)?;
    // The key first: a certificate without its key would be useless.
    put(&key_path, &key_pem, 0o600)?;
    put(&cert_path, &cert_pem, 0o644)?;
    Ok((cert_path, key_path))
}

/// A new CA named `name`: its certificate and its key, as PEM.
fn generate(name: &str) -> Result<(String, String), Failure> {
    let fail = |what: &str, e: rcgen::Error| Failure::runtime(format!("{what}: {e}"));
    let key = KeyPair::generate().map_err(|e| fail("the CA key", e))?;
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("the CA parameters", e))?;
    params.distinguished_name.push(DnType::CommonName, name);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "proxypool");
    // It signs leaves, never another CA.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let since_epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
    params.not_before = now - Duration::from_secs(3600);
    params.not_after = now + VALIDITY;
    let mut serial = [0u8; 16];
    proxypool_core::random::fill(&mut serial)
        .map_err(|e| Failure::runtime(format!("the CA serial: {e}")))?;
    serial[0] &= 0x7f;
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    let cert = params
        .self_signed(&key)
        .map_err(|e| fail("the CA certificate", e))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Creates `dir` (mode 0700) when missing; refuses one every user may write to.
fn prepare_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::metadata(dir) {
        Ok(metadata) if !metadata.is_dir() => Err(Failure::config(format!(
            "{}: not a directory",
            dir.display()
        ))),
        Ok(metadata) if metadata.permissions().mode() & 0o002 != 0 => {
            Err(Failure::config(format!(
                "{}: every user may write to this directory, so another could replace the CA \
                 or read its key as it is written; choose a directory of your own",
                dir.display()
            )))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Failure::runtime(format!("creating {}: {e}", dir.display()))),
        Err(e) => Err(Failure::config(format!("{}: {e}", dir.display()))),
    }
}

/// Writes `text` to a new file beside `path` with `mode`, then renames it into place.
fn put(path: &Path, text: &str, mode: u32) -> Result<(), Failure> {
    let staged = path.with_extension("pem.new");
    let _ = std::fs::remove_file(&staged);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&staged)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            // The process's umask may have taken bits away: set exactly this mode.
            file.set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .and_then(|()| std::fs::rename(&staged, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&staged);
        Failure::runtime(format!("writing {}: {e}", path.display()))
    })
}

/// What to do next, with the absolute paths of the files.
pub(crate) fn instructions(cert: &Path, key: &Path) -> String {
    let (cert, key) = (cert.display(), key.display());
    format!(
        "wrote {cert} (the CA certificate: every inspected client trusts it)\n\
         wrote {key} (its key: readable by the gateway's user only; never share it)\n\
         \n\
         Add to the gateway's configuration file:\n\
         \n\
         [gateway.inspection]\n\
         ca_cert = \"{cert}\"\n\
         ca_key = \"{key}\"\n\
         # bypass = [\"bank.example\"]   # domains never inspected\n\
         \n\
         and to each client to inspect, in its [[clients]] entry: inspection = \"allowed\"\n\
         (inspected when its username carries -inspect) or \"on\" (every CONNECT).\n\
         \n\
         The client trusts the CA:\n\
         \x20 curl:      curl --proxy http://CLIENT-inspect:PASSWORD@GATEWAY:PORT --cacert {cert} https://example.com/\n\
         \x20 requests:  requests.get(url, proxies={{\"https\": \"http://CLIENT-inspect:PASSWORD@GATEWAY:PORT\"}}, verify=\"{cert}\")\n\
         \x20 Chromium:  certutil -d sql:$HOME/.pki/nssdb -A -t \"C,,\" -n proxypool-inspection -i {cert}\n\
         \x20            (or --ignore-certificate-errors-spki-list for a throwaway profile)\n"
    )
}
