//! The worker control API: messages between a gateway worker and the controller.
//!
//! HTTP JSON over the paths below, authenticated with `Authorization: Bearer <worker
//! token>`. The gateway depends on these types, never on the controller crate. Flow:
//!
//! 1. `POST {SESSIONS_PATH}` with [`RegisterSession`] → [`SessionGrant`]. A new session id
//!    fences the worker's previous session.
//! 2. `GET {snapshot_path}?session_id=S&after_version=V&wait_ms=W&protocol=P` long-polls
//!    (a poll without the controller's protocol is refused: 400 `protocol_mismatch`): 200 with a
//!    `SnapshotUpdate` (`proxypool_snapshot`, the protocol's owner) newer than `V` (the whole
//!    [`WorkerSnapshot`], or a delta against `V` when the controller knows the content at
//!    `V`; `V = 0` always gets the whole snapshot), or 204 when nothing changed within `W`.
//! 3. `POST {ack_path}` with [`SnapshotAck`] once the snapshot is applied → 204.
//! 4. `POST {report_path}` with a [`RuntimeReport`](crate::RuntimeReport) every
//!    `report_interval_ms` → [`ReportAck`]; accepted reports also renew the session.
//! 5. `DELETE {session_path}` on clean shutdown → 204.
//! 6. A gateway with a fleet listener names it in every report
//!    ([`FleetEndpoint`](crate::fleet::FleetEndpoint)); each [`ReportAck`] lists the fleet's
//!    live members, and `GET {FLEET_PATH}?worker=W` (`crate::fleet::FLEET_PATH`) (the token must be good for `W`) answers
//!    the same list ([`FleetList`](crate::fleet::FleetList)) between reports.
//!
//! Errors use the API error body ([`ErrorBody`]) with codes such as `fenced` (409: a newer
//! session exists; register again), `conflict`, `unauthenticated` and `unavailable`.

use crate::cooldown::{CooldownPolicy, DomainCooldown, SessionFeedback};
use crate::fleet::FleetMember;
use crate::geo::GeoValues;
use crate::ids::{ClientId, Label, ProxyId, UpstreamId, WorkerId};
use crate::port_set::PortSet;
use crate::proxy::Protocol;
use crate::runtime::SnapshotRef;
use crate::secret::Credentials;
use crate::secret_hash::SecretHash;
use crate::ticket::TicketKey;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};

/// Registers a worker session.
pub const SESSIONS_PATH: &str = "/control/v1/sessions";

/// `GET`: the worker's snapshot (long-poll).
pub fn snapshot_path(worker: &WorkerId) -> String {
    format!("/control/v1/workers/{worker}/snapshot")
}

/// `POST`: acknowledge an applied snapshot.
pub fn ack_path(worker: &WorkerId) -> String {
    format!("/control/v1/workers/{worker}/snapshot-ack")
}

/// `POST`: a runtime report.
pub fn report_path(worker: &WorkerId) -> String {
    format!("/control/v1/workers/{worker}/reports")
}

/// `DELETE`: end a session.
pub fn session_path(worker: &WorkerId, session_id: &str) -> String {
    format!("/control/v1/workers/{worker}/sessions/{session_id}")
}

/// A worker asks for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterSession {
    pub worker: WorkerId,
    /// Chosen by the worker (random per process start), so a retried registration is
    /// idempotent and a restarted worker fences its predecessor.
    pub session_id: String,
    /// Software version, for operators.
    #[serde(default)]
    pub version: Option<String>,
    /// The worker control protocol the gateway speaks
    /// (`proxypool_snapshot::CONTROL_PROTOCOL`); absent (0) from a
    /// gateway older than incremental snapshots, which the controller refuses.
    #[serde(default)]
    pub protocol: u32,
}

/// The controller grants a session and says how to pace the control loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGrant {
    pub worker: WorkerId,
    pub session_id: String,
    pub expires_at_ms: UnixMillis,
    pub session_ttl_ms: u64,
    pub report_interval_ms: u64,
    pub snapshot_wait_ms: u64,
    /// The worker control protocol the controller speaks; absent (0) from a controller
    /// older than incremental snapshots, which the gateway refuses.
    #[serde(default)]
    pub protocol: u32,
}

/// One pooled proxy a worker may route through, with what it needs to dial it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotProxy {
    pub id: ProxyId,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub credentials: Option<Credentials>,
    pub upstream: UpstreamId,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    /// The record's city, state and ASN labels, canonical, for the gateway's `-city-`,
    /// `-state-` and `-asn-` selectors. Left out of the JSON when the proxy has none, so
    /// such a proxy keeps the checksum it had before the field existed.
    #[serde(default, skip_serializing_if = "GeoValues::is_empty")]
    pub geo: GeoValues,
    pub max_sessions: u32,
    pub usable_until_ms: UnixMillis,
    pub lease_until_ms: UnixMillis,
    /// The assignment's epoch.
    pub epoch: u64,
}

/// A token-bucket policy as configured (the gateway validates it into a throttle policy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub requests_per_second: f64,
    pub burst: f64,
    #[serde(default)]
    pub hard_lockout_ms: Option<u64>,
    #[serde(default)]
    pub max_soft_violations: Option<u16>,
}

/// A client allowed to use the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayClient {
    pub id: ClientId,
    pub project: String,
    /// Hash of the proxy password the client sends (Basic / SOCKS5).
    pub password_hash: SecretHash,
    /// Empty = all upstreams.
    #[serde(default)]
    pub allowed_upstreams: Vec<UpstreamId>,
    /// Empty = all regions.
    #[serde(default)]
    pub allowed_regions: Vec<Label>,
    /// Empty = any source address. CIDR strings such as `10.0.0.0/8` or `::1/128`.
    #[serde(default)]
    pub ip_allowlist: Vec<String>,
    #[serde(default)]
    pub rate_limit: Option<RateLimitSpec>,
    /// Concurrent connections the client may hold on one worker.
    pub max_connections: u32,
    /// Destination ports this client may reach, replacing the gateway's own list; `None`
    /// = the gateway's list. Left out of the JSON when `None`, so a client without an
    /// override has the checksum it had before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_ports: Option<PortSet>,
    /// Origin statuses that mean a ban for this client's plain-HTTP requests, replacing
    /// the gateway's own list; `[]` = off, `None` = the gateway's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban_statuses: Option<Vec<u16>>,
    /// How the gateway rotates this client's proxies when the username asks for no
    /// rotation of its own; `None` = the gateway's `rotation`. Left out of the JSON when
    /// `None`, so a client without it keeps its checksum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<ClientRotation>,
    /// Whether the gateway inspects this client's `CONNECT` tunnels. Left out of the JSON
    /// when off, so a client without it keeps its checksum.
    #[serde(default, skip_serializing_if = "Inspection::is_off")]
    pub inspection: Inspection,
    /// Names of client certificates (DNS name, else subject common name) that
    /// authenticate as this client on a gateway's TLS listener with client certificates.
    /// Left out of the JSON when empty, so a client without them keeps its checksum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls_names: Vec<String>,
}

/// Whether the gateway ends a client's `CONNECT` itself to see the https requests inside
/// (TLS inspection), so bans, retries and cooldowns work on them as on plain http.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inspection {
    /// Never inspected; a username asking for it is refused.
    #[default]
    Off,
    /// Every tunnel is inspected (but for the gateway's bypass list).
    On,
    /// Inspected when the username carries the `-inspect` flag.
    Allowed,
}

impl Inspection {
    /// Whether the client may never be inspected.
    pub fn is_off(&self) -> bool {
        matches!(self, Inspection::Off)
    }
}

/// A client's default rotation at the gateway (a username's `-rotate-...` overrides it).
/// JSON: `"per_request"`, `"least_used"`, `{"every_requests": 5}`, `{"every_ms": 30000}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientRotation {
    /// A new pick for every request, by the gateway's `rotation`.
    PerRequest,
    /// Every request to the proxy with the fewest open connections and recent requests.
    LeastUsed,
    /// The same proxy for this many consecutive requests, then another.
    EveryRequests(u32),
    /// The same proxy until this many milliseconds after it was chosen, then another.
    EveryMs(u64),
}

/// Everything a worker serves from until the next snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    pub worker: WorkerId,
    pub session_id: String,
    pub reference: SnapshotRef,
    pub generated_at_ms: UnixMillis,
    /// The worker refuses new traffic when its snapshot is older than this and the
    /// controller cannot be reached.
    pub max_staleness_ms: u64,
    pub proxies: Vec<SnapshotProxy>,
    pub clients: Vec<GatewayClient>,
    /// Proxies the worker still holds but must not route new traffic through (they are
    /// being drained, often because a health check failed), with their current lease end:
    /// open connections through them may go on until then, and no longer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldLease>,
    /// Cooldowns of the listed proxies and client feedback on sessions.
    #[serde(default, skip_serializing_if = "Advisories::is_empty")]
    pub advisories: Advisories,
    /// The pool store's key of feedback tickets (`crate::ticket`): the gateway signs one
    /// per response that names a proxy. None: the gateway issues no tickets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_key: Option<TicketKey>,
    /// How to reach the proxies of each upstream that says more than the default (the
    /// public roots, the proxy's host as the server name, any address).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_tls: Vec<UpstreamTls>,
}

/// How a gateway (and the checker) reach an upstream's proxies: for `https` proxies, TLS
/// to the proxy itself, verified against this CA bundle under this server name, before a
/// byte of the proxy protocol (so the proxy's credentials never cross the network in
/// clear); for every proxy, whether only public addresses may be dialed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTls {
    pub upstream: UpstreamId,
    /// The CA certificates (PEM) the proxies must chain to; `None` = the public roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// The name their certificates must carry; `None` = each proxy's own host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// A proxy's host must resolve to no address `crate::is_internal_address` refuses, or
    /// it is not dialed: set for a fetched list without `allow_private_hosts`, as the
    /// checker is told. Left out of the JSON when unset, so an upstream without it keeps
    /// the checksum it had before the field existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_internal: bool,
}

/// What a snapshot carries besides routing state: the remembered cooldowns of its proxies
/// (`crate::cooldown`) and the live feedback on gateway sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Advisories {
    /// How the controller grows cooldowns (`[cooldowns]`), so every gateway grows the bans
    /// it sees the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<CooldownPolicy>,
    /// By proxy id, then domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cooldowns: Vec<DomainCooldown>,
    /// Oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_feedback: Vec<SessionFeedback>,
}

impl Advisories {
    pub fn is_empty(&self) -> bool {
        self.policy.is_none() && self.cooldowns.is_empty() && self.session_feedback.is_empty()
    }
}

/// A draining proxy's lease, as a snapshot carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLease {
    pub id: ProxyId,
    pub lease_until_ms: UnixMillis,
}

/// The worker applied a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotAck {
    pub session_id: String,
    pub snapshot: SnapshotRef,
}

/// The controller's answer to a runtime report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportAck {
    /// `accepted` or `replayed`.
    pub outcome: String,
    pub session_expires_at_ms: UnixMillis,
    /// Entries of the report the store did not take because the worker no longer owns
    /// their proxy (its lease lapsed, or the proxy moved on). The rest of the report was
    /// applied; the gateway stops relaying through these proxies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_proxies: Vec<ProxyId>,
    /// The fleet's live members as the controller saw them after taking this report
    /// (sorted by worker id; empty when no gateway has a fleet listener).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<FleetMember>,
}

/// The API error body shared by the client API and the control API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    pub request_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}
