//! The proxy record as the scripts take and answer it: 20 tab-separated fields, the ones
//! the scripts test on every candidate first. Credentials live only in this value (and in a
//! stored extraction response), never in a key. The `records` hash stores a shorter form
//! (no id, times relative to the hard expiry: `P.encode_stored` in `src/lua/lib.lua`); the
//! scripts convert, so this side only ever sees the full form.
//!
//! ```text
//! 1 status code  2 hard expiry  3 usable_until  4 succeeded_at  5 protocol  6 upstream
//! 7 region  8 carrier  9 max_sessions  10 checked_at  11 latency  12 failures
//! 13 last error  14 fetched_at  15 id  16 host  17 port  18 username  19 password
//! 20 labels (JSON object, '' when empty)
//! ```
//! An empty username means "no credentials" (a username is never empty otherwise).

use super::{corrupt, opt_to_field, parse_opt_u64, parse_u64};
use proxypool_core::{
    Credentials, Health, Label, PoolResult, Protocol, ProxyId, ProxyRecord, ProxyStatus, UpstreamId,
};
use std::collections::BTreeMap;

const FIELDS: usize = 20;

/// One-letter status codes (the inventory hash counts by them too).
pub(crate) fn status_code(status: ProxyStatus) -> char {
    match status {
        ProxyStatus::Fetched => 'F',
        ProxyStatus::Checking => 'C',
        ProxyStatus::Available => 'A',
        ProxyStatus::Suspect => 'S',
        ProxyStatus::Unhealthy => 'U',
        ProxyStatus::Extracted => 'X',
        ProxyStatus::Expired => 'E',
        ProxyStatus::Removed => 'R',
    }
}

pub(crate) fn status_of(code: &str) -> PoolResult<ProxyStatus> {
    ProxyStatus::ALL
        .into_iter()
        .find(|s| code.len() == 1 && code.starts_with(status_code(*s)))
        .ok_or_else(|| corrupt("record status"))
}

pub(crate) fn encode(record: &ProxyRecord) -> String {
    let (username, password) = match &record.credentials {
        Some(c) => (c.username.as_str(), c.password.expose()),
        None => ("", ""),
    };
    let labels = if record.labels.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&record.labels).unwrap_or_default()
    };
    let health = &record.health;
    [
        status_code(record.status).to_string(),
        record.hard_expiry_ms.to_string(),
        record.usable_until_ms.to_string(),
        opt_to_field(health.succeeded_at_ms),
        record.protocol.as_str().to_owned(),
        record.upstream.to_string(),
        opt_to_field(record.region.as_ref()),
        opt_to_field(record.carrier.as_ref()),
        record.max_sessions.to_string(),
        opt_to_field(health.checked_at_ms),
        opt_to_field(health.latency_ms),
        health.failures.to_string(),
        health.last_error.clone().unwrap_or_default(),
        record.fetched_at_ms.to_string(),
        record.id.to_string(),
        record.host.clone(),
        record.port.to_string(),
        username.to_owned(),
        password.to_owned(),
        labels,
    ]
    .join("\t")
}

fn label(field: &str) -> PoolResult<Option<Label>> {
    if field.is_empty() {
        return Ok(None);
    }
    Label::new(field)
        .map(Some)
        .map_err(|_| corrupt("record label"))
}

pub(crate) fn decode(value: &str) -> PoolResult<ProxyRecord> {
    let f: Vec<&str> = value.split('\t').collect();
    if f.len() != FIELDS {
        return Err(corrupt("record"));
    }
    let what = "record";
    let credentials = (!f[17].is_empty()).then(|| Credentials::new(f[17], f[18]));
    let labels: BTreeMap<String, String> = if f[19].is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(f[19]).map_err(|_| corrupt("record labels"))?
    };
    let latency = parse_opt_u64(f[10], what)?
        .map(u32::try_from)
        .transpose()
        .map_err(|_| corrupt(what))?;
    Ok(ProxyRecord {
        id: ProxyId::new(f[14]).map_err(|_| corrupt("record id"))?,
        protocol: Protocol::parse(f[4]).ok_or_else(|| corrupt("record protocol"))?,
        host: f[15].to_owned(),
        port: f[16].parse().map_err(|_| corrupt(what))?,
        credentials,
        upstream: UpstreamId::new(f[5]).map_err(|_| corrupt("record upstream"))?,
        region: label(f[6])?,
        carrier: label(f[7])?,
        labels,
        status: status_of(f[0])?,
        health: Health {
            checked_at_ms: parse_opt_u64(f[9], what)?,
            succeeded_at_ms: parse_opt_u64(f[3], what)?,
            latency_ms: latency,
            failures: f[11].parse().map_err(|_| corrupt(what))?,
            last_error: (!f[12].is_empty()).then(|| f[12].to_owned()),
        },
        fetched_at_ms: parse_u64(f[13], what)?,
        hard_expiry_ms: parse_u64(f[1], what)?,
        usable_until_ms: parse_u64(f[2], what)?,
        max_sessions: f[8].parse().map_err(|_| corrupt(what))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::{Candidate, FetchedBatch, prepare_batch};

    #[test]
    fn records_round_trip_with_and_without_optional_fields() {
        let mut full = Candidate::new(Protocol::Socks5, "p1.vendor.test", 1080);
        full.credentials = Some(Credentials::new("alice", "pa|ss:w@rd"));
        full.region = Some("US".into());
        full.carrier = Some("att".into());
        full.labels.insert("tier".into(), "gold \"quoted\"".into());
        let batch = FetchedBatch {
            upstream: UpstreamId::new("acme").unwrap(),
            operation_id: None,
            ttl_ms: 30_000,
            safety_margin_ms: 5_000,
            max_size: 10,
            default_max_sessions: 4,
            candidates: vec![full, Candidate::new(Protocol::Http, "10.0.0.1", 8080)],
        };
        let prepared = prepare_batch(1_700_000_000_000, &batch).unwrap();
        for mut record in prepared.records {
            assert_eq!(decode(&encode(&record)).unwrap(), record);
            record.status = ProxyStatus::Unhealthy;
            record.health = Health {
                checked_at_ms: Some(1),
                succeeded_at_ms: Some(2),
                latency_ms: Some(3),
                failures: 4,
                last_error: Some("connect_timeout".into()),
            };
            assert_eq!(decode(&encode(&record)).unwrap(), record);
        }
        assert!(decode("A\t1").is_err());
    }
}
