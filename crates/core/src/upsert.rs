//! Vendor batches going into the pool.
//!
//! [`prepare_batch`] is the validation every adapter runs before writing anything: a bad
//! batch fails whole with [`PoolError::InvalidInput`]; a bad candidate is dropped and counted
//! by reason. What comes out is a list of normalized records the adapter can store as-is.

use crate::error::PoolError;
use crate::geo::GeoLabel;
use crate::ids::{Label, ProxyId, UpstreamId};
use crate::proxy::{Health, Protocol, ProxyRecord, ProxyStatus, proxy_id_for};
use crate::secret::Credentials;
use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// Most candidates one batch may carry; adapters chunk internally below this.
pub const MAX_BATCH_CANDIDATES: usize = 100_000;
/// Longest proxy lifetime the pool accepts (a day); vendors' short-lived proxies live minutes.
pub const MAX_TTL_MS: u64 = 24 * 60 * 60 * 1000;
const MAX_HOST_LEN: usize = 253;
const MAX_CREDENTIAL_LEN: usize = 255;
const MAX_LABELS: usize = 16;
const MAX_LABEL_TEXT: usize = 64;

/// One proxy as a vendor listed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub credentials: Option<Credentials>,
    pub region: Option<String>,
    pub carrier: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The vendor's own hard expiry for this proxy, when it gives one.
    pub expires_at_ms: Option<UnixMillis>,
    /// When the vendor says it issued this proxy, when it says so: after a loss of the
    /// pool store, the proof that a proxy is new (`crate::store_mark`).
    #[serde(default)]
    pub issued_at_ms: Option<UnixMillis>,
    /// Overrides the upstream's default `max_sessions`.
    pub max_sessions: Option<u32>,
}

impl Candidate {
    /// A plain candidate with no credentials or labels (handy in tests and static lists).
    pub fn new(protocol: Protocol, host: impl Into<String>, port: u16) -> Self {
        Candidate {
            protocol,
            host: host.into(),
            port,
            credentials: None,
            region: None,
            carrier: None,
            labels: BTreeMap::new(),
            expires_at_ms: None,
            issued_at_ms: None,
            max_sessions: None,
        }
    }
}

/// One fetch from one upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedBatch {
    pub upstream: UpstreamId,
    /// When set, a retried batch with the same id returns the first report and changes
    /// nothing (a write whose reply was lost).
    pub operation_id: Option<String>,
    /// Lifetime of a proxy without its own expiry.
    pub ttl_ms: u64,
    /// Nothing is handed out within this margin of the hard expiry.
    pub safety_margin_ms: u64,
    /// Hard cap on this upstream's un-extracted inventory.
    pub max_size: u64,
    pub default_max_sessions: u32,
    pub candidates: Vec<Candidate>,
}

/// Why a candidate was dropped before it reached the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    InvalidHost,
    InvalidPort,
    InvalidCredentials,
    InvalidLabel,
    /// Already past (or too close to) its expiry: usable for no time at all.
    ExpiresTooSoon,
    /// The same proxy appears twice in one batch; the first one wins.
    DuplicateInBatch,
}

/// What an upsert did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpsertReport {
    /// New lifetimes created (new generations of proxies given back and re-issued among
    /// them: `crate::extract::renews_given_back`).
    pub inserted: u32,
    /// Existing lifetimes of the same upstream whose expiry and credentials were updated.
    pub refreshed: u32,
    /// Duplicates of a proxy currently held by another upstream (the incumbent keeps it).
    pub foreign_duplicates: u32,
    /// Refreshes of proxies already extracted in this lifetime (never re-enter; one given
    /// back re-enters only as a new generation, counted as inserted).
    pub extracted_ignored: u32,
    /// New proxies refused because the upstream's un-extracted inventory is at `max_size`.
    pub over_max_size: u32,
    /// Candidates dropped by validation, by reason.
    pub dropped: BTreeMap<DropReason, u32>,
}

impl UpsertReport {
    pub fn dropped_total(&self) -> u32 {
        self.dropped.values().sum()
    }
}

/// A validated batch: normalized records ready to store, plus what validation dropped.
#[derive(Debug, Clone)]
pub struct PreparedBatch {
    pub upstream: UpstreamId,
    pub operation_id: Option<String>,
    pub max_size: u64,
    pub records: Vec<ProxyRecord>,
    pub dropped: BTreeMap<DropReason, u32>,
}

/// Validates a batch (failing it whole when the batch itself is wrong) and normalizes each
/// candidate into a FETCHED record with its expiry and safety margin applied.
pub fn prepare_batch(now: UnixMillis, batch: &FetchedBatch) -> Result<PreparedBatch, PoolError> {
    if batch.ttl_ms == 0 || batch.ttl_ms > MAX_TTL_MS {
        return Err(PoolError::invalid(format!(
            "ttl_ms must be between 1 and {MAX_TTL_MS}"
        )));
    }
    if batch.safety_margin_ms >= batch.ttl_ms {
        return Err(PoolError::invalid(
            "safety_margin_ms must be less than ttl_ms",
        ));
    }
    if batch.max_size == 0 {
        return Err(PoolError::invalid("max_size must be at least 1"));
    }
    if batch.default_max_sessions == 0 {
        return Err(PoolError::invalid(
            "default_max_sessions must be at least 1",
        ));
    }
    if batch.candidates.len() > MAX_BATCH_CANDIDATES {
        return Err(PoolError::invalid(format!(
            "a batch carries at most {MAX_BATCH_CANDIDATES} candidates"
        )));
    }
    if let Some(op) = &batch.operation_id
        && (op.is_empty() || op.len() > 128 || op.chars().any(|c| c.is_control()))
    {
        return Err(PoolError::invalid(
            "operation_id must be 1-128 characters without control characters",
        ));
    }

    let mut dropped: BTreeMap<DropReason, u32> = BTreeMap::new();
    let mut seen: HashSet<ProxyId> = HashSet::new();
    let mut records = Vec::with_capacity(batch.candidates.len());
    for candidate in &batch.candidates {
        match prepare_candidate(now, batch, candidate) {
            Ok(record) if seen.insert(record.id.clone()) => records.push(record),
            Ok(_) => *dropped.entry(DropReason::DuplicateInBatch).or_default() += 1,
            Err(reason) => *dropped.entry(reason).or_default() += 1,
        }
    }
    Ok(PreparedBatch {
        upstream: batch.upstream.clone(),
        operation_id: batch.operation_id.clone(),
        max_size: batch.max_size,
        records,
        dropped,
    })
}

fn prepare_candidate(
    now: UnixMillis,
    batch: &FetchedBatch,
    candidate: &Candidate,
) -> Result<ProxyRecord, DropReason> {
    let host = normalize_host(&candidate.host).ok_or(DropReason::InvalidHost)?;
    if candidate.port == 0 {
        return Err(DropReason::InvalidPort);
    }
    if let Some(creds) = &candidate.credentials {
        let ok = |s: &str| s.len() <= MAX_CREDENTIAL_LEN && !s.chars().any(|c| c.is_control());
        if creds.username.is_empty() || !ok(&creds.username) || !ok(creds.password.expose()) {
            return Err(DropReason::InvalidCredentials);
        }
    }
    let label = |value: &Option<String>| -> Result<Option<Label>, DropReason> {
        value
            .as_deref()
            .map(|v| Label::new(v).map_err(|_| DropReason::InvalidLabel))
            .transpose()
    };
    let region = label(&candidate.region)?;
    let carrier = label(&candidate.carrier)?;
    if candidate.labels.len() > MAX_LABELS
        || candidate.labels.iter().any(|(k, v)| {
            k.is_empty()
                || k.len() > MAX_LABEL_TEXT
                || v.len() > MAX_LABEL_TEXT
                || k.chars().chain(v.chars()).any(|c| c.is_control())
        })
    {
        return Err(DropReason::InvalidLabel);
    }

    let ttl_expiry = now.saturating_add(batch.ttl_ms);
    // A vendor's own expiry may shorten the lifetime, never extend it past our TTL.
    let hard_expiry_ms = candidate
        .expires_at_ms
        .map_or(ttl_expiry, |at| at.min(ttl_expiry));
    let usable_until_ms = hard_expiry_ms.saturating_sub(batch.safety_margin_ms);
    if usable_until_ms <= now {
        return Err(DropReason::ExpiresTooSoon);
    }
    let max_sessions = candidate
        .max_sessions
        .unwrap_or(batch.default_max_sessions)
        .max(1);

    Ok(ProxyRecord {
        id: proxy_id_for(
            candidate.protocol,
            &host,
            candidate.port,
            candidate.credentials.as_ref().map(|c| c.username.as_str()),
        ),
        protocol: candidate.protocol,
        host,
        port: candidate.port,
        credentials: candidate.credentials.clone(),
        upstream: batch.upstream.clone(),
        region,
        carrier,
        labels: canonical_labels(&candidate.labels),
        status: ProxyStatus::Fetched,
        health: Health::default(),
        fetched_at_ms: now,
        hard_expiry_ms,
        usable_until_ms,
        max_sessions,
        issued_at_ms: candidate.issued_at_ms,
        withheld_until_ms: None,
    })
}

/// The labels as stored: the geo labels in their canonical form (`crate::geo`), so every
/// store and every gateway compares them as plain strings. A geo value that names no place
/// is left out rather than costing the entry its host and port.
fn canonical_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter_map(|(key, value)| match GeoLabel::from_key(key) {
            Some(geo) => geo.canonical(value).map(|v| (key.clone(), v)),
            None => Some((key.clone(), value.clone())),
        })
        .collect()
}

/// Lower-cases a host name or IP literal and rejects anything that is neither.
fn normalize_host(raw: &str) -> Option<String> {
    let host = raw.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Some(host.to_ascii_lowercase());
    }
    let valid = !host.is_empty()
        && host.len() <= MAX_HOST_LEN
        && host.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && !part.starts_with('-')
                && !part.ends_with('-')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    valid.then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(candidates: Vec<Candidate>) -> FetchedBatch {
        FetchedBatch {
            upstream: UpstreamId::new("acme").unwrap(),
            operation_id: None,
            ttl_ms: 30_000,
            safety_margin_ms: 5_000,
            max_size: 100,
            default_max_sessions: 4,
            candidates,
        }
    }

    #[test]
    fn hosts_are_validated_and_normalized() {
        assert_eq!(
            normalize_host("Proxy.Example.com").as_deref(),
            Some("proxy.example.com")
        );
        assert_eq!(normalize_host("[::1]").as_deref(), Some("::1"));
        assert_eq!(normalize_host("10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert!(normalize_host("bad host").is_none());
        assert!(normalize_host("").is_none());
        assert!(normalize_host("a..b").is_none());
        assert!(normalize_host("-a.com").is_none());
    }

    #[test]
    fn geo_labels_are_stored_canonical_and_a_bad_one_costs_only_itself() {
        let mut candidate = Candidate::new(Protocol::Http, "geo.example", 8080);
        for (key, value) in [("city", "New York"), ("asn", "AS7922"), ("state", "a/b")] {
            candidate.labels.insert(key.into(), value.into());
        }
        candidate
            .labels
            .insert("isp".into(), "Comcast Cable".into());
        let prepared = prepare_batch(0, &batch(vec![candidate])).unwrap();
        let labels = &prepared.records[0].labels;
        assert_eq!(labels.get("city").map(String::as_str), Some("new_york"));
        assert_eq!(labels.get("asn").map(String::as_str), Some("7922"));
        assert_eq!(labels.get("state"), None);
        assert_eq!(labels.get("isp").map(String::as_str), Some("Comcast Cable"));
    }

    #[test]
    fn bad_batches_fail_whole() {
        let mut b = batch(vec![]);
        b.safety_margin_ms = 30_000;
        assert!(prepare_batch(0, &b).is_err());
        let mut b = batch(vec![]);
        b.max_size = 0;
        assert!(prepare_batch(0, &b).is_err());
        let mut b = batch(vec![]);
        b.operation_id = Some("op\n1".into());
        assert!(prepare_batch(0, &b).is_err());
        let mut b = batch(vec![]);
        b.ttl_ms = 0;
        let error = prepare_batch(0, &b).unwrap_err().to_string();
        assert!(
            error.contains(&format!("ttl_ms must be between 1 and {MAX_TTL_MS}")),
            "{error}"
        );
    }

    #[test]
    fn candidates_are_dropped_by_reason() {
        let mut too_soon = Candidate::new(Protocol::Http, "a.example", 1);
        too_soon.expires_at_ms = Some(1_000 + 5_000);
        let mut bad_region = Candidate::new(Protocol::Http, "b.example", 1);
        bad_region.region = Some("us-east".into());
        let prepared = prepare_batch(
            1_000,
            &batch(vec![
                Candidate::new(Protocol::Http, "ok.example", 8080),
                Candidate::new(Protocol::Http, "OK.example", 8080),
                Candidate::new(Protocol::Http, "bad host", 8080),
                Candidate::new(Protocol::Http, "c.example", 0),
                too_soon,
                bad_region,
            ]),
        )
        .unwrap();
        assert_eq!(prepared.records.len(), 1);
        let record = &prepared.records[0];
        assert_eq!(record.hard_expiry_ms, 31_000);
        assert_eq!(record.usable_until_ms, 26_000);
        assert_eq!(record.status, ProxyStatus::Fetched);
        assert_eq!(record.max_sessions, 4);
        let d = &prepared.dropped;
        assert_eq!(d[&DropReason::DuplicateInBatch], 1);
        assert_eq!(d[&DropReason::InvalidHost], 1);
        assert_eq!(d[&DropReason::InvalidPort], 1);
        assert_eq!(d[&DropReason::ExpiresTooSoon], 1);
        assert_eq!(d[&DropReason::InvalidLabel], 1);
    }

    #[test]
    fn vendor_expiry_never_extends_past_ttl() {
        let mut long = Candidate::new(Protocol::Socks5, "a.example", 1080);
        long.expires_at_ms = Some(10_000_000);
        let prepared = prepare_batch(0, &batch(vec![long])).unwrap();
        assert_eq!(prepared.records[0].hard_expiry_ms, 30_000);
    }
}
