//! TLS inspection: the gateway ends an opted-in client's `CONNECT` itself, with a leaf
//! certificate for the requested host minted from the operator's CA, and serves HTTP/1.1
//! inside, so each https request is forwarded like a plain-http one (through a routed
//! proxy, TLS to the origin: [`crate::outbound::forward`] with its https scheme) and gets
//! what plain http gets: ban statuses, retries on another proxy, per-domain cooldowns,
//! the `X-Proxypool-*` headers and ticket, an access-log line.
//!
//! A `CONNECT` is inspected ([`wanted`]) when the gateway has a CA (`[gateway.inspection]`),
//! the client's `inspection` is `on` (or `allowed` and its username carries `-inspect`;
//! `off` with `-inspect` was refused at authentication), and the host is not on the bypass
//! list. Everything else is a tunnel as before.
//!
//! | file | what it is for |
//! | --- | --- |
//! | `authority` | the CA, the leaves it mints, their rustls settings |
//! | `cache` | the bounded leaf cache (least recently used first; one mint per host) |
//! | `intercept` | the `CONNECT`'s end: the client's TLS handshake, the inner HTTP/1.1 server, each inner request's admission |
//! | `metrics` | the inspection's counters |
//!
//! Layering: inbound hands an intercepted `CONNECT` over (its connection's slots, shield and
//! its own admission and refusal steps as plain functions), so this module imports
//! nothing of inbound or the state above it; `state` holds the [`Authority`] in force.

pub(crate) mod authority;
mod cache;
pub(crate) mod intercept;
pub(crate) mod metrics;

pub(crate) use authority::Authority;
pub(crate) use intercept::{Handover, intercept};

use crate::config::{ConfigError, GatewayConfig};
use crate::routing::request::Authenticated;
use proxypool_config::gateway::inspection::canonical_host;
use proxypool_core::control::Inspection;
use proxypool_proto::TargetAddr;
use std::sync::Arc;

/// Loads the CA of `config`'s `[gateway.inspection]` as a start would, for `check-config`:
/// a key that does not belong to the certificate, or a certificate that cannot issue,
/// is an error naming the key (never quoting a file).
pub fn check_ca(config: &GatewayConfig) -> Result<(), ConfigError> {
    match &config.inspection {
        Some(inspection) => Authority::load(inspection).map(|_| ()).map_err(ConfigError),
        None => Ok(()),
    }
}

/// The authority to inspect `target`'s tunnel with, or `None` for a plain tunnel (no CA
/// configured, the client not inspected, or the host bypassed).
pub(crate) fn wanted(
    authority: Option<Arc<Authority>>,
    config: &GatewayConfig,
    auth: &Authenticated,
    target: &TargetAddr,
) -> Option<Arc<Authority>> {
    let asked = match auth.client.inspection {
        Inspection::Off => false,
        Inspection::On => true,
        Inspection::Allowed => auth.selectors.inspect,
    };
    if !asked {
        return None;
    }
    let authority = authority?;
    let settings = config.inspection.as_ref()?;
    // The canonical host: `Bank.Example.` is bypassed as `bank.example` is.
    if settings.bypassed(&canonical_host(&target.host())) {
        authority.metrics().bypassed.increment(1);
        return None;
    }
    Some(authority)
}
