//! TLS for every HTTP link of proxypool, on rustls with the ring provider (no OpenSSL).
//!
//! - [`ServerTls`]: the server side of a scaffold listener ([`serve`](crate::serve())):
//!   the certificate chain and key from PEM files, optionally a CA bundle that client
//!   certificates must chain to (mutual TLS). The running `rustls::ServerConfig` sits
//!   behind an `ArcSwap`: every new connection takes the current one, so a certificate
//!   replaced on disk (noticed by polling the files' modification times, or on
//!   [`ServerTls::reload`]) is served to the next connection while open connections keep
//!   the session they negotiated. A reload that fails (a half-written file, a key that does
//!   not match) keeps the running configuration and is logged.
//! - [`ClientTls`]: the client side of every outbound HTTPS call (gateway to controller,
//!   `proxypool extract`, vendor lists): the configured CA bundle or else the public roots
//!   of `webpki-roots` (the same on every host, whatever its system store holds), and
//!   optionally a client certificate.
//! - [`Conn`]: one stream type for plain TCP and both TLS sides, so the scaffold and the
//!   HTTP clients have one IO type whatever the link speaks.
//! - [`Target`]: an `http://` or `https://` base URL split into what a dial needs.

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How often a listener looks at its certificate files by default.
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);

/// The one crypto provider of the workspace.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why TLS settings could not be loaded; names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}: {what}", path.display())]
    Pem { path: PathBuf, what: String },
    #[error("TLS settings rejected: {0}")]
    Config(String),
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: format!("not a PEM certificate file: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            what: "no CERTIFICATE block".into(),
        });
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
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

/// The files of a TLS listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// When set, clients must present a certificate that chains to this bundle.
    pub client_ca: Option<PathBuf>,
}

impl ServerTlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }

    /// Modification time and length of each file (`None` where it cannot be read), so a
    /// poll notices a replaced file.
    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.paths()
            .map(|p| {
                std::fs::metadata(p)
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())))
            })
            .collect()
    }

    fn build(&self) -> Result<ServerConfig, TlsError> {
        let chain = load_certs(&self.cert)?;
        let key = load_key(&self.key)?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match &self.client_ca {
            Some(ca) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(load_roots(ca)?),
                    provider(),
                )
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Pem {
                path: self.key.clone(),
                what: format!("does not go with {}: {e}", self.cert.display()),
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The server side of a TLS listener; cheap to clone (one shared state).
#[derive(Clone)]
pub struct ServerTls {
    inner: Arc<ServerInner>,
}

struct ServerInner {
    files: ServerTlsFiles,
    config: ArcSwap<ServerConfig>,
    /// The file stamps of the running configuration (never held across an await).
    stamps: Mutex<Vec<Option<(SystemTime, u64)>>>,
    poll_every: Duration,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.inner.files)
            .field("poll_every", &self.inner.poll_every)
            .finish_non_exhaustive()
    }
}

/// Two handles are equal when they share one state (settings compare by identity).
impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for ServerTls {}

impl ServerTls {
    /// Loads the files; fails with the file's name when one is missing or unusable.
    pub fn load(files: ServerTlsFiles) -> Result<Self, TlsError> {
        Self::load_polling(files, DEFAULT_POLL)
    }

    /// As [`load`](Self::load), looking at the files every `poll_every` while serving.
    pub fn load_polling(files: ServerTlsFiles, poll_every: Duration) -> Result<Self, TlsError> {
        let stamps = files.stamps();
        let config = files.build()?;
        Ok(ServerTls {
            inner: Arc::new(ServerInner {
                files,
                config: ArcSwap::from_pointee(config),
                stamps: Mutex::new(stamps),
                poll_every,
            }),
        })
    }

    /// The files this listener serves from.
    pub fn files(&self) -> &ServerTlsFiles {
        &self.inner.files
    }

    /// The configuration a new connection gets.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.inner.config.load_full()
    }

    /// Re-reads the files now. On an error the running configuration stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamps = self.inner.files.stamps();
        let config = self.inner.files.build()?;
        self.inner.config.store(Arc::new(config));
        *self.inner.stamps.lock().unwrap_or_else(|e| e.into_inner()) = stamps;
        Ok(())
    }

    /// [`reload`](Self::reload) for a configuration reload (SIGHUP): a failure is logged
    /// and the running configuration stays, like any refused part of a reload.
    pub fn reload_or_keep(&self) {
        match self.reload() {
            Ok(()) => tracing::info!(
                cert = %self.inner.files.cert.display(),
                "TLS certificate files re-read"
            ),
            Err(error) => tracing::warn!(
                %error,
                "TLS certificate files cannot be loaded; still serving the previous ones"
            ),
        }
    }

    /// Re-reads the files if any changed since the last load; `Ok(true)` if it swapped.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = self.inner.files.stamps();
        {
            let mut seen = self.inner.stamps.lock().unwrap_or_else(|e| e.into_inner());
            if *seen == now {
                return Ok(false);
            }
            // Remember the stamps even if the load fails, so a broken file is reported
            // once per change rather than on every poll.
            *seen = now;
        }
        let config = self.inner.files.build()?;
        self.inner.config.store(Arc::new(config));
        Ok(true)
    }

    /// Polls the files until `stop` turns true (the scaffold runs this while it serves).
    pub(crate) async fn watch(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.inner.poll_every) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
            match self.reload_if_changed() {
                Ok(true) => tracing::info!(
                    cert = %self.inner.files.cert.display(),
                    "TLS certificate files changed: new connections get the new ones"
                ),
                Ok(false) => {}
                Err(error) => tracing::warn!(
                    %error,
                    "TLS certificate files changed but cannot be loaded; still serving the previous ones"
                ),
            }
        }
    }
}

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
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots);
        let mut config = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .map_err(|e| TlsError::Pem {
                    path: key.clone(),
                    what: format!("does not go with {}: {e}", cert.display()),
                })?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(TlsError::Config(
                    "a client certificate needs both cert and key".into(),
                ));
            }
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
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?
            .to_owned();
        let tls = self.connector.connect(name, tcp).await?;
        Ok(Conn::Client(Box::new(tls)))
    }
}

/// A base URL (`http://host:port` or `https://host[:port]`, optionally with a path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Whether the link speaks TLS.
    pub tls: bool,
    /// `host:port`, what the TCP connection dials and the `Host` header carries.
    pub authority: String,
    /// The host alone (what the server certificate must name).
    pub host: String,
    /// The path after the authority (`/` when there is none).
    pub path: String,
}

impl Target {
    /// Parses `url`; the port defaults to 80 / 443.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("{url:?} must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?} must name a host (and no user)"));
        }
        // `[v6]:port`, `[v6]`, `host:port`, `host`.
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (inner, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url:?}: unclosed [ in the host"))?;
            (format!("[{inner}]"), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (authority.to_owned(), None),
            }
        };
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| format!("{url:?}: bad port {port:?}"))?,
            None if tls => 443,
            None => 80,
        };
        if host.is_empty() || host == "[]" {
            return Err(format!("{url:?} must name a host"));
        }
        Ok(Target {
            tls,
            authority: format!("{host}:{port}"),
            host,
            path: path.to_owned(),
        })
    }

    /// Connects: TCP, then the TLS handshake when the target speaks TLS (with `tls`, or
    /// the public roots when `tls` is `None`).
    pub async fn dial(&self, tls: Option<&ClientTls>) -> io::Result<Conn> {
        let tcp = TcpStream::connect(&self.authority).await?;
        // Best effort: a socket that refuses the option still works, just with Nagle.
        let _ = tcp.set_nodelay(true);
        if !self.tls {
            return Ok(Conn::Plain(tcp));
        }
        match tls {
            Some(tls) => tls.handshake(&self.host, tcp).await,
            None => ClientTls::public_roots().handshake(&self.host, tcp).await,
        }
    }
}

/// A connection: plain TCP, or TLS as server or as client.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Conn {
    /// Whether the link is encrypted.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Conn::Plain(_))
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Conn::Plain($s) => $e,
            Conn::Server($s) => $e,
            Conn::Client($s) => $e,
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_default_ports() {
        let t = Target::parse("https://ctl.example:8443/").unwrap();
        assert_eq!(
            (t.tls, t.authority.as_str(), t.host.as_str()),
            (true, "ctl.example:8443", "ctl.example")
        );
        let t = Target::parse("https://ctl.example/list?x=1").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("ctl.example:443", "/list?x=1")
        );
        let t = Target::parse("http://[::1]:80").unwrap();
        assert_eq!(
            (t.tls, t.authority.as_str(), t.host.as_str()),
            (false, "[::1]:80", "[::1]")
        );
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("https://user@x").is_err());
        assert!(Target::parse("https://x:port").is_err());
        assert!(Target::parse("https://").is_err());
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = ServerTls::load(ServerTlsFiles {
            cert: "/nonexistent/cert.pem".into(),
            key: "/nonexistent/key.pem".into(),
            client_ca: None,
        })
        .unwrap_err();
        assert!(
            error.to_string().contains("/nonexistent/cert.pem"),
            "{error}"
        );
    }
}
