//! [`TlsError`]: why TLS settings could not be loaded.

use std::io;
use std::path::PathBuf;

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
