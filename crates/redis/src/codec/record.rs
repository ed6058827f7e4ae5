//! The proxy record as the scripts take and answer it: 22 tab-separated fields, the ones
//! the scripts test on every candidate first. Credentials live only in this value (and in a
//! stored extraction response), never in a key. The `records` hash stores a shorter form
//! (no id, times relative to the hard expiry: `P.encode_stored` in `src/lua/lib/codec.lua`);
//! the scripts convert, so this side only ever sees the full form.
//!
//! The field order is written once, in `tab_layout!` below; the Lua constants (`ST`,
//! `HARD`, ...) are generated from it. An empty username means "no credentials" (a username
//! is never empty otherwise).

use super::layout::tab_layout;
use super::{corrupt, opt_to_field, parse_opt_u64, parse_u64};
use proxypool_core::{
    Credentials, Health, Label, PoolResult, Protocol, ProxyId, ProxyRecord, ProxyStatus, UpstreamId,
};
use std::collections::BTreeMap;

tab_layout! {
    count NFIELDS;
    STATUS => ST,
    HARD_EXPIRY => HARD,
    USABLE_UNTIL => USABLE,
    SUCCEEDED_AT => SUCC,
    PROTOCOL => PROTO,
    UPSTREAM => UP,
    REGION => REGION,
    CARRIER => CARRIER,
    MAX_SESSIONS => MAXS,
    CHECKED_AT => CHECKED,
    LATENCY => LAT,
    FAILURES => FAILS,
    LAST_ERROR => ERR,
    FETCHED_AT => FETCHED,
    ID => ID,
    HOST => HOST,
    PORT => PORT,
    USERNAME => USER,
    PASSWORD => PASS,
    LABELS => LABELS,
    ISSUED_AT => ISSUED,
    WITHHELD_UNTIL => WITHHELD,
}

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
    let mut f = vec![String::new(); FIELDS];
    f[STATUS] = status_code(record.status).to_string();
    f[HARD_EXPIRY] = record.hard_expiry_ms.to_string();
    f[USABLE_UNTIL] = record.usable_until_ms.to_string();
    f[SUCCEEDED_AT] = opt_to_field(health.succeeded_at_ms);
    f[PROTOCOL] = record.protocol.as_str().to_owned();
    f[UPSTREAM] = record.upstream.to_string();
    f[REGION] = opt_to_field(record.region.as_ref());
    f[CARRIER] = opt_to_field(record.carrier.as_ref());
    f[MAX_SESSIONS] = record.max_sessions.to_string();
    f[CHECKED_AT] = opt_to_field(health.checked_at_ms);
    f[LATENCY] = opt_to_field(health.latency_ms);
    f[FAILURES] = health.failures.to_string();
    f[LAST_ERROR] = health.last_error.clone().unwrap_or_default();
    f[FETCHED_AT] = record.fetched_at_ms.to_string();
    f[ID] = record.id.to_string();
    f[HOST] = record.host.clone();
    f[PORT] = record.port.to_string();
    f[USERNAME] = username.to_owned();
    f[PASSWORD] = password.to_owned();
    f[LABELS] = labels;
    f[ISSUED_AT] = opt_to_field(record.issued_at_ms);
    f[WITHHELD_UNTIL] = opt_to_field(record.withheld_until_ms);
    f.join("\t")
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
    let credentials = (!f[USERNAME].is_empty()).then(|| Credentials::new(f[USERNAME], f[PASSWORD]));
    let labels: BTreeMap<String, String> = if f[LABELS].is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(f[LABELS]).map_err(|_| corrupt("record labels"))?
    };
    let latency = parse_opt_u64(f[LATENCY], what)?
        .map(u32::try_from)
        .transpose()
        .map_err(|_| corrupt(what))?;
    Ok(ProxyRecord {
        id: ProxyId::new(f[ID]).map_err(|_| corrupt("record id"))?,
        protocol: Protocol::parse(f[PROTOCOL]).ok_or_else(|| corrupt("record protocol"))?,
        host: f[HOST].to_owned(),
        port: f[PORT].parse().map_err(|_| corrupt(what))?,
        credentials,
        upstream: UpstreamId::new(f[UPSTREAM]).map_err(|_| corrupt("record upstream"))?,
        region: label(f[REGION])?,
        carrier: label(f[CARRIER])?,
        labels,
        status: status_of(f[STATUS])?,
        health: Health {
            checked_at_ms: parse_opt_u64(f[CHECKED_AT], what)?,
            succeeded_at_ms: parse_opt_u64(f[SUCCEEDED_AT], what)?,
            latency_ms: latency,
            failures: f[FAILURES].parse().map_err(|_| corrupt(what))?,
            last_error: (!f[LAST_ERROR].is_empty()).then(|| f[LAST_ERROR].to_owned()),
        },
        fetched_at_ms: parse_u64(f[FETCHED_AT], what)?,
        hard_expiry_ms: parse_u64(f[HARD_EXPIRY], what)?,
        usable_until_ms: parse_u64(f[USABLE_UNTIL], what)?,
        max_sessions: f[MAX_SESSIONS].parse().map_err(|_| corrupt(what))?,
        issued_at_ms: parse_opt_u64(f[ISSUED_AT], what)?,
        withheld_until_ms: parse_opt_u64(f[WITHHELD_UNTIL], what)?,
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
            record.issued_at_ms = Some(1_699_999_999_000);
            record.withheld_until_ms = Some(1_700_000_030_000);
            assert_eq!(decode(&encode(&record)).unwrap(), record);
        }
        assert!(decode("A\t1").is_err());
    }
}
