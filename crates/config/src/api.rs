//! `[api]`: the client API's transport limits, extraction settings and per-IP shield.
//!
//! Invalid values are rejected, never clamped. `[api.limits]` is bound to the listener and
//! needs a restart to change; extraction settings and the shield apply on a live reload.

use crate::check::Check;
use crate::cidr;
use crate::duration::Millis;
use crate::floors;
use crate::limiter::{LimiterConfig, RatePolicy};
use crate::secret::SecretRef;
use proxypool_core::extract::MAX_EXTRACT_COUNT;
use serde::{Deserialize, Serialize};

/// The `[api]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSection {
    pub limits: ApiLimits,
    pub extraction: ExtractionSettings,
    pub shield: ApiShield,
    /// When set, `GET /metrics` answers only `Authorization: Bearer <this token>` (resolved
    /// to a salted hash; applies live on reload). Unset: `/metrics` is open with only the
    /// aggregate (no tenant's series; `dev` shows them), and `check-config` warns when the
    /// API listens off loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_token: Option<SecretRef>,
    /// Load balancers (CIDR blocks) whose `X-Forwarded-For` names the client: from them
    /// the client address (for the shield and allowlists) is the rightmost entry that is
    /// not itself one of these; from anyone else the header is ignored. Empty = trust none.
    pub trusted_proxies: Vec<String>,
    /// When set, a connection from one of `trusted_proxies` must start with a PROXY
    /// protocol header (v1 or v2) naming the client, instead of (or before) any
    /// `X-Forwarded-For` (restart).
    pub proxy_protocol: bool,
    /// The dashboard's session cookie is always `Secure` and `__Host-` named: set it when
    /// a TLS-terminating balancer that sends no `X-Forwarded-Proto` is in front (restart).
    /// It is anyway with `tls`, or when one of `trusted_proxies` says
    /// `X-Forwarded-Proto: https`.
    pub secure_cookies: bool,
    /// Serve the client API over TLS (restart; the files are re-read when they change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::ServerTlsConfig>,
}

/// Limits enforced before authentication, so an anonymous peer can only spend this much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiLimits {
    /// Open connections at once; more are closed on accept.
    pub max_connections: usize,
    /// Open connections at once from one address; more are closed on accept, before a
    /// byte is read, so one address cannot take the whole `max_connections`. At most a
    /// quarter of `max_connections`. Connections from `trusted_proxies` that do not speak
    /// the PROXY protocol are not counted per address (they carry many clients).
    pub max_connections_per_ip: usize,
    /// IPv6 peers are counted per network of this prefix length (64: one count per /64,
    /// which one host usually holds whole), by the per-address caps.
    pub ipv6_prefix: u8,
    /// Time a new connection has to send its first byte (at most `header_read_timeout`;
    /// unset: 3 s, or `header_read_timeout` if that is shorter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_byte_timeout: Option<Millis>,
    /// Time a client has to send a complete request head (also the longest a kept-alive
    /// connection waits for its next request).
    pub header_read_timeout: Millis,
    /// Time a client has to send a request's whole body once its head has arrived; a body
    /// still arriving after it is answered 408.
    pub body_read_timeout: Millis,
    /// Requests in flight at once from one address (after the shield, before the body is
    /// read); one more is answered 429 at once, so slow requests from one address cannot
    /// hold the server's `max_concurrent_requests`.
    pub max_requests_in_flight_per_ip: usize,
    /// A kept-alive connection with no traffic and no request in flight for this long is
    /// closed.
    pub keepalive_idle: Millis,
    /// Largest request head (request line and headers); over it the answer is 431. At
    /// least [`proxypool_core::MIN_HEADER_BYTES`] (hyper's smallest read buffer).
    pub max_header_bytes: usize,
    /// Requests processed at once; beyond that a request is answered 503 at once instead
    /// of queueing (a queue only adds latency to an overloaded server).
    pub max_concurrent_requests: usize,
    /// A request not answered within this is 503. An admitted extraction still completes
    /// in the background, so a retry with the same `Idempotency-Key` gets its result.
    pub request_timeout: Millis,
    /// Largest request body; a larger declared length is 413 before authentication, a
    /// larger streamed body is cut at this size.
    pub max_body_bytes: usize,
    /// `Retry-After` for the API's own 503 answers (whole seconds).
    pub unavailable_retry_after: Millis,
    /// How long `/readyz` waits for each dependency.
    pub readiness_timeout: Millis,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            max_connections: 1024,
            max_connections_per_ip: 128,
            ipv6_prefix: 64,
            first_byte_timeout: None,
            header_read_timeout: Millis::from_secs(10),
            body_read_timeout: Millis::from_secs(5),
            max_requests_in_flight_per_ip: 32,
            keepalive_idle: Millis::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_concurrent_requests: 256,
            request_timeout: Millis::from_secs(10),
            // An extraction request is a few hundred bytes.
            max_body_bytes: 64 * 1024,
            unavailable_retry_after: Millis::from_secs(1),
            readiness_timeout: Millis::from_secs(2),
        }
    }
}

/// How extractions are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractionSettings {
    /// Most proxies one request may ask for (at most 1000).
    pub max_count: u32,
    /// Matching proxies every extraction leaves in the pool for the gateway.
    pub reserve_for_gateway: u32,
    /// How long a keyed extraction stays replayable (cut at its earliest proxy expiry).
    pub idempotency_ttl: Millis,
    /// Most assignments one admin drain call starts (the rest: call again).
    pub drain_batch: usize,
    /// Most workers the admin listing returns.
    pub max_workers_listed: usize,
    /// Most extractions one client may have running at once (each may scan up to the
    /// store's scan budget); one more is refused with 429 at once.
    pub max_in_flight_per_client: u32,
}

impl Default for ExtractionSettings {
    fn default() -> Self {
        ExtractionSettings {
            max_count: 100,
            reserve_for_gateway: 0,
            idempotency_ttl: Millis::from_secs(10 * 60),
            drain_batch: 10_000,
            max_workers_listed: 1_000,
            max_in_flight_per_client: 4,
        }
    }
}

/// The per-IP token bucket in front of authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiShield {
    pub policy: RatePolicy,
    pub engine: LimiterConfig,
    /// How often idle addresses are evicted.
    pub sweep_interval: Millis,
}

impl Default for ApiShield {
    fn default() -> Self {
        ApiShield {
            // Generous for one client address (an office NAT, a scraper fleet's egress),
            // small enough that one address cannot saturate the authentication path.
            policy: RatePolicy::new(200.0, 400.0),
            engine: LimiterConfig::default(),
            sweep_interval: Millis::from_secs(30),
        }
    }
}

impl ApiLimits {
    /// The first-byte deadline the listener applies.
    pub fn first_byte_deadline(&self) -> Millis {
        floors::first_byte_deadline(self.first_byte_timeout, self.header_read_timeout)
    }

    /// Every problem, as `(key under [api.limits], message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<_> = floors::at_least_one([
            ("max_connections", self.max_connections as u64),
            ("max_connections_per_ip", self.max_connections_per_ip as u64),
            ("header_read_timeout", self.header_read_timeout.as_ms()),
            ("body_read_timeout", self.body_read_timeout.as_ms()),
            (
                "max_requests_in_flight_per_ip",
                self.max_requests_in_flight_per_ip as u64,
            ),
            ("keepalive_idle", self.keepalive_idle.as_ms()),
            (
                "max_concurrent_requests",
                self.max_concurrent_requests as u64,
            ),
            ("request_timeout", self.request_timeout.as_ms()),
            ("max_body_bytes", self.max_body_bytes as u64),
            ("readiness_timeout", self.readiness_timeout.as_ms()),
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
        if self.max_requests_in_flight_per_ip > self.max_concurrent_requests {
            out.push((
                "max_requests_in_flight_per_ip",
                "must be at most max_concurrent_requests".to_owned(),
            ));
        }
        let retry = self.unavailable_retry_after.as_ms();
        if retry == 0 || !retry.is_multiple_of(1000) {
            out.push((
                "unavailable_retry_after",
                "must be a whole number of seconds, at least 1s".to_owned(),
            ));
        }
        out
    }
}

/// The most concurrent extractions one client may be allowed.
const MAX_IN_FLIGHT_PER_CLIENT: u32 = 1024;

impl ExtractionSettings {
    /// Every problem, as `(key under [api.extraction], message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(1..=MAX_EXTRACT_COUNT).contains(&self.max_count) {
            out.push((
                "max_count",
                format!("must be between 1 and {MAX_EXTRACT_COUNT}"),
            ));
        }
        out.extend(floors::at_least_one([
            ("idempotency_ttl", self.idempotency_ttl.as_ms()),
            ("drain_batch", self.drain_batch as u64),
            ("max_workers_listed", self.max_workers_listed as u64),
            (
                "max_in_flight_per_client",
                u64::from(self.max_in_flight_per_client),
            ),
        ]));
        if self.max_in_flight_per_client > MAX_IN_FLIGHT_PER_CLIENT {
            out.push((
                "max_in_flight_per_client",
                format!("must be at most {MAX_IN_FLIGHT_PER_CLIENT}"),
            ));
        }
        out
    }
}

/// Checks `[api]` and resolves its metrics token.
pub(crate) fn validate(c: &mut Check<'_>, api: &mut ApiSection) {
    if let Some(tls) = &mut api.tls {
        crate::tls::check_server(c, "api.tls", tls);
    }
    cidr::check_list(c, "api.trusted_proxies", &api.trusted_proxies);
    if let Some(token) = &mut api.metrics_token {
        c.resolve_verifier("api.metrics_token", "metrics_token", token);
    }
    for (key, message) in api.limits.problems() {
        c.at(format!("api.limits.{key}"), message);
    }
    for (key, message) in api.extraction.problems() {
        c.at(format!("api.extraction.{key}"), message);
    }
    if let Err(message) = api.shield.engine.check(Some(&api.shield.policy)) {
        c.at("api.shield", message);
    }
    c.duration(
        "api.shield.sweep_interval",
        api.shield.sweep_interval,
        Millis(10),
        Millis::from_secs(3600),
    );
}
