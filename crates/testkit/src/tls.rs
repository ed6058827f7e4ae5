//! [`TestCa`]: a private certificate authority for TLS tests, and the server and client
//! certificates it issues, as PEM files in a scratch directory that disappears with it.
//!
//! Keys are ECDSA P-256 (rcgen on ring), so generating a CA and a few certificates takes
//! milliseconds. Server certificates name `127.0.0.1` and `localhost` unless told
//! otherwise; client certificates carry the given common name.

use crate::error::{Result, TestkitError};
use crate::scratch::ScratchDir;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A private CA that writes what it issues under its own scratch directory.
#[derive(Debug)]
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: ScratchDir,
    ca: PathBuf,
}

fn tls_error(what: &str, error: rcgen::Error) -> TestkitError {
    TestkitError::io(
        what.to_owned(),
        std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()),
    )
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|error| TestkitError::io(format!("writing {}", path.display()), error))
}

impl TestCa {
    /// A new CA named `name`, its certificate at [`ca_path`](Self::ca_path).
    pub fn new(name: &str) -> Result<Self> {
        let dir = ScratchDir::create(&std::env::temp_dir(), "tls")?;
        // Readable by a server that runs as another account (PostgreSQL under root).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755));
        }
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| tls_error("CA parameters", e))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(|e| tls_error("CA key", e))?;
        let issuer = CertifiedIssuer::self_signed(params, key)
            .map_err(|e| tls_error("CA certificate", e))?;
        let ca = dir.path().join("ca.pem");
        write(&ca, &issuer.pem())?;
        Ok(TestCa { issuer, dir, ca })
    }

    /// The CA certificate (the bundle a peer trusts).
    pub fn ca_path(&self) -> &Path {
        &self.ca
    }

    /// The directory the files are written to.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A server certificate for `127.0.0.1` and `localhost`, as `<stem>.pem` / `<stem>.key`.
    pub fn server(&self, stem: &str) -> Result<CertFiles> {
        self.server_for(stem, &["127.0.0.1", "localhost"])
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn server_for(&self, stem: &str, names: &[&str]) -> Result<CertFiles> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params =
            CertificateParams::new(names).map_err(|e| tls_error("server parameters", e))?;
        params.distinguished_name.push(DnType::CommonName, stem);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(stem, params)
    }

    /// A client certificate with common name `name`.
    pub fn client(&self, stem: &str, name: &str) -> Result<CertFiles> {
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| tls_error("client parameters", e))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(stem, params)
    }

    fn issue(&self, stem: &str, params: CertificateParams) -> Result<CertFiles> {
        let key = KeyPair::generate().map_err(|e| tls_error("key", e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| tls_error("certificate", e))?;
        let files = CertFiles {
            cert: self.dir.path().join(format!("{stem}.pem")),
            key: self.dir.path().join(format!("{stem}.key")),
        };
        write(&files.cert, &cert.pem())?;
        write(&files.key, &key.serialize_pem())?;
        // PostgreSQL refuses a key file others can read; its owner is set by the caller.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&files.key, std::fs::Permissions::from_mode(0o600));
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_pem_files_under_its_directory() {
        let ca = TestCa::new("test ca").unwrap();
        let server = ca.server("srv").unwrap();
        let client = ca.client("cli", "worker-1").unwrap();
        for path in [
            ca.ca_path(),
            &server.cert,
            &server.key,
            &client.cert,
            &client.key,
        ] {
            let text = std::fs::read_to_string(path).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{}", path.display());
        }
        let dir = ca.dir().to_owned();
        drop(ca);
        assert!(!dir.exists());
    }
}
