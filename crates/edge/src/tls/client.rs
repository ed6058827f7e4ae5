//! [`ClientTls`]: the client side of outbound HTTPS, on the configured CA bundle or the
//! public roots, with an optional client certificate.

use super::conn::Conn;
use super::error::TlsError;
use super::load::{load_certs, load_key, load_roots, provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The files of an outbound TLS link; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// The CA bundle the server must chain to; `None` = the public roots.
    pub ca: Option<PathBuf>,
    /// A client certificate chain to present (mutual TLS), with `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's key.
    pub key: Option<PathBuf>,
}

/// The client side of outbound HTTPS; cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// The public roots, no client certificate.
    pub fn public_roots() -> Self {
        Self::load(&ClientTlsFiles::default()).expect("the public roots always load")
    }

    /// Loads the configured files.
    pub fn load(files: &ClientTlsFiles) -> Result<Self, TlsError> {
        let roots = match &files.ca {
            Some(ca) => load_roots(ca)?,
            None => public_roots(),
        };
        let identity = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => Some((load_certs(cert)?, load_key(key)?, key)),
            (None, None) => None,
            _ => {
                return Err(TlsError::Config(
                    "a client certificate needs both cert and key".into(),
                ));
            }
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots);
        let config = match identity {
            Some((certs, key, key_path)) => {
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsError::Pem {
                        path: key_path.clone(),
                        what: format!("does not go with the certificate: {e}"),
                    })?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Self::of(config))
    }

    /// Trusts the CA certificates of a PEM text (a bundle shipped rather than read from a
    /// file), or the public roots for `None`; no client certificate.
    pub fn from_ca_pem(pem: Option<&str>) -> Result<Self, TlsError> {
        let roots = match pem {
            None => public_roots(),
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    let cert =
                        cert.map_err(|e| TlsError::Config(format!("not a PEM CA bundle: {e}")))?;
                    roots.add(cert).map_err(|e| {
                        TlsError::Config(format!("not a usable CA certificate: {e}"))
                    })?;
                }
                if roots.is_empty() {
                    return Err(TlsError::Config(
                        "the CA bundle holds no certificate".into(),
                    ));
                }
                roots
            }
        };
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self::of(config))
    }

    fn of(mut config: ClientConfig) -> Self {
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::clone(&config)),
            config,
        }
    }

    /// The rustls configuration (for clients that dial themselves).
    pub fn config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.config)
    }

    /// Runs the handshake on `tcp` for the server named `host` (a DNS name or an IP).
    /// A certificate the roots do not vouch for fails with rustls's reason in the error.
    pub async fn handshake(&self, host: &str, tcp: TcpStream) -> io::Result<Conn> {
        let tls = self.connect(host, tcp).await?;
        Ok(Conn::Client(Box::new(tls)))
    }

    /// As [`handshake`](Self::handshake), over any stream: TLS inside a tunnel or inside
    /// another TLS link.
    pub async fn connect<S>(&self, host: &str, io: S) -> io::Result<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?
            .to_owned();
        self.connector.connect(name, io).await
    }
}

/// The public roots (webpki's bundle).
fn public_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}
