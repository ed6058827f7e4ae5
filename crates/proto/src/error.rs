//! The one error type of the wire protocols.
//!
//! The variants are the distinctions a caller acts on: the transport failed ([`Io`]), the
//! peer spoke something that is not the protocol ([`Malformed`]), credentials were refused
//! ([`AuthRejected`]), the peer understood us and said no ([`Rejected`],
//! [`SocksRejected`]), or the caller's deadline passed ([`Timeout`]). The gateway maps
//! these to 502/407/SOCKS reply codes, the checker to a health outcome.
//!
//! [`Io`]: ProtoError::Io
//! [`Malformed`]: ProtoError::Malformed
//! [`AuthRejected`]: ProtoError::AuthRejected
//! [`Rejected`]: ProtoError::Rejected
//! [`SocksRejected`]: ProtoError::SocksRejected
//! [`Timeout`]: ProtoError::Timeout

use std::io;
use std::time::Duration;

use crate::socks5::Reply;

/// Why a protocol exchange failed. Never carries credentials.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The transport failed (reset, refused, EOF in the middle of a message, ...).
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer sent bytes that are not valid for the protocol step, or a message bigger
    /// than the cap; or the caller passed an argument the protocol cannot carry.
    #[error("malformed {protocol} message: {reason}")]
    Malformed {
        /// `"socks5"`, `"http"` or `"target"`.
        protocol: &'static str,
        /// What was wrong, fit for logs (never contains secrets).
        reason: String,
    },
    /// Authentication failed: a SOCKS5 server refused our username/password or offered no
    /// method we can use; or, server side, the client offered no acceptable method or its
    /// credentials were refused.
    #[error("authentication rejected")]
    AuthRejected,
    /// An HTTP proxy answered `CONNECT` with a non-2xx status (407 included: see
    /// [`ProtoError::is_auth_rejected`]).
    #[error("proxy rejected the request with HTTP status {status}")]
    Rejected {
        /// The status code of the response.
        status: u16,
    },
    /// A SOCKS5 server answered the request with a reply other than `Succeeded`.
    #[error("socks5 server rejected the request: {reply}")]
    SocksRejected {
        /// The reply code the server sent.
        reply: Reply,
    },
    /// The deadline given to [`crate::with_timeout`] passed.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}

impl ProtoError {
    pub(crate) fn malformed(protocol: &'static str, reason: impl Into<String>) -> Self {
        Self::Malformed {
            protocol,
            reason: reason.into(),
        }
    }

    /// True when the peer refused our credentials, in either protocol: SOCKS5 auth failure
    /// or an HTTP `407 Proxy Authentication Required`.
    pub fn is_auth_rejected(&self) -> bool {
        matches!(self, Self::AuthRejected | Self::Rejected { status: 407 })
    }

    /// True when a deadline passed: ours ([`ProtoError::Timeout`]) or the OS's.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Timeout(_) => true,
            Self::Io(e) => e.kind() == io::ErrorKind::TimedOut,
            _ => false,
        }
    }
}
