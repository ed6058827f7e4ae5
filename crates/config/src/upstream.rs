//! `[[upstreams]]`: the vendors proxies are fetched from, how their entries are read and
//! how the checker proves a proxy works.

use crate::duration::Millis;
use crate::secret::SecretRef;
use crate::target::TargetUrl;
use proxypool_core::{Label, Protocol, UpstreamId};
use serde::{Deserialize, Serialize};

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

/// Where a vendor's proxies come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// `http` only: the list URL (`https://`; `http://` only with `allow_plaintext`).
    #[serde(default)]
    pub url: Option<String>,
    /// `http` only: allow an `http://` list URL. On-path attackers then see the
    /// `authorization` and can add entries, so only for a vendor on the same host or a
    /// trusted network (`dev` and the simulated vendor); a warning is logged at start.
    #[serde(default)]
    pub allow_plaintext: bool,
    /// `http` only, for an `https://` list: the CA bundle the vendor must chain to (unset =
    /// the public roots); a client certificate if the vendor wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// `http` only: where a listed entry may point to get the upstream's `credentials`:
    /// domain suffixes (`vendor.example` matches it and `*.vendor.example`) and CIDR blocks
    /// (`203.0.113.0/24`). An entry with no credentials of its own on a host outside them
    /// is refused (counted in the upstream's status), so a tampered list cannot collect
    /// the vendor account's credentials. Required when `credentials` is set.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `http` only: accept entries on loopback, private (RFC 1918, unique-local), CGNAT or
    /// link-local addresses. Off: such entries are refused and counted. `dev` and tests
    /// with the simulated vendor (which lists loopback proxies) set it.
    #[serde(default)]
    pub allow_private_hosts: bool,
    /// `http` only: how the list is written.
    #[serde(default)]
    pub format: Option<ListFormat>,
    /// `static` only: `scheme://host:port` entries (credentials come from the upstream's
    /// `credentials`, never inline).
    #[serde(default)]
    pub proxies: Vec<String>,
    /// How often to fetch (or, for `static`, to refresh the lifetimes).
    #[serde(default = "default_fetch_interval")]
    pub interval: Millis,
    /// Up to this much is added to each interval at random, so vendors are not polled in
    /// lock step.
    #[serde(default)]
    pub jitter: Millis,
    #[serde(default = "default_fetch_timeout")]
    pub timeout: Millis,
    /// Largest response body accepted; a larger one fails the fetch whole.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// `http` only: the `Authorization` header value, by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<SecretRef>,
}

fn default_fetch_interval() -> Millis {
    Millis::from_secs(30)
}

fn default_fetch_timeout() -> Millis {
    Millis::from_secs(10)
}

fn default_max_bytes() -> usize {
    4 * 1024 * 1024
}

/// `http` (a vendor list endpoint) or `static` (a fixed list in this file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Http,
    Static,
}

/// How a vendor writes its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListFormat {
    /// One proxy per line: `[scheme://]host:port[:user:pass]` or
    /// `scheme://user:pass@host:port`.
    Text,
    /// A JSON array of objects (or `{"proxies": [...]}` / `{"data": [...]}`).
    Json,
}

/// How the checker proves a proxy works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Plain-HTTP URLs fetched through the proxy; every one must answer as expected.
    pub targets: Vec<CheckTarget>,
    /// An AVAILABLE proxy is checked again when its last check is this old.
    pub interval: Millis,
    /// Consecutive failures that make a proxy UNHEALTHY (fewer make it SUSPECT).
    pub unhealthy_after: u32,
    /// A proxy slower than this fails its check as `slow` (unset: only the timeout).
    pub max_latency: Option<Millis>,
    /// How HTTP proxies are checked: `absolute` (absolute-form request) or `connect`
    /// (CONNECT tunnel, then the request). HTTPS-labelled proxies always use `connect`.
    pub via: HttpCheckMode,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            targets: Vec::new(),
            interval: Millis::from_secs(30),
            unhealthy_after: 3,
            max_latency: None,
            via: HttpCheckMode::Absolute,
        }
    }
}

/// See [`HealthConfig::via`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpCheckMode {
    Absolute,
    Connect,
}

/// One URL a healthy proxy must reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckTarget {
    pub url: String,
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    #[serde(skip)]
    pub parsed: Option<TargetUrl>,
}

fn default_expect_status() -> u16 {
    200
}
