//! [`ControllerError`]: why a controller could not start.

use crate::config::ConfigError;
use crate::store::StoreOpenError;
use std::net::SocketAddr;

/// Why a controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreOpenError),
    #[error("control.tls: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
