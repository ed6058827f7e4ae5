//! `[[upstreams]]`: the vendors proxies are fetched from, with their lifetimes, sizes and
//! credentials, and their checks. Where the proxies come from is [`crate::provider`], how
//! the checker proves one works is [`crate::health`].

use crate::check::Check;
use crate::duration::Millis;
use crate::health::HealthConfig;
use crate::provider::ProviderConfig;
use crate::secret::SecretRef;
use proxypool_core::{Label, Protocol, UpstreamId};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// One vendor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    pub id: UpstreamId,
    /// Lifetime of a proxy the vendor gives no expiry for.
    pub ttl: Millis,
    /// Nothing is handed out or routed within this margin of a proxy's expiry.
    #[serde(default)]
    pub safety_margin: Millis,
    /// Hard cap on this upstream's un-extracted inventory.
    pub max_size: u64,
    /// Concurrent gateway sessions per proxy (a vendor's entry may override it).
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u32,
    #[serde(default)]
    pub defaults: UpstreamDefaults,
    /// Credentials for proxies the vendor lists without their own.
    #[serde(default)]
    pub credentials: Option<CredentialsConfig>,
    pub provider: ProviderConfig,
    #[serde(default)]
    pub health: HealthConfig,
    /// How its `https` proxies are reached (unset: TLS against the public roots, under
    /// each proxy's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_tls: Option<crate::tls::ProxyTlsConfig>,
}

fn default_max_sessions() -> u32 {
    16
}

/// Values for what a vendor's entry leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamDefaults {
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
    #[serde(default)]
    pub region: Option<Label>,
    #[serde(default)]
    pub carrier: Option<Label>,
}

fn default_protocol() -> Protocol {
    Protocol::Http
}

impl Default for UpstreamDefaults {
    fn default() -> Self {
        UpstreamDefaults {
            protocol: default_protocol(),
            region: None,
            carrier: None,
        }
    }
}

/// A username and a password reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    pub username: String,
    /// Resolved to the password itself: the gateway and the checker send it.
    pub password: SecretRef,
}

/// Checks every `[[upstreams]]` entry (its provider and health checks included) and
/// resolves its credentials; returns the upstream ids, which clients may name.
pub(crate) fn validate_upstreams(
    c: &mut Check<'_>,
    upstreams: &mut [UpstreamConfig],
    check_timeout: Millis,
) -> HashSet<UpstreamId> {
    let mut ids = HashSet::new();
    for (i, upstream) in upstreams.iter_mut().enumerate() {
        let path = format!("upstreams[{i}]");
        if !ids.insert(upstream.id.clone()) {
            c.at(format!("{path}.id"), "is used by another upstream");
        }
        c.duration(
            &format!("{path}.ttl"),
            upstream.ttl,
            Millis(1_000),
            Millis(proxypool_core::upsert::MAX_TTL_MS),
        );
        c.require(
            upstream.safety_margin < upstream.ttl,
            format!("{path}.safety_margin"),
            "must be shorter than ttl",
        );
        c.require(
            upstream.max_size >= 1,
            format!("{path}.max_size"),
            "must be at least 1",
        );
        c.require(
            upstream.max_sessions >= 1,
            format!("{path}.max_sessions"),
            "must be at least 1",
        );
        if let Some(creds) = &mut upstream.credentials {
            let cpath = format!("{path}.credentials");
            c.require(
                !creds.username.is_empty() && !creds.username.chars().any(char::is_control),
                format!("{cpath}.username"),
                "must be a non-empty name without control characters",
            );
            c.resolve_plain(&format!("{cpath}.password"), &mut creds.password);
        }
        crate::provider::validate(
            c,
            &format!("{path}.provider"),
            &mut upstream.provider,
            upstream.credentials.is_some(),
        );
        crate::health::validate(
            c,
            &format!("{path}.health"),
            &mut upstream.health,
            check_timeout,
        );
        if let Some(tls) = &mut upstream.proxy_tls {
            crate::tls::check_proxy(c, &format!("{path}.proxy_tls"), tls);
        }
    }
    ids
}
