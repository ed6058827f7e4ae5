//! The configuration file's shape: one serde struct per TOML table, for every role.
//!
//! Every table rejects unknown keys, so a typo fails the load instead of silently falling
//! back to a default. Secrets appear only as [`SecretRef`]s; what a reference resolves to
//! is filled in by the loader and never printed. The controller's sections are here; the
//! vendors', the clients', the client API's and the gateway's tables have modules of their
//! own ([`crate::upstream`], [`crate::client`], [`crate::api`], [`crate::gateway`]).

use crate::api::ApiSection;
use crate::client::ClientConfig;
use crate::duration::Millis;
use crate::gateway::GatewaySection;
use crate::limiter::RatePolicy;
use crate::secret::SecretRef;
use crate::upstream::UpstreamConfig;
use proxypool_core::WorkerId;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The whole file: every role reads the sections it needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub quota: QuotaStoreConfig,
    #[serde(default)]
    pub listen: ListenConfig,
    /// The worker control API's listener limits.
    #[serde(default)]
    pub control: ControlSection,
    #[serde(default)]
    pub snapshot: SnapshotConfig,
    #[serde(default)]
    pub ownership: OwnershipConfig,
    #[serde(default)]
    pub checker: CheckerConfig,
    #[serde(default)]
    pub maintenance: MaintenanceConfig,
    /// How long a ban keeps a proxy off a domain (gateways' bans and clients' feedback).
    #[serde(default)]
    pub cooldowns: CooldownsConfig,
    #[serde(default)]
    pub worker_tokens: Vec<WorkerTokenConfig>,
    #[serde(default)]
    pub policies: Vec<RatePolicy>,
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
    /// The client API (served by `serve` and `controller`).
    #[serde(default)]
    pub api: ApiSection,
    /// A gateway worker: the in-process one of `serve`, or a split `proxypool gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySection>,
}

impl Config {
    /// Whether the file configures a controller: any of its sections, or `[api]`, which
    /// only a controller serves. A gateway-only file does not.
    pub fn has_controller(&self) -> bool {
        let empty = Config {
            gateway: self.gateway.clone(),
            ..Config::default()
        };
        *self != empty
    }

    /// The policy `id` names.
    pub fn policy(&self, id: &str) -> Option<&RatePolicy> {
        self.policies.iter().find(|p| p.id.as_deref() == Some(id))
    }
}

/// Where the activity pool lives: `memory`, `redis://host:port/db` or
/// `redis+sentinel://host:port[,host:port]/master_name[/db]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub url: String,
    /// Redis only: the password (for Sentinel, the master's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretRef>,
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
    /// Redis only, with `rediss://`: the CA bundle the server must chain to (unset = the
    /// system roots) and a client certificate if Redis asks for one (`tls-auth-clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// Redis Sentinel only: the sentinels and the master speak TLS (verified against the
    /// system roots).
    #[serde(default)]
    pub sentinel_tls: bool,
    /// Redis only: what the controller does when the server would forget the pool's state
    /// (AOF off, or a `maxmemory-policy` that evicts keys): `warn` (log each risk once the
    /// server answers) or `refuse` (fail the start, also when the server cannot be reached
    /// to tell).
    #[serde(default)]
    pub durability: DurabilityPolicy,
    #[serde(skip)]
    pub kind: StoreKind,
}

/// See [`StoreConfig::durability`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityPolicy {
    #[default]
    Warn,
    Refuse,
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
            password: None,
            key_prefix: default_key_prefix(),
            call_timeout: default_call_timeout(),
            leader_lease: default_leader_lease(),
            tls: None,
            sentinel_tls: false,
            durability: DurabilityPolicy::Warn,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaStoreConfig {
    pub url: String,
    /// PostgreSQL only: the password of the URL's user (never written into the URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretRef>,
    /// Pooled connections per process (default: PostgreSQL 4, SQLite 1, since SQLite
    /// writes one at a time anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// How long a decision waits for a pooled connection, connecting included.
    #[serde(default = "default_quota_acquire_timeout")]
    pub acquire_timeout: Millis,
    /// PostgreSQL's `statement_timeout` for every quota statement (row-lock waits
    /// included); SQLite's busy timeout (waiting for another connection's write lock).
    #[serde(default = "default_quota_statement_timeout")]
    pub statement_timeout: Millis,
    /// The bound on one whole decision (or settlement), whatever hangs; past it the
    /// answer is 503 and nothing is charged. Longer than the two above.
    #[serde(default = "default_quota_decision_timeout")]
    pub decision_timeout: Millis,
    #[serde(skip)]
    pub kind: QuotaKind,
}

fn default_quota_acquire_timeout() -> Millis {
    Millis::from_secs(2)
}

fn default_quota_statement_timeout() -> Millis {
    Millis::from_secs(2)
}

fn default_quota_decision_timeout() -> Millis {
    Millis::from_secs(3)
}

impl Default for QuotaStoreConfig {
    fn default() -> Self {
        QuotaStoreConfig {
            url: "memory".into(),
            password: None,
            max_connections: None,
            acquire_timeout: default_quota_acquire_timeout(),
            statement_timeout: default_quota_statement_timeout(),
            decision_timeout: default_quota_decision_timeout(),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The `[control]` table: the worker control API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSection {
    pub limits: ControlLimits,
    /// Load balancers (CIDR blocks) in front of the control API: their connections must
    /// start with a PROXY protocol header (v1 or v2), whose client is what the per-IP cap
    /// counts; a connection from one without it is closed. Empty = none (restart).
    pub trusted_proxies: Vec<String>,
    /// Serve the control API over TLS (restart; the files are re-read when they change).
    /// With `client_ca`, every gateway must present a certificate from that CA (mutual
    /// TLS, in addition to its worker token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ServerTlsConfig>,
}

/// Limits of the worker control API's listener, enforced before a worker token is
/// checked (connections, heads) or before a body is read (bodies are read only after the
/// token is checked, and only up to the route's cap). Bound to the listener: a change
/// needs a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlLimits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Open connections at once from one address; more are closed on accept.
    pub max_connections_per_ip: usize,
    /// Time a client has to send a complete request head.
    pub header_read_timeout: Millis,
    /// A kept-alive connection with no traffic and no request in flight for this long is
    /// closed (a long-poll in flight is not idle).
    pub keepalive_idle: Millis,
    /// Largest request head; over it the answer is 431 (at least 8192).
    pub max_header_bytes: usize,
    /// Largest body of a session registration or a snapshot acknowledgement.
    pub max_body_bytes: usize,
    /// Largest runtime report body (a report lists every tracked proxy of a worker).
    pub max_report_bytes: usize,
}

impl Default for ControlLimits {
    fn default() -> Self {
        ControlLimits {
            max_connections: 1024,
            max_connections_per_ip: 64,
            header_read_timeout: Millis::from_secs(10),
            keepalive_idle: Millis::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 64 * 1024,
            // 100,000 entries of about 100 bytes each, with room to spare.
            max_report_bytes: 16 * 1024 * 1024,
        }
    }
}

impl ControlLimits {
    /// Every problem, as `(key under [control.limits], message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (key, value) in [
            ("max_connections", self.max_connections as u64),
            ("max_connections_per_ip", self.max_connections_per_ip as u64),
            ("header_read_timeout", self.header_read_timeout.as_ms()),
            ("keepalive_idle", self.keepalive_idle.as_ms()),
            ("max_body_bytes", self.max_body_bytes as u64),
            ("max_report_bytes", self.max_report_bytes as u64),
        ] {
            if value == 0 {
                out.push((key, "must be at least 1".to_owned()));
            }
        }
        if self.max_header_bytes < crate::api::MIN_HEADER_BYTES {
            out.push((
                "max_header_bytes",
                "must be at least 8192 (hyper's smallest read buffer)".to_owned(),
            ));
        }
        out
    }
}

/// How workers receive snapshots and keep their sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// How often waiting long-polls look for changes made elsewhere (lease renewals by
    /// another controller, health changes, expiry): one read of the worker's snapshot
    /// version, and a rebuild only when it moved or something listed ran out.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            renew_before: Millis::from_secs(20),
            per_worker_target: 500,
            interval: Millis(1_000),
            expire_batch: 256,
            assign_batch: 1_000,
        }
    }
}

/// The health checker's global limits (targets are per upstream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// `[cooldowns]`: how long a proxy is kept off a domain that banned it. The controller
/// ships it to every gateway in their snapshots and the client API applies it to clients'
/// feedback, so the whole cluster grows cooldowns the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CooldownsConfig {
    /// The first ban's cooldown; each further ban in a row doubles it.
    pub base: Millis,
    /// The longest cooldown.
    pub cap: Millis,
    /// How long past a cooldown's end its strikes are remembered, so a ban soon after it
    /// ended grows the next cooldown instead of starting over.
    pub memory: Millis,
}

impl Default for CooldownsConfig {
    fn default() -> Self {
        CooldownsConfig {
            base: Millis::from_secs(60),
            cap: Millis::from_secs(3_600),
            memory: Millis::from_secs(3_600),
        }
    }
}

impl CooldownsConfig {
    pub fn policy(&self) -> proxypool_core::CooldownPolicy {
        proxypool_core::CooldownPolicy {
            base_ms: self.base.0,
            cap_ms: self.cap.0,
            memory_ms: self.memory.0,
        }
    }
}

/// The background sweep of expired state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerTokenConfig {
    /// A name for logs (never the token).
    pub name: String,
    /// Resolved to a salted hash: the controller only verifies it.
    pub token: SecretRef,
    /// Worker ids this token may register; empty = any.
    #[serde(default)]
    pub workers: Vec<WorkerId>,
}
