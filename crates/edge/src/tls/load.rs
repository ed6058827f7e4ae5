//! What both TLS sides load: the one crypto provider of the workspace (ring), and
//! certificates, keys and roots from PEM files.

use super::error::TlsError;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The one crypto provider of the workspace.
pub(super) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certs_of_pem(&read(path)?).map_err(|what| TlsError::Pem {
        path: path.to_owned(),
        what,
    })
}

/// Every certificate of a PEM text (at least one).
pub(super) fn certs_of_pem(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".into());
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        path: path.to_owned(),
        what: format!("no usable PRIVATE KEY block: {e}"),
    })
}

/// A root store from a CA bundle file.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    roots_of(load_certs(path)?).map_err(|what| TlsError::Pem {
        path: path.to_owned(),
        what,
    })
}

/// A root store of these CA certificates.
pub(super) fn roots_of(certs: Vec<CertificateDer<'static>>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("not a usable CA certificate: {e}"))?;
    }
    Ok(roots)
}
