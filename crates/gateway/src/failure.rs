//! Whom a failed request through an upstream proxy is blamed on, in one place.
//!
//! Many tenants share the proxies, so what one client's targets do must never take a
//! proxy out of rotation for everyone: only a [`Fault::Proxy`] counts toward the proxy's
//! failure threshold (the failure cooldown that skips it) and is retried on another
//! proxy. A [`Fault::Target`] is answered to the client (502, or 504 for a timeout, with
//! the gateway's refusal body; the SOCKS5 reply that says what happened) and counted in
//! `proxypool_gateway_target_failures_total{reason}`, never against the proxy or its
//! upstream's usage.
//!
//! The proxy's fault (it did not do its part of the job):
//! - its host name resolves to no address, or, for a fetched list, to an internal one
//!   (`crate::proxy_addresses`: it is not dialed at all);
//! - the TCP connection to the proxy times out, is refused or fails;
//! - the proxy refuses our credentials (HTTP 407, SOCKS5 authentication failure);
//! - the proxy sends no byte of its handshake answer (HTTP `CONNECT` or SOCKS5) within
//!   the handshake timeout: a proxy that does not speak is dead or overloaded;
//! - the proxy closes or resets the connection, or answers garbage, during its handshake;
//! - the proxy answers `CONNECT` with a status that is about itself (any refusal other
//!   than the ones below), or SOCKS5 "general failure" / "command not supported";
//! - a plain-HTTP request through an HTTP proxy whose connection closes before any
//!   answer: a working HTTP proxy answers a failed origin with a status of its own.
//!
//! The target's fault (the proxy did its part; every proxy would fail alike):
//! - HTTP `CONNECT` answered 502, 503 or 504: the proxy could not reach the target;
//!   403: the proxy's rules forbid the target;
//! - SOCKS5 replies "host unreachable", "network unreachable", "connection refused",
//!   "TTL expired", "not allowed by ruleset", "address type not supported";
//! - a SOCKS5 proxy that answered the greeting but not yet the connect request when the
//!   handshake timeout passed: it is still trying to reach the target;
//! - a plain-HTTP request whose answer does not come within the timeout once the proxy
//!   took it (an HTTP proxy waits for the origin before it answers; a SOCKS5 tunnel is
//!   already open to the origin);
//! - a plain-HTTP request over a SOCKS5 tunnel that fails (reset, closed): the tunnel
//!   was open to the target, so the target reset or closed it;
//! - an inspected (`https`) request once its tunnel is up: the TLS handshake with the
//!   origin failing (`target_tls_error`) or timing out, the request failing over it. A
//!   certificate that fails verification is neither's failure: a refusal of its own
//!   (`origin_certificate_invalid`), never retried (`crate::outbound::forward`).
//!
//! An origin's own answers (a 502 an HTTP proxy relays for a refusing origin, a ban
//! status) are answers, not failures: they go to the client as they are.

use crate::refusal::{TARGET_TIMEOUT, socks_reply};
use proxypool_proto::ProtoError;
use proxypool_proto::socks5::Reply;

/// Who failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The upstream proxy itself: counted against it, retried elsewhere.
    Proxy,
    /// The target behind it: answered to the client, never counted against the proxy.
    Target,
}

/// Every reason a [`Fault::Target`] failure carries (the metric's fixed label values).
pub(crate) const TARGET_REASONS: [&str; 6] = [
    "target_unreachable",
    "target_refused",
    TARGET_TIMEOUT,
    "target_not_allowed",
    "target_address_not_supported",
    TARGET_TLS_ERROR,
];

/// The TLS handshake with the origin failed, other than on its certificate, through a
/// tunnel that was up.
pub(crate) const TARGET_TLS_ERROR: &str = "target_tls_error";

/// Why a dial or a forwarded request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DialFailure {
    /// Metric label and refusal reason.
    pub reason: &'static str,
    /// The SOCKS5 reply for the client.
    pub socks: u8,
    pub fault: Fault,
}

impl DialFailure {
    pub(crate) const fn proxy(reason: &'static str) -> Self {
        Self {
            reason,
            socks: socks_reply::GENERAL_FAILURE,
            fault: Fault::Proxy,
        }
    }

    pub(crate) const fn target(reason: &'static str, socks: u8) -> Self {
        Self {
            reason,
            socks,
            fault: Fault::Target,
        }
    }

    /// The target did not answer in time (a 504 for HTTP clients).
    pub(crate) const fn target_timeout() -> Self {
        Self::target(TARGET_TIMEOUT, socks_reply::TTL_EXPIRED)
    }

    /// The target reset or closed the connection.
    pub(crate) const fn target_closed() -> Self {
        Self::target("target_refused", socks_reply::CONNECTION_REFUSED)
    }
}

/// Maps a handshake error to who is at fault and what to tell the client. `answered`:
/// whether the proxy had sent any byte of its handshake answer.
pub(crate) fn classify(error: &ProtoError, answered: bool) -> DialFailure {
    match error {
        ProtoError::Timeout(_) if answered => DialFailure::target_timeout(),
        ProtoError::Timeout(_) => DialFailure::proxy("proxy_handshake_timeout"),
        _ if error.is_auth_rejected() => DialFailure::proxy("proxy_auth_rejected"),
        ProtoError::Rejected { status: 502..=504 } => {
            DialFailure::target("target_unreachable", socks_reply::HOST_UNREACHABLE)
        }
        ProtoError::Rejected { status: 403 } => {
            DialFailure::target("target_not_allowed", socks_reply::NOT_ALLOWED)
        }
        ProtoError::Rejected { .. } => DialFailure::proxy("proxy_rejected"),
        ProtoError::SocksRejected { reply } => match reply {
            Reply::HostUnreachable => {
                DialFailure::target("target_unreachable", socks_reply::HOST_UNREACHABLE)
            }
            Reply::NetworkUnreachable => {
                DialFailure::target("target_unreachable", socks_reply::NETWORK_UNREACHABLE)
            }
            Reply::ConnectionRefused => {
                DialFailure::target("target_refused", socks_reply::CONNECTION_REFUSED)
            }
            Reply::TtlExpired => DialFailure::target_timeout(),
            Reply::NotAllowed => {
                DialFailure::target("target_not_allowed", socks_reply::NOT_ALLOWED)
            }
            Reply::AddressTypeNotSupported => DialFailure::target(
                "target_address_not_supported",
                socks_reply::ADDRESS_NOT_SUPPORTED,
            ),
            _ => DialFailure::proxy("proxy_rejected"),
        },
        ProtoError::Malformed { .. } => DialFailure::proxy("proxy_protocol_error"),
        ProtoError::Io(_) | ProtoError::AuthRejected => DialFailure::proxy("proxy_io_error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn blames_the_proxy_or_the_target() {
        let refused = classify(
            &ProtoError::SocksRejected {
                reply: Reply::ConnectionRefused,
            },
            true,
        );
        assert_eq!(refused.fault, Fault::Target);
        assert_eq!(refused.socks, socks_reply::CONNECTION_REFUSED);
        let fault = |error: ProtoError, answered| classify(&error, answered).fault;
        assert_eq!(
            fault(ProtoError::Rejected { status: 407 }, true),
            Fault::Proxy
        );
        for status in [502, 503, 504] {
            assert_eq!(fault(ProtoError::Rejected { status }, true), Fault::Target);
        }
        for reply in [
            Reply::HostUnreachable,
            Reply::NetworkUnreachable,
            Reply::TtlExpired,
        ] {
            assert_eq!(
                fault(ProtoError::SocksRejected { reply }, true),
                Fault::Target
            );
        }
        let timeout = || ProtoError::Timeout(Duration::from_secs(1));
        assert_eq!(fault(timeout(), false), Fault::Proxy);
        assert_eq!(fault(timeout(), true), Fault::Target);
        assert_eq!(fault(ProtoError::AuthRejected, true), Fault::Proxy);
        // Every target reason is a fixed label value.
        for error in [
            ProtoError::Rejected { status: 502 },
            ProtoError::Rejected { status: 403 },
            timeout(),
        ] {
            let failure = classify(&error, true);
            assert!(TARGET_REASONS.contains(&failure.reason), "{failure:?}");
        }
        assert!(TARGET_REASONS.contains(&DialFailure::target_closed().reason));
    }
}
