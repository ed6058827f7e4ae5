//! [`OriginTls`]: how the gateway verifies an origin when it speaks TLS to the origin
//! itself (the inner requests of an inspected `CONNECT`, forwarded with the `https`
//! scheme of `crate::outbound::forward`): against `[gateway.inspection] origin_ca` when
//! it is set, else the public roots (webpki's bundle), offering ALPN `http/1.1` only.
//!
//! Built once per configuration (at start and on each reload, which re-reads the bundle),
//! never per request. Session resumption is on, but kept per exit: each upstream proxy
//! has its own session cache, so a ticket an origin issued to one exit is never shown
//! from another. A ticket shared between exits would let the origin link the requests of
//! different exits as one client's, which is what rotating over the pool is meant to
//! prevent. Resuming through the same exit links nothing the origin does not already see
//! (one address, one kept-alive connection) and saves a full handshake.
//!
//! A certificate that fails verification is never passed over: the handshake fails and
//! [`certificate_problem`] says why, so the client gets a clear refusal rather than a
//! silent downgrade.

use proxypool_core::{LockExt, ProxyId};
use proxypool_edge::{ClientTls, ClientTlsFiles};
use proxypool_proto::TargetAddr;
use rustls::client::Resumption;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Exits with a session cache of their own; beyond it one is dropped (its sessions are
/// only a saving, never needed).
const MAX_EXITS: usize = 4096;

/// Sessions kept per exit (one per origin it reached lately, at most).
const SESSIONS_PER_EXIT: usize = 16;

/// The verification of origins; cheap to clone (one shared configuration).
#[derive(Clone)]
pub(crate) struct OriginTls {
    inner: Arc<Inner>,
}

struct Inner {
    /// The verifier, ALPN and protocol versions every exit's connector starts from.
    base: Arc<ClientConfig>,
    /// Where the trust came from, for logs: the bundle's path, or `None` for the roots.
    source: Option<PathBuf>,
    /// One connector per exit, each with its own session cache.
    by_exit: Mutex<HashMap<ProxyId, TlsConnector>>,
}

impl std::fmt::Debug for OriginTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginTls")
            .field("origin_ca", &self.origin_ca())
            .finish_non_exhaustive()
    }
}

impl OriginTls {
    /// Trusts the PEM bundle at `origin_ca`, or the public roots for `None`. A bundle
    /// that cannot be read or holds no certificate is an error naming the file.
    pub(crate) fn load(origin_ca: Option<&Path>) -> Result<Self, String> {
        let files = ClientTlsFiles {
            ca: origin_ca.map(Path::to_path_buf),
            cert: None,
            key: None,
        };
        let client = ClientTls::load(&files).map_err(|error| match origin_ca {
            Some(path) => format!("origin_ca {}: {error}", path.display()),
            None => format!("the public roots: {error}"),
        })?;
        Ok(OriginTls {
            inner: Arc::new(Inner {
                base: client.config(),
                source: files.ca,
                by_exit: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The bundle trusted, or `None` for the public roots.
    pub(crate) fn origin_ca(&self) -> Option<&Path> {
        self.inner.source.as_deref()
    }

    /// TLS to `target` over `io` (a tunnel through `exit`): the certificate must be valid
    /// for the target's name (or its IP, for a numeric target). Errors are rustls's, in
    /// an `io::Error`: [`certificate_problem`] tells a refused certificate from the rest.
    pub(crate) async fn connect<S>(
        &self,
        exit: &ProxyId,
        target: &TargetAddr,
        io: S,
    ) -> io::Result<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let name = ServerName::try_from(target.host())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a TLS server name"))?;
        self.connector(exit).connect(name, io).await
    }

    /// The connector of `exit`, made on its first use.
    fn connector(&self, exit: &ProxyId) -> TlsConnector {
        let mut by_exit = self.inner.by_exit.lock_or_recover();
        if let Some(connector) = by_exit.get(exit) {
            return connector.clone();
        }
        if by_exit.len() >= MAX_EXITS
            && let Some(dropped) = by_exit.keys().next().cloned()
        {
            by_exit.remove(&dropped);
        }
        let mut config = ClientConfig::clone(&self.inner.base);
        config.resumption = Resumption::in_memory_sessions(SESSIONS_PER_EXIT);
        let connector = TlsConnector::from(Arc::new(config));
        by_exit.insert(exit.clone(), connector.clone());
        connector
    }

    /// Exits that hold a session cache now.
    #[cfg(test)]
    fn exits(&self) -> usize {
        self.inner.by_exit.lock_or_recover().len()
    }
}

/// Why the origin's certificate was refused, when `error` (a failed handshake) is that:
/// a short phrase for the client's refusal. `None` for every other failure (a reset, an
/// alert from the origin, a protocol mismatch).
pub(crate) fn certificate_problem(error: &io::Error) -> Option<&'static str> {
    let rustls::Error::InvalidCertificate(problem) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())?
    else {
        return None;
    };
    Some(match problem {
        CertificateError::UnknownIssuer => "unknown issuer",
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "expired",
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "not valid yet"
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "not valid for the name"
        }
        CertificateError::Revoked => "revoked",
        CertificateError::BadSignature => "bad signature",
        _ => "rejected",
    })
}

#[cfg(test)]
#[path = "origin_tls/tests.rs"]
mod tests;
