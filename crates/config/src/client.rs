//! `[[clients]]`: the tenants of the client API and the gateway: credentials, scopes,
//! rate-limit policy, durable quotas, connection caps and source allowlists, and their
//! checks.

use crate::check::Check;
use crate::cidr;
use crate::duration::Millis;
use crate::secret::SecretRef;
use proxypool_core::control::Inspection;
use proxypool_core::{ClientId, Label, PortSet, SecretHash, UpstreamId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// Quota operations a client may have limits for (the durable quota's operations).
pub const QUOTA_OPERATIONS: &[&str] = &["extract", "inspect", "admin"];

/// An API and gateway client (tenant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub id: ClientId,
    pub project: String,
    /// The client API bearer token (resolved to a salted hash: it is only verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_token: Option<SecretRef>,
    /// The gateway proxy password (resolved to a salted hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_password: Option<SecretRef>,
    /// Empty = every upstream.
    #[serde(default)]
    pub allowed_upstreams: Vec<UpstreamId>,
    /// Empty = every region.
    #[serde(default)]
    pub allowed_regions: Vec<Label>,
    /// A policy id from `[[policies]]`.
    #[serde(default)]
    pub rate_limit: Option<String>,
    /// Durable quota per operation (see [`QUOTA_OPERATIONS`]); an operation left out
    /// gets the built-in default.
    #[serde(default)]
    pub quota: BTreeMap<String, QuotaLimit>,
    /// Concurrent gateway connections per worker.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Source addresses allowed (CIDR); empty = any.
    #[serde(default)]
    pub ip_allowlist: Vec<String>,
    /// Destination ports this client may reach through the gateway, replacing
    /// `[gateway.destinations] ports` for it: a non-empty list or `"*"`. Left out = the
    /// gateway's list. The address ranges of the destination policy still apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_ports: Option<PortSet>,
    /// Origin statuses that mean "this proxy is banned here" for this client's plain-HTTP
    /// requests, replacing `[gateway.bans] statuses` for it; `[]` = off. Left out = the
    /// gateway's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban_statuses: Option<Vec<u16>>,
    /// How the gateway rotates this client's proxies when the username asks for no
    /// rotation of its own (`-rotate-...` overrides it). Left out = per request, by the
    /// gateway's `rotation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<ClientRotation>,
    /// Can use the admin endpoints of the client API.
    #[serde(default)]
    pub admin: bool,
    /// Trusted for shared feedback: the client's reports on proxies (`POST /v1/feedback`)
    /// bind every client, and its `ok` clears shared cooldowns. Off (the default), its
    /// reports bind its own project's clients only and its `ok` clears only what its
    /// project reported, so one tenant cannot keep a proxy off a site for another.
    #[serde(default)]
    pub shared_feedback: bool,
    /// TLS inspection of the client's `CONNECT` tunnels at the gateway: `"off"` (the
    /// default; a username asking for it is refused), `"on"` (every tunnel, but for the
    /// gateway's bypass list) or `"allowed"` (when the username carries `-inspect`). Needs
    /// `[gateway.inspection]` on the gateways.
    #[serde(default, skip_serializing_if = "Inspection::is_off")]
    pub inspection: Inspection,
    /// Names of client certificates (a DNS name of the certificate, else its subject
    /// common name) that authenticate as this client on a gateway's TLS listener with
    /// `[gateway.tls] client_ca`. Lower-cased at load; a name belongs to one client only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls_names: Vec<String>,
}

impl ClientConfig {
    /// The salted hash API tokens are checked against (none: no API access).
    pub fn api_token_hash(&self) -> Option<&SecretHash> {
        self.api_token.as_ref().and_then(SecretRef::verifier)
    }

    /// The salted hash gateway passwords are checked against (none: no gateway access).
    pub fn gateway_password_hash(&self) -> Option<&SecretHash> {
        self.gateway_password.as_ref().and_then(SecretRef::verifier)
    }
}

/// A client's default rotation: `"per_request"`, `"least_used"`,
/// `{ every_requests = N }` or `{ every = "30s" }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientRotation {
    /// A new pick for every request, by the gateway's `rotation`.
    PerRequest,
    /// The proxy with the fewest open connections and recent requests, every request.
    LeastUsed,
    /// The same proxy for N consecutive requests, then another.
    EveryRequests(u32),
    /// The same proxy until this long after it was chosen, then another.
    Every(Millis),
}

/// Most consecutive requests one rotation may keep on a proxy.
pub const MAX_ROTATE_REQUESTS: u32 = 1_000_000;

/// Longest time one rotation may keep a proxy (a day, as the longest `sesstime`).
pub const MAX_ROTATE_EVERY: Millis = Millis::from_secs(24 * 3600);

impl ClientRotation {
    /// The form the snapshot carries to gateways.
    pub fn to_snapshot(self) -> proxypool_core::control::ClientRotation {
        use proxypool_core::control::ClientRotation as Snapshot;
        match self {
            ClientRotation::PerRequest => Snapshot::PerRequest,
            ClientRotation::LeastUsed => Snapshot::LeastUsed,
            ClientRotation::EveryRequests(n) => Snapshot::EveryRequests(n),
            ClientRotation::Every(every) => Snapshot::EveryMs(every.as_ms()),
        }
    }
}

fn default_max_connections() -> u32 {
    64
}

/// A fixed-window quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimit {
    pub limit: u32,
    #[serde(default = "default_quota_window")]
    pub window: Millis,
}

fn default_quota_window() -> Millis {
    Millis::from_secs(60)
}

/// Checks every `[[clients]]` entry against the configured upstreams and policies and
/// resolves its secrets to salted hashes.
pub(crate) fn validate_clients(
    c: &mut Check<'_>,
    clients: &mut [ClientConfig],
    upstream_ids: &HashSet<UpstreamId>,
    policy_ids: &HashSet<String>,
) {
    let mut ids = HashSet::new();
    let mut tls_names = HashSet::new();
    for (i, client) in clients.iter_mut().enumerate() {
        let path = format!("clients[{i}]");
        if !ids.insert(client.id.clone()) {
            c.at(format!("{path}.id"), "is used by another client");
        }
        for (j, name) in client.tls_names.iter_mut().enumerate() {
            let key = format!("{path}.tls_names[{j}]");
            // Certificates name hosts in any case, with or without the root's dot: the
            // check at the listener compares this one form.
            *name = canonical_tls_name(name);
            if let Err(problem) = check_tls_name(name) {
                c.at(key, problem);
            } else if !tls_names.insert(name.clone()) {
                c.at(key, "is a name of another client's certificate");
            }
        }
        if ClientId::new(&client.project).is_err() {
            c.at(
                format!("{path}.project"),
                "must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit",
            );
        }
        let ClientConfig {
            id,
            api_token,
            gateway_password,
            ..
        } = client;
        if let Some(token) = api_token {
            c.resolve_verifier(
                &format!("{path}.api_token"),
                &format!("api_token:{id}"),
                token,
            );
        }
        if let Some(password) = gateway_password {
            c.resolve_verifier(
                &format!("{path}.gateway_password"),
                &format!("gateway_password:{id}"),
                password,
            );
        }
        c.require(
            client.api_token.is_some() || client.gateway_password.is_some(),
            path.clone(),
            "a client needs an api token or a gateway password (or both)",
        );
        for (j, upstream) in client.allowed_upstreams.iter().enumerate() {
            c.require(
                upstream_ids.contains(upstream),
                format!("{path}.allowed_upstreams[{j}]"),
                "names no configured upstream",
            );
        }
        if let Some(policy) = &client.rate_limit {
            c.require(
                policy_ids.contains(policy),
                format!("{path}.rate_limit"),
                "names no configured policy",
            );
        }
        for (operation, limit) in &client.quota {
            let qpath = format!("{path}.quota.{operation}");
            if !QUOTA_OPERATIONS.contains(&operation.as_str()) {
                c.at(
                    qpath.clone(),
                    format!("unknown operation; known: {}", QUOTA_OPERATIONS.join(", ")),
                );
            }
            c.require(
                (1..=1000).contains(&limit.limit),
                format!("{qpath}.limit"),
                "must be between 1 and 1000",
            );
            c.duration(
                &format!("{qpath}.window"),
                limit.window,
                Millis::from_secs(1),
                Millis::from_secs(300),
            );
        }
        c.require(
            client.max_connections >= 1,
            format!("{path}.max_connections"),
            "must be at least 1",
        );
        cidr::check_list(c, &format!("{path}.ip_allowlist"), &client.ip_allowlist);
        if let Some(statuses) = &client.ban_statuses {
            crate::gateway::bans::validate_statuses(c, &format!("{path}.ban_statuses"), statuses);
        }
        if let Some(ports) = &client.allowed_ports {
            crate::gateway::destinations::validate_ports(
                c,
                &format!("{path}.allowed_ports"),
                ports,
            );
        }
        match client.rotation {
            Some(ClientRotation::EveryRequests(n)) if !(1..=MAX_ROTATE_REQUESTS).contains(&n) => {
                c.at(
                    format!("{path}.rotation.every_requests"),
                    format!("must be between 1 and {MAX_ROTATE_REQUESTS}"),
                );
            }
            Some(ClientRotation::Every(every)) => c.duration(
                &format!("{path}.rotation.every"),
                every,
                Millis::from_secs(1),
                MAX_ROTATE_EVERY,
            ),
            _ => {}
        }
    }
}

/// The one form a certificate name is compared in: lower case, no trailing dot.
pub fn canonical_tls_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A certificate name a client may claim: 1-253 printable ASCII characters, no spaces.
fn check_tls_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 253 {
        return Err("must be 1-253 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces");
    }
    Ok(())
}
