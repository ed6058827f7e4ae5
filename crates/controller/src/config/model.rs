//! The configuration file's shape: one serde struct per TOML table.
//!
//! Every table rejects unknown keys, so a typo fails the load instead of silently falling
//! back to a default. Secrets appear only as references (`*_env`, `*_file`, or a salted
//! `*_hash`); what a reference resolves to is filled in by the loader into `#[serde(skip)]`
//! fields and never printed (see [`proxypool_core::Secret`]).

use super::duration::Millis;
use proxypool_core::{ClientId, Label, Protocol, Secret, SecretHash, UpstreamId, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The whole controller configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub quota: QuotaConfig,
    #[serde(default)]
    pub listen: ListenConfig,
    #[serde(default)]
    pub snapshot: SnapshotConfig,
    #[serde(default)]
    pub ownership: OwnershipConfig,
    #[serde(default)]
    pub checker: CheckerConfig,
    #[serde(default)]
    pub maintenance: MaintenanceConfig,
    #[serde(default)]
    pub worker_tokens: Vec<WorkerTokenConfig>,
    #[serde(default)]
    pub policies: Vec<PolicyConfig>,
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
}

/// Where the activity pool lives: `memory`, `redis://host:port/db` or
/// `redis+sentinel://host:port[,host:port]/master_name[/db]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub url: String,
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<String>,
    #[serde(skip)]
    pub password: Option<Secret>,
    /// Redis only: every key lives under `{key_prefix}:{activity}:` (1-64 characters of
    /// `[A-Za-z0-9._:-]`), so several deployments can share one Redis.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// Redis only: bound of one Redis round trip (connecting included); past it the call
    /// fails as unavailable instead of hanging.
    #[serde(default = "default_call_timeout")]
    pub call_timeout: Millis,
    /// Redis only: the lease a controller holds to run the reconciler, checker, ownership
    /// and maintenance loops; a standby takes over within this long after the holder dies.
    #[serde(default = "default_leader_lease")]
    pub leader_lease: Millis,
    #[serde(skip)]
    pub kind: StoreKind,
}

fn default_key_prefix() -> String {
    "pp".into()
}

fn default_call_timeout() -> Millis {
    Millis(500)
}

fn default_leader_lease() -> Millis {
    Millis::from_secs(10)
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "memory".into(),
            password_env: None,
            password_file: None,
            password: None,
            key_prefix: default_key_prefix(),
            call_timeout: default_call_timeout(),
            leader_lease: default_leader_lease(),
            kind: StoreKind::Memory,
        }
    }
}

/// The parsed store URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreKind {
    #[default]
    Memory,
    /// A single Redis (`redis://` or `rediss://`); the URL carries no password.
    Redis { url: String },
    /// Redis behind Sentinel.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        db: u32,
    },
}

/// The durable quota: `memory`, `sqlite://PATH` or `postgres://user@host:port/db`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    pub url: String,
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<String>,
    #[serde(skip)]
    pub password: Option<Secret>,
    #[serde(skip)]
    pub kind: QuotaKind,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig {
            url: "memory".into(),
            password_env: None,
            password_file: None,
            password: None,
            kind: QuotaKind::Memory,
        }
    }
}

/// The parsed quota URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum QuotaKind {
    #[default]
    Memory,
    /// A SQLite file (relative paths are relative to the config file).
    Sqlite { path: std::path::PathBuf },
    /// PostgreSQL; the URL carries no password.
    Postgres { url: String },
}

/// Listening addresses.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// The worker control API (gateways).
    #[serde(default = "default_control_addr")]
    pub control: SocketAddr,
    /// The client API (extraction, inventory, admin).
    #[serde(default = "default_api_addr")]
    pub api: SocketAddr,
}

fn default_control_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7070))
}

fn default_api_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7080))
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            control: default_control_addr(),
            api: default_api_addr(),
        }
    }
}

/// How workers receive snapshots and keep their sessions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotConfig {
    /// Longest a snapshot long-poll waits before answering 204.
    pub long_poll_wait: Millis,
    /// A worker stops taking new traffic when its snapshot is this old and the controller
    /// cannot be reached.
    pub max_staleness: Millis,
    /// A session lapses this long after its last registration or accepted report.
    pub session_ttl: Millis,
    /// How often workers should report their runtime (must be well under `session_ttl`).
    pub report_interval: Millis,
    /// Most proxies one snapshot lists.
    pub max_proxies: usize,
    /// How often waiting long-polls re-read the store for changes made elsewhere (lease
    /// renewals by another controller, health changes, expiry).
    pub poll_interval: Millis,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            long_poll_wait: Millis::from_secs(25),
            max_staleness: Millis::from_secs(60),
            session_ttl: Millis::from_secs(30),
            report_interval: Millis::from_secs(5),
            max_proxies: 10_000,
            poll_interval: Millis(1_000),
        }
    }
}

/// How proxies are leased to gateway workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OwnershipConfig {
    /// Length of one lease (cut at the proxy's `usable_until`).
    pub lease: Millis,
    /// Leases closer than this to their end are renewed.
    pub renew_before: Millis,
    /// Most proxies one worker owns; the rest stay unowned for extraction.
    pub per_worker_target: usize,
    /// How often the manager runs.
    pub interval: Millis,
    /// Most lapsed assignments released per expiry call.
    pub expire_batch: usize,
    /// Most new assignments per round, so one round stays short.
    pub assign_batch: usize,
}

impl Default for OwnershipConfig {
    fn default() -> Self {
        OwnershipConfig {
            lease: Millis::from_secs(30),
            renew_before: Millis::from_secs(10),
            per_worker_target: 500,
            interval: Millis(1_000),
            expire_batch: 256,
            assign_batch: 1_000,
        }
    }
}

/// The health checker's global limits (targets are per upstream).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckerConfig {
    /// Checks in flight at once.
    pub concurrency: usize,
    /// Time for one whole check of one proxy (connect, handshake, every target).
    pub timeout: Millis,
    /// Pause between rounds when nothing is due.
    pub interval: Millis,
    /// Most proxies taken per round.
    pub round_size: usize,
    /// Results written to the store per batch.
    pub write_batch: usize,
}

impl Default for CheckerConfig {
    fn default() -> Self {
        CheckerConfig {
            concurrency: 64,
            timeout: Millis::from_secs(5),
            interval: Millis(500),
            round_size: 256,
            write_batch: 64,
        }
    }
}

/// The background sweep of expired state.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaintenanceConfig {
    pub interval: Millis,
    /// Most items of each kind removed per sweep call.
    pub batch: usize,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig {
            interval: Millis::from_secs(5),
            batch: 1_000,
        }
    }
}

/// A bearer token gateway workers present to the control API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerTokenConfig {
    /// A name for logs (never the token).
    pub name: String,
    #[serde(default)]
    pub token_hash: Option<SecretHash>,
    #[serde(default)]
    pub token_env: Option<String>,
    #[serde(default)]
    pub token_file: Option<String>,
    /// Worker ids this token may register; empty = any.
    #[serde(default)]
    pub workers: Vec<WorkerId>,
    #[serde(skip)]
    pub hash: Option<SecretHash>,
}

/// A token-bucket policy clients refer to by id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    pub id: String,
    pub requests_per_second: f64,
    pub burst: f64,
    #[serde(default)]
    pub hard_lockout: Option<Millis>,
    #[serde(default)]
    pub max_soft_violations: Option<u16>,
}

/// One vendor.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    pub username: String,
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<String>,
    #[serde(skip)]
    pub password: Option<Secret>,
}

/// Where a vendor's proxies come from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// `http` only: the list URL (`http://`).
    #[serde(default)]
    pub url: Option<String>,
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
    #[serde(default)]
    pub authorization_env: Option<String>,
    #[serde(default)]
    pub authorization_file: Option<String>,
    #[serde(skip)]
    pub authorization: Option<Secret>,
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckTarget {
    pub url: String,
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    #[serde(skip)]
    pub parsed: Option<super::target::TargetUrl>,
}

fn default_expect_status() -> u16 {
    200
}

/// An API and gateway client (tenant).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub id: ClientId,
    pub project: String,
    #[serde(default)]
    pub api_token_hash: Option<SecretHash>,
    #[serde(default)]
    pub api_token_env: Option<String>,
    #[serde(default)]
    pub api_token_file: Option<String>,
    #[serde(default)]
    pub gateway_password_hash: Option<SecretHash>,
    #[serde(default)]
    pub gateway_password_env: Option<String>,
    #[serde(default)]
    pub gateway_password_file: Option<String>,
    /// Empty = every upstream.
    #[serde(default)]
    pub allowed_upstreams: Vec<UpstreamId>,
    /// Empty = every region.
    #[serde(default)]
    pub allowed_regions: Vec<Label>,
    /// A policy id from `[[policies]]`.
    #[serde(default)]
    pub rate_limit: Option<String>,
    /// Durable quota per operation (`extract`).
    #[serde(default)]
    pub quota: BTreeMap<String, QuotaLimit>,
    /// Concurrent gateway connections per worker.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Source addresses allowed (CIDR); empty = any.
    #[serde(default)]
    pub ip_allowlist: Vec<String>,
    /// Can use the admin endpoints of the client API.
    #[serde(default)]
    pub admin: bool,
    #[serde(skip)]
    pub api_token: Option<SecretHash>,
    #[serde(skip)]
    pub gateway_password: Option<SecretHash>,
}

fn default_max_connections() -> u32 {
    64
}

/// A fixed-window quota.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimit {
    pub limit: u32,
    #[serde(default = "default_quota_window")]
    pub window: Millis,
}

fn default_quota_window() -> Millis {
    Millis::from_secs(60)
}
