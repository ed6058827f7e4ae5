//! [`Refusal`]: every way the gateway says no to a client, with the HTTP status, the
//! `X-Proxypool-Error` code and the SOCKS5 reply each one maps to.
//!
//! One table for both listeners keeps HTTP and SOCKS5 clients told the same thing.

use std::fmt;

/// The response header carrying [`Refusal::code`].
pub const ERROR_HEADER: &str = "x-proxypool-error";

/// SOCKS5 reply codes (RFC 1928 §6) the gateway sends.
pub(crate) mod socks_reply {
    pub(crate) const GENERAL_FAILURE: u8 = 0x01;
    pub(crate) const NOT_ALLOWED: u8 = 0x02;
    pub(crate) const NETWORK_UNREACHABLE: u8 = 0x03;
    pub(crate) const HOST_UNREACHABLE: u8 = 0x04;
    pub(crate) const CONNECTION_REFUSED: u8 = 0x05;
    pub(crate) const TTL_EXPIRED: u8 = 0x06;
    pub(crate) const ADDRESS_NOT_SUPPORTED: u8 = 0x08;
}

/// Why a request was refused. Messages never contain a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Malformed request (bad target, unsupported method form).
    BadRequest(String),
    /// Missing or wrong proxy credentials.
    AuthRequired,
    /// The username's selectors are malformed or unknown.
    BadSelector(String),
    /// The client may not do this (source IP, upstream or region not allowed).
    Forbidden(String),
    /// The destination policy refuses the target (address range or port); nothing was
    /// dialed.
    DestinationDenied(String),
    /// A limiter denied the request.
    RateLimited { retry_after_ms: u64, lockout: bool },
    /// The client already holds its maximum of concurrent connections.
    TooManyConnections,
    /// No proxy in the snapshot matches the selectors with free capacity (while proxies
    /// that match have live leases, or none matches at all).
    NoEligibleProxy,
    /// The snapshot has no proxy with a live lease (every lease lapsed unrenewed, the store
    /// disowned them, or the controller assigned none), or none of those the selectors
    /// match has one: the gateway cannot route anything, whatever the selectors say.
    NoLeasedProxies,
    /// The snapshot is older than `max_staleness_ms` and the controller is unreachable
    /// (or no snapshot arrived yet).
    Stale,
    /// Every proxy that would serve the request is cooling down for the target's domain
    /// (the site banned them); `Retry-After` says when the first cooldown ends.
    DomainCoolingDown { retry_after_ms: u64 },
    /// Too many sticky sessions are remembered already.
    SessionTableFull,
    /// Every upstream tried failed; the reason is the last failure's.
    UpstreamFailed { reason: &'static str, socks: u8 },
    /// The origin's TLS certificate failed verification against the gateway's origin
    /// trust (`[gateway.inspection] origin_ca`, else the public roots) when the gateway
    /// spoke TLS to it itself (an inspected `CONNECT`); `why` says how (`"unknown
    /// issuer"`, `"expired"`, ...). Never downgraded or passed over; not blamed on the
    /// proxy and not retried through another one, since every exit reaches the same
    /// origin (`crate::outbound::forward` documents the rule).
    OriginCertificateInvalid { why: &'static str },
    /// The gateway is shutting down or otherwise cannot serve.
    Unavailable,
    /// The fleet member that owns the request's sticky key did not answer, nor did the
    /// next one (`crate::inbound::relay`).
    FleetUnavailable,
}

/// The reason of an upstream failure that is a target's timeout: answered 504, not 502.
pub(crate) const TARGET_TIMEOUT: &str = "target_timeout";

impl Refusal {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest(_) | Refusal::BadSelector(_) => 400,
            Refusal::AuthRequired => 407,
            Refusal::Forbidden(_) | Refusal::DestinationDenied(_) => 403,
            Refusal::RateLimited { .. } | Refusal::TooManyConnections => 429,
            Refusal::UpstreamFailed {
                reason: TARGET_TIMEOUT,
                ..
            } => 504,
            Refusal::UpstreamFailed { .. } | Refusal::OriginCertificateInvalid { .. } => 502,
            Refusal::NoEligibleProxy
            | Refusal::NoLeasedProxies
            | Refusal::Stale
            | Refusal::SessionTableFull
            | Refusal::DomainCoolingDown { .. }
            | Refusal::Unavailable
            | Refusal::FleetUnavailable => 503,
        }
    }

    /// Every code [`Refusal::code`] can return, once; metrics register one counter each.
    pub const CODES: [&'static str; 17] = [
        "bad_request",
        "auth_required",
        "bad_selector",
        "forbidden",
        "rate_limited",
        "locked_out",
        "too_many_connections",
        "no_eligible_proxy",
        "gateway_stale",
        "session_table_full",
        "upstream_failed",
        "unavailable",
        "destination_denied",
        "no_leased_proxies",
        "domain_cooling_down",
        "origin_certificate_invalid",
        "fleet_unavailable",
    ];

    /// The stable code in `X-Proxypool-Error` (and in metrics).
    pub fn code(&self) -> &'static str {
        Self::CODES[self.code_index()]
    }

    /// The position of [`Refusal::code`] in [`Refusal::CODES`].
    pub(crate) fn code_index(&self) -> usize {
        match self {
            Refusal::BadRequest(_) => 0,
            Refusal::AuthRequired => 1,
            Refusal::BadSelector(_) => 2,
            Refusal::Forbidden(_) => 3,
            Refusal::RateLimited { lockout: false, .. } => 4,
            Refusal::RateLimited { lockout: true, .. } => 5,
            Refusal::TooManyConnections => 6,
            Refusal::NoEligibleProxy => 7,
            Refusal::Stale => 8,
            Refusal::SessionTableFull => 9,
            Refusal::UpstreamFailed { .. } => 10,
            Refusal::Unavailable => 11,
            Refusal::DestinationDenied(_) => 12,
            Refusal::NoLeasedProxies => 13,
            Refusal::DomainCoolingDown { .. } => 14,
            Refusal::OriginCertificateInvalid { .. } => 15,
            Refusal::FleetUnavailable => 16,
        }
    }

    /// `Retry-After` seconds, for the refusals that have one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Refusal::RateLimited { retry_after_ms, .. }
            | Refusal::DomainCoolingDown { retry_after_ms } => {
                Some(retry_after_ms.div_ceil(1000).max(1))
            }
            Refusal::TooManyConnections
            | Refusal::NoEligibleProxy
            | Refusal::NoLeasedProxies
            | Refusal::Stale
            | Refusal::Unavailable
            | Refusal::FleetUnavailable => Some(1),
            _ => None,
        }
    }

    /// The SOCKS5 reply code that fits.
    pub fn socks_reply(&self) -> u8 {
        match self {
            Refusal::BadRequest(_) => socks_reply::ADDRESS_NOT_SUPPORTED,
            Refusal::AuthRequired
            | Refusal::BadSelector(_)
            | Refusal::Forbidden(_)
            | Refusal::DestinationDenied(_)
            | Refusal::RateLimited { .. }
            | Refusal::TooManyConnections => socks_reply::NOT_ALLOWED,
            Refusal::UpstreamFailed { socks, .. } => *socks,
            // No route out at all: the gateway has no upstream it may use.
            Refusal::NoLeasedProxies => socks_reply::NETWORK_UNREACHABLE,
            Refusal::NoEligibleProxy
            | Refusal::Stale
            | Refusal::SessionTableFull
            | Refusal::DomainCoolingDown { .. }
            | Refusal::OriginCertificateInvalid { .. }
            | Refusal::Unavailable
            | Refusal::FleetUnavailable => socks_reply::GENERAL_FAILURE,
        }
    }

    /// The SOCKS5 reply for a refusal known only by its `X-Proxypool-Error` code and HTTP
    /// status (another fleet member's answer): the reply [`Refusal::socks_reply`] gives
    /// for that code. An upstream failure's own reply is not in its code: a 504 (the
    /// target's timeout) is TTL expired, any other a general failure; an unknown code is
    /// a general failure.
    pub(crate) fn socks_reply_of(code: &str, status: u16) -> u8 {
        match code {
            "bad_request" => socks_reply::ADDRESS_NOT_SUPPORTED,
            "auth_required"
            | "bad_selector"
            | "forbidden"
            | "destination_denied"
            | "rate_limited"
            | "locked_out"
            | "too_many_connections" => socks_reply::NOT_ALLOWED,
            "no_leased_proxies" => socks_reply::NETWORK_UNREACHABLE,
            "upstream_failed" if status == 504 => socks_reply::TTL_EXPIRED,
            _ => socks_reply::GENERAL_FAILURE,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BadRequest(message) => write!(f, "bad request: {message}"),
            Refusal::AuthRequired => f.write_str("proxy authentication required"),
            Refusal::BadSelector(message) => write!(f, "bad username selector: {message}"),
            Refusal::Forbidden(message) => write!(f, "forbidden: {message}"),
            Refusal::DestinationDenied(message) => write!(f, "destination denied: {message}"),
            Refusal::RateLimited {
                retry_after_ms,
                lockout,
            } => write!(
                f,
                "{} retry after {retry_after_ms} ms",
                if *lockout {
                    "locked out after repeated rate-limit violations;"
                } else {
                    "rate limited;"
                }
            ),
            Refusal::TooManyConnections => {
                f.write_str("too many concurrent connections for this client")
            }
            Refusal::NoEligibleProxy => {
                f.write_str("no upstream proxy matches the selectors with free capacity")
            }
            Refusal::NoLeasedProxies => f.write_str(
                "no upstream proxy has a live lease on this gateway (the controller or its store is unreachable, or assigned none); refusing new traffic",
            ),
            Refusal::Stale => f.write_str(
                "gateway snapshot is stale (controller unreachable); refusing new traffic",
            ),
            Refusal::SessionTableFull => f.write_str("too many sticky sessions; retry later"),
            Refusal::DomainCoolingDown { retry_after_ms } => write!(
                f,
                "every upstream proxy for this request is cooling down for the target's domain (banned there); the first is usable again in {retry_after_ms} ms"
            ),
            Refusal::UpstreamFailed { reason, .. } if reason.starts_with("target_") => {
                write!(
                    f,
                    "the target failed behind the upstream proxy (not the proxy's fault): {reason}"
                )
            }
            Refusal::UpstreamFailed { reason, .. } => {
                write!(f, "upstream proxy failed: {reason}")
            }
            Refusal::OriginCertificateInvalid { why } => write!(
                f,
                "the origin's TLS certificate failed verification ({why}) against the gateway's origin trust; not retried through another proxy"
            ),
            Refusal::Unavailable => f.write_str("gateway unavailable"),
            Refusal::FleetUnavailable => f.write_str(
                "the fleet member that keeps this session did not answer, nor did the next one; retry shortly",
            ),
        }
    }
}

#[cfg(test)]
impl Refusal {
    /// One refusal of every kind (both SOCKS5 flavours of an upstream failure), for
    /// tests that must cover each code.
    pub(crate) fn examples() -> Vec<Refusal> {
        vec![
            Refusal::BadRequest("x".into()),
            Refusal::AuthRequired,
            Refusal::BadSelector("x".into()),
            Refusal::Forbidden("x".into()),
            Refusal::DestinationDenied("x".into()),
            Refusal::RateLimited {
                retry_after_ms: 1,
                lockout: false,
            },
            Refusal::RateLimited {
                retry_after_ms: 1,
                lockout: true,
            },
            Refusal::TooManyConnections,
            Refusal::NoEligibleProxy,
            Refusal::NoLeasedProxies,
            Refusal::Stale,
            Refusal::SessionTableFull,
            Refusal::DomainCoolingDown {
                retry_after_ms: 1_000,
            },
            Refusal::UpstreamFailed {
                reason: "x",
                socks: socks_reply::GENERAL_FAILURE,
            },
            Refusal::OriginCertificateInvalid { why: "expired" },
            Refusal::Unavailable,
            Refusal::FleetUnavailable,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_each_refusal_once() {
        assert_eq!(Refusal::Stale.status(), 503);
        assert_eq!(Refusal::Stale.code(), "gateway_stale");
        assert_eq!(Refusal::AuthRequired.status(), 407);
        let limited = Refusal::RateLimited {
            retry_after_ms: 1250,
            lockout: false,
        };
        assert_eq!(limited.status(), 429);
        assert_eq!(limited.retry_after_secs(), Some(2));
        assert_eq!(limited.socks_reply(), socks_reply::NOT_ALLOWED);
        let failed = Refusal::UpstreamFailed {
            reason: "connect_refused",
            socks: socks_reply::CONNECTION_REFUSED,
        };
        assert_eq!(failed.status(), 502);
        assert_eq!(failed.socks_reply(), socks_reply::CONNECTION_REFUSED);
        let denied = Refusal::DestinationDenied("127.0.0.1 is a loopback address".into());
        assert_eq!(denied.status(), 403);
        assert_eq!(denied.code(), "destination_denied");
        assert_eq!(denied.socks_reply(), socks_reply::NOT_ALLOWED);
        assert_eq!(denied.retry_after_secs(), None);
        // An outage is not the selectors' fault: its own code and reply.
        let unleased = Refusal::NoLeasedProxies;
        assert_eq!(
            (unleased.status(), unleased.code()),
            (503, "no_leased_proxies")
        );
        assert_eq!(unleased.socks_reply(), socks_reply::NETWORK_UNREACHABLE);
        assert_ne!(unleased.code(), Refusal::NoEligibleProxy.code());
        assert_eq!(unleased.retry_after_secs(), Some(1));
        // An origin that fails verification: its own code, a 502, no retry hint.
        let certificate = Refusal::OriginCertificateInvalid {
            why: "unknown issuer",
        };
        assert_eq!(
            (certificate.status(), certificate.code()),
            (502, "origin_certificate_invalid")
        );
        assert_eq!(certificate.retry_after_secs(), None);
        assert!(certificate.to_string().contains("unknown issuer"));
        assert_eq!(Refusal::CODES[certificate.code_index()], certificate.code());
        // A fleet that cannot reach a key's owners: a short retry, never a hang.
        let fleet = Refusal::FleetUnavailable;
        assert_eq!((fleet.status(), fleet.code()), (503, "fleet_unavailable"));
        assert_eq!(fleet.retry_after_secs(), Some(1));
        assert_eq!(fleet.socks_reply(), socks_reply::GENERAL_FAILURE);
    }

    #[test]
    fn another_members_refusal_code_maps_to_the_same_socks_reply() {
        let mut refusals = Refusal::examples();
        refusals.push(Refusal::UpstreamFailed {
            reason: TARGET_TIMEOUT,
            socks: socks_reply::TTL_EXPIRED,
        });
        for refusal in refusals {
            assert_eq!(
                Refusal::socks_reply_of(refusal.code(), refusal.status()),
                refusal.socks_reply(),
                "{refusal:?}"
            );
        }
        assert_eq!(
            Refusal::socks_reply_of("no_such_code", 500),
            socks_reply::GENERAL_FAILURE
        );
    }
}
