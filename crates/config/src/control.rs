//! `[control]` and `[[worker_tokens]]`: the worker control API's listener (limits,
//! balancers, TLS) and the tokens gateway workers present to it, with their checks.

use crate::check::Check;
use crate::cidr;
use crate::duration::Millis;
use crate::floors;
use crate::secret::SecretRef;
use proxypool_core::WorkerId;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

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
    /// Open connections at once from one address; more are closed on accept. At most a
    /// quarter of `max_connections`.
    pub max_connections_per_ip: usize,
    /// IPv6 peers are counted per network of this prefix length (64: one count per /64).
    pub ipv6_prefix: u8,
    /// Time a new connection has to send its first byte (at most `header_read_timeout`;
    /// unset: 3 s, or `header_read_timeout` if that is shorter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_byte_timeout: Option<Millis>,
    /// Time a client has to send a complete request head.
    pub header_read_timeout: Millis,
    /// Time a client has to send a request's whole body once its head has arrived.
    pub body_read_timeout: Millis,
    /// A kept-alive connection with no traffic and no request in flight for this long is
    /// closed (a long-poll in flight is not idle).
    pub keepalive_idle: Millis,
    /// Largest request head; over it the answer is 431 (at least
    /// [`proxypool_core::MIN_HEADER_BYTES`]).
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
            ipv6_prefix: 64,
            first_byte_timeout: None,
            header_read_timeout: Millis::from_secs(10),
            // A runtime report of 100,000 proxies is a few MB: room for a slow link.
            body_read_timeout: Millis::from_secs(30),
            keepalive_idle: Millis::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 64 * 1024,
            // 100,000 entries of about 100 bytes each, with room to spare.
            max_report_bytes: 16 * 1024 * 1024,
        }
    }
}

impl ControlLimits {
    /// The first-byte deadline the listener applies.
    pub fn first_byte_deadline(&self) -> Millis {
        floors::first_byte_deadline(self.first_byte_timeout, self.header_read_timeout)
    }

    /// Every problem, as `(key under [control.limits], message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<_> = floors::at_least_one([
            ("max_connections", self.max_connections as u64),
            ("max_connections_per_ip", self.max_connections_per_ip as u64),
            ("header_read_timeout", self.header_read_timeout.as_ms()),
            ("body_read_timeout", self.body_read_timeout.as_ms()),
            ("keepalive_idle", self.keepalive_idle.as_ms()),
            ("max_body_bytes", self.max_body_bytes as u64),
            ("max_report_bytes", self.max_report_bytes as u64),
        ])
        .collect();
        out.extend(
            floors::header_bytes(self.max_header_bytes)
                .map(|message| ("max_header_bytes", message)),
        );
        out.extend(floors::connection_caps(
            self.max_connections,
            self.max_connections_per_ip,
            self.ipv6_prefix,
            (self.first_byte_timeout, self.header_read_timeout),
        ));
        out
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

/// Checks `[control]`.
pub(crate) fn validate(c: &mut Check<'_>, control: &mut ControlSection) {
    for (key, message) in control.limits.problems() {
        c.at(format!("control.limits.{key}"), message);
    }
    if let Some(tls) = &mut control.tls {
        crate::tls::check_server(c, "control.tls", tls);
    }
    cidr::check_list(c, "control.trusted_proxies", &control.trusted_proxies);
}

/// Checks `[[worker_tokens]]` (names present and unique) and resolves each token to its
/// salted hash.
pub(crate) fn validate_worker_tokens(c: &mut Check<'_>, tokens: &mut [WorkerTokenConfig]) {
    let mut names = HashSet::new();
    for (i, token) in tokens.iter_mut().enumerate() {
        let path = format!("worker_tokens[{i}]");
        if token.name.trim().is_empty() || !names.insert(token.name.clone()) {
            c.at(format!("{path}.name"), "must be present and unique");
        }
        let owner = format!("worker_token:{}", token.name);
        c.resolve_verifier(&format!("{path}.token"), &owner, &mut token.token);
    }
}
