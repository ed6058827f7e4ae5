//! [`ClientTls`]: the client side of outbound HTTPS, on the configured CA bundle or the
//! public roots, with an optional client certificate.

use super::conn::Conn;
use super::error::TlsError;
use super::load::{certs_of_pem, load_certs, load_key, load_roots, provider, roots_of};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
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
    /// The public roots, no client certificate; built once per process (a clone shares it).
    pub fn public_roots() -> Self {
        static PUBLIC: OnceLock<ClientTls> = OnceLock::new();
        PUBLIC
            .get_or_init(|| {
                Self::with_roots(public_roots(), None).expect("the public roots always load")
            })
            .clone()
    }

    /// Loads the configured files.
    pub fn load(files: &ClientTlsFiles) -> Result<Self, TlsError> {
        let roots = match &files.ca {
            Some(ca) => load_roots(ca)?,
            None => public_roots(),
        };
        let identity = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(TlsError::Config(
                    "a client certificate needs both cert and key".into(),
                ));
            }
        };
        Self::with_roots(roots, identity)
    }

    /// Trusts the CA certificates of a PEM text (a bundle shipped rather than read from a
    /// file), or the public roots for `None`; no client certificate.
    pub fn from_ca_pem(pem: Option<&str>) -> Result<Self, TlsError> {
        let Some(pem) = pem else {
            return Ok(Self::public_roots());
        };
        let roots = certs_of_pem(pem.as_bytes())
            .and_then(roots_of)
            .map_err(|what| TlsError::Config(format!("the CA bundle: {what}")))?;
        Self::with_roots(roots, None)
    }

    /// The configuration on `roots`, with the client certificate and key of `identity`.
    fn with_roots(
        roots: RootCertStore,
        identity: Option<(&PathBuf, &PathBuf)>,
    ) -> Result<Self, TlsError> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots);
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .map_err(|e| TlsError::Pem {
                    path: key.clone(),
                    what: format!("does not go with {}: {e}", cert.display()),
                })?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::clone(&config)),
            config,
        })
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
