//! [`ServerTls`]: a listener's certificate and key (and optional client CA) from PEM
//! files, reloaded when the files change; new connections take the current
//! configuration, open ones keep theirs.

use super::error::TlsError;
use super::load::{load_certs, load_key, load_roots, provider};
use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How often a listener looks at its certificate files by default.
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);

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

#[cfg(test)]
mod tests {
    use super::*;

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
