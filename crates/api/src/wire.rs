//! The JSON shapes of the client API (what `openapi.json` documents).
//!
//! Kept apart from the core types so the wire format is a decision of the API: field names
//! (`filters`, `usable_until`), milliseconds since the Unix epoch for times, and the
//! password in clear only in extraction responses, which are sent with
//! `Cache-Control: no-store`.

use proxypool_core::{
    Domain, DomainCooldown, ExtractMode, ExtractResponse, ExtractedProxy, InventoryView, Label,
    ProjectId, Protocol, ProxyFilter, ProxyId, ProxyStatus, SnapshotRef, StoredRuntime, UnixMillis,
    UpstreamId, Verdict, WorkerId, WorkerSession,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /v1/extractions` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionRequestBody {
    #[serde(deserialize_with = "whole::number")]
    pub count: u32,
    #[serde(default)]
    pub mode: ExtractMode,
    #[serde(default)]
    pub filters: ProxyFilter,
    #[serde(default, deserialize_with = "whole::optional")]
    pub min_health_freshness_ms: Option<u64>,
    /// Only proxies not cooling down for this host's registrable domain (a host name, an
    /// IP literal or a URL).
    #[serde(default)]
    pub for_domain: Option<String>,
}

/// `POST /v1/feedback` body: what a client saw through a proxy (by `proxy_id`) or through
/// a gateway sticky session (by `session`) on one site.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackRequestBody {
    #[serde(default)]
    pub proxy_id: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    /// The site: a host name, an IP literal or a URL; reduced to its registrable domain.
    pub domain: String,
    pub verdict: Verdict,
    /// The client's own estimate of the cooldown (`"30s"`, `"10m"`), instead of the policy's.
    #[serde(default)]
    pub ttl: Option<String>,
    /// Gives the extracted proxy back as bad (only with `proxy_id`).
    #[serde(default, rename = "return")]
    pub give_back: bool,
    /// A gateway's `X-Proxypool-Ticket` for `proxy_id`: how a client that routed through a
    /// proxy it did not extract shows it did (only with `proxy_id`).
    #[serde(default)]
    pub ticket: Option<String>,
    /// A new extraction in the same call.
    #[serde(default)]
    pub replacement: Option<ReplacementBody>,
}

/// The `replacement` of a feedback: the body of `POST /v1/extractions`, with `count`
/// defaulting to 1 and `for_domain` to the feedback's domain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplacementBody {
    #[serde(default = "one", deserialize_with = "whole::number")]
    pub count: u32,
    #[serde(default)]
    pub mode: ExtractMode,
    #[serde(default)]
    pub filters: ProxyFilter,
    #[serde(default, deserialize_with = "whole::optional")]
    pub min_health_freshness_ms: Option<u64>,
    #[serde(default)]
    pub for_domain: Option<String>,
}

fn one() -> u32 {
    1
}

/// One proxy's cooldown for one domain, as the store holds it after the feedback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CooldownView {
    pub proxy_id: ProxyId,
    pub domain: Domain,
    /// The project whose clients it binds; left out for a shared entry, which binds
    /// every client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectId>,
    /// The proxy is not used for the domain before this (ms since the epoch).
    pub until: UnixMillis,
    /// Bans in a row.
    pub strikes: u32,
    /// When the entry and its strikes are forgotten (ms since the epoch).
    pub forget_at: UnixMillis,
}

impl From<&DomainCooldown> for CooldownView {
    fn from(entry: &DomainCooldown) -> Self {
        CooldownView {
            proxy_id: entry.proxy_id.clone(),
            domain: entry.domain.clone(),
            project: entry.project.clone(),
            until: entry.until_ms,
            strikes: entry.strikes,
            forget_at: entry.forget_at_ms,
        }
    }
}

/// What a feedback did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackOutcome {
    /// The proxy cools down for the domain (`cooldown` says until when).
    Cooling,
    /// The proxy's cooldown for the domain, if any, is gone.
    Cleared,
    /// Kept for the gateway that holds the session, which applies it to the session's proxy.
    Queued,
}

/// The error of a replacement that could not be made (the feedback itself was applied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplacementError {
    pub code: String,
    pub message: String,
}

/// `POST /v1/feedback` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackView {
    pub outcome: FeedbackOutcome,
    /// The registrable domain the feedback was recorded for.
    pub domain: Domain,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_id: Option<ProxyId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// With `cooling`: the stored entry (merged with what the store already knew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<CooldownView>,
    /// The cooldown this verdict asked for, in ms: the client's `ttl` clamped to the
    /// `[cooldowns]` cap, or the policy's (with `cooling`; with `queued`, the clamped `ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// With `queued`: the feedback's id and until when it waits for the session's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<UnixMillis>,
    /// Whether the proxy was given back (its extraction ended; it is SUSPECT now).
    pub returned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<ExtractionView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_error: Option<ReplacementError>,
}

/// Integers as JSON Schema (and the OpenAPI document) defines them: a number with no
/// fractional part, so `2.0` is `2`; `2.5`, negatives and out-of-range values are refused.
mod whole {
    use serde::{Deserialize, Deserializer, de::Error};

    fn whole<T: TryFrom<u64>, E: Error>(value: f64) -> Result<T, E> {
        let integral = value.fract() == 0.0 && value >= 0.0 && value <= u64::MAX as f64;
        integral
            .then_some(value as u64)
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| E::custom(format!("expected a whole number in range, got {value}")))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Unsigned(u64),
        Float(f64),
    }

    pub(super) fn number<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
        match Number::deserialize(d)? {
            Number::Unsigned(v) => {
                T::try_from(v).map_err(|_| D::Error::custom(format!("{v} is out of range")))
            }
            Number::Float(v) => whole(v),
        }
    }

    pub(super) fn optional<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        match Option::<Number>::deserialize(d)? {
            None => Ok(None),
            Some(Number::Unsigned(v)) => T::try_from(v)
                .map(Some)
                .map_err(|_| D::Error::custom(format!("{v} is out of range"))),
            Some(Number::Float(v)) => whole(v).map(Some),
        }
    }
}

/// One extracted proxy with what a client needs to use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyView {
    pub id: ProxyId,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub upstream: UpstreamId,
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    /// The geo labels the vendor gave, as the filters compare them (`new_york`, `7922`).
    #[serde(default)]
    pub city: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub asn: Option<String>,
    /// Nothing should be sent through the proxy after this (ms since the epoch).
    pub usable_until: UnixMillis,
    /// The vendor's hard expiry (ms since the epoch).
    pub expires_at: UnixMillis,
    /// The client gave the proxy back: its credentials are no longer shown.
    #[serde(default)]
    pub returned: bool,
}

impl From<&ExtractedProxy> for ProxyView {
    fn from(proxy: &ExtractedProxy) -> Self {
        ProxyView {
            id: proxy.id.clone(),
            protocol: proxy.protocol,
            host: proxy.host.clone(),
            port: proxy.port,
            username: proxy.username.clone(),
            // The one place a pooled password leaves the process: the client paid for it.
            password: proxy.password.as_ref().map(|p| p.expose().to_owned()),
            upstream: proxy.upstream.clone(),
            region: proxy.region.clone(),
            carrier: proxy.carrier.clone(),
            city: proxy.city.clone(),
            state: proxy.state.clone(),
            asn: proxy.asn.clone(),
            usable_until: proxy.usable_until_ms,
            expires_at: proxy.expires_at_ms,
            returned: proxy.returned,
        }
    }
}

/// An extraction as returned by `POST /v1/extractions` and `GET /v1/extractions/{id}`.
/// Built only from the stored response, so a replay renders byte-identical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractionView {
    pub id: String,
    pub requested: u32,
    pub returned: u32,
    pub created_at: UnixMillis,
    pub proxies: Vec<ProxyView>,
}

impl From<&ExtractResponse> for ExtractionView {
    fn from(response: &ExtractResponse) -> Self {
        ExtractionView {
            id: response.id.to_string(),
            requested: response.requested,
            returned: response.returned,
            created_at: response.created_at_ms,
            proxies: response.proxies.iter().map(ProxyView::from).collect(),
        }
    }
}

/// `GET /v1/upstreams/{id}/inventory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryBody {
    pub upstream: UpstreamId,
    pub managed: u64,
    pub available_slots: u64,
    pub unextracted: u64,
    pub by_status: BTreeMap<ProxyStatus, u64>,
}

impl From<InventoryView> for InventoryBody {
    fn from(view: InventoryView) -> Self {
        InventoryBody {
            upstream: view.upstream,
            managed: view.managed,
            available_slots: view.available_slots,
            unextracted: view.unextracted,
            by_status: view.by_status,
        }
    }
}

/// `GET /v1/me`: who the token belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeBody {
    pub client: String,
    pub project: String,
    pub admin: bool,
    pub allowed_upstreams: Vec<UpstreamId>,
    pub allowed_regions: Vec<Label>,
}

/// A snapshot reference without the checksum (operators compare versions and epochs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotBody {
    pub version: u64,
    pub epoch: u64,
}

impl From<&SnapshotRef> for SnapshotBody {
    fn from(snapshot: &SnapshotRef) -> Self {
        SnapshotBody {
            version: snapshot.version,
            epoch: snapshot.epoch,
        }
    }
}

/// The last runtime report of a worker, summed up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportBody {
    pub sequence: u64,
    pub received_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub proxies: u64,
    pub active: u64,
    pub reserved: u64,
    pub draining: u64,
}

impl From<&StoredRuntime> for ReportBody {
    fn from(runtime: &StoredRuntime) -> Self {
        let entries = &runtime.report.entries;
        ReportBody {
            sequence: runtime.report.sequence,
            received_at: runtime.received_at_ms,
            expires_at: runtime.expires_at_ms,
            proxies: entries.len() as u64,
            active: entries.iter().map(|e| u64::from(e.active)).sum(),
            reserved: entries.iter().map(|e| u64::from(e.reserved)).sum(),
            draining: entries.iter().filter(|e| e.draining).count() as u64,
        }
    }
}

/// One worker in `GET /v1/admin/workers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerBody {
    pub worker: WorkerId,
    pub session_id: String,
    pub opened_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub issued_snapshot: Option<SnapshotBody>,
    pub acked_snapshot: Option<SnapshotBody>,
    pub last_report: Option<ReportBody>,
    /// What operators set: `active`, `cordoned` or `draining`.
    pub mode: proxypool_core::WorkerMode,
}

impl WorkerBody {
    pub fn new(
        session: &WorkerSession,
        runtime: Option<&StoredRuntime>,
        mode: proxypool_core::WorkerMode,
    ) -> Self {
        WorkerBody {
            mode,
            worker: session.worker.clone(),
            session_id: session.session_id.clone(),
            opened_at: session.opened_at_ms,
            expires_at: session.expires_at_ms,
            issued_snapshot: session.issued_snapshot.as_ref().map(SnapshotBody::from),
            acked_snapshot: session.acked_snapshot.as_ref().map(SnapshotBody::from),
            last_report: runtime.map(ReportBody::from),
        }
    }
}

/// `GET /v1/admin/workers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkersBody {
    pub workers: Vec<WorkerBody>,
    /// More live sessions exist than the listing limit.
    pub truncated: bool,
}

/// `POST /v1/admin/workers/{id}/cordon|drain|uncordon`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerModeBody {
    pub worker: WorkerId,
    /// `active`, `cordoned` or `draining`.
    pub mode: proxypool_core::WorkerMode,
    /// When the worker entered this mode.
    pub since: UnixMillis,
    /// Leases the worker serves with (at most the drain batch), as of this call.
    pub serving: u64,
    /// Leases being handed back (at most the drain batch), as of this call.
    pub draining: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_of(json: &str) -> Result<u32, String> {
        serde_json::from_str::<ExtractionRequestBody>(json)
            .map(|b| b.count)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn whole_numbers_written_with_a_fraction_of_zero_are_integers() {
        assert_eq!(count_of(r#"{"count": 2}"#), Ok(2));
        assert_eq!(count_of(r#"{"count": 2.0}"#), Ok(2));
        assert!(count_of(r#"{"count": 2.5}"#).is_err());
        assert!(count_of(r#"{"count": -1}"#).is_err());
        assert!(count_of(r#"{"count": 4294967296}"#).is_err());
        assert!(count_of(r#"{"count": "2"}"#).is_err());
        let body: ExtractionRequestBody =
            serde_json::from_str(r#"{"count": 1, "min_health_freshness_ms": 5.0}"#).unwrap();
        assert_eq!(body.min_health_freshness_ms, Some(5));
    }
}
