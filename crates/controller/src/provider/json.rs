//! The JSON list format: an array of objects, or an object holding it under `proxies` or
//! `data` (the two wrappers vendors use most).
//!
//! Entry fields: `host` (or `ip`), `port` (number or numeric string), `protocol` (or
//! `scheme`), `username`, `password`, `region` (or `country`), `carrier`, `max_sessions`,
//! and a lifetime as `ttl_ms`, `ttl_seconds` (or `ttl`), `expires_at_ms` or `expires_at`
//! (Unix seconds), and when the vendor issued it as `issued_at_ms`, or `issued_at` or
//! `created_at` (Unix seconds). Unknown fields are ignored: vendors add fields freely, and an entry is
//! judged by what we need from it.

use super::entry::{EntryDefaults, EntryError, ParsedList, parse_port, parse_scheme};
use proxypool_core::{Candidate, Credentials, UnixMillis};
use serde_json::{Map, Value};

/// The body is not a JSON list at all (the whole fetch fails, nothing is upserted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the body is not a JSON proxy list")]
pub struct NotAList;

/// Parses a whole JSON body.
pub fn parse_json(
    body: &[u8],
    now: UnixMillis,
    defaults: &EntryDefaults,
) -> Result<ParsedList, NotAList> {
    let root: Value = serde_json::from_slice(body).map_err(|_| NotAList)?;
    let entries = match root {
        Value::Array(entries) => entries,
        Value::Object(mut object) => {
            match object.remove("proxies").or_else(|| object.remove("data")) {
                Some(Value::Array(entries)) => entries,
                _ => return Err(NotAList),
            }
        }
        _ => return Err(NotAList),
    };
    let mut list = ParsedList::default();
    for entry in &entries {
        list.push(match entry {
            Value::Object(fields) => parse_entry(fields, now, defaults),
            _ => Err(EntryError::Malformed),
        });
    }
    Ok(list)
}

fn parse_entry(
    fields: &Map<String, Value>,
    now: UnixMillis,
    defaults: &EntryDefaults,
) -> Result<Candidate, EntryError> {
    let text = |names: &[&str]| -> Result<Option<&str>, EntryError> {
        match names.iter().find_map(|n| fields.get(*n)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(EntryError::Malformed),
        }
    };
    let host = text(&["host", "ip"])?.ok_or(EntryError::Malformed)?;
    let port = match fields.get("port") {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .ok_or(EntryError::InvalidPort)?,
        Some(Value::String(s)) => parse_port(s)?,
        _ => return Err(EntryError::InvalidPort),
    };
    let protocol = text(&["protocol", "scheme"])?
        .map(parse_scheme)
        .transpose()?;
    let credentials = match (text(&["username", "user"])?, text(&["password", "pass"])?) {
        (None, None) => None,
        (Some(user), Some(pass)) if !user.is_empty() => Some(Credentials::new(user, pass)),
        _ => return Err(EntryError::Malformed),
    };
    let mut candidate = defaults.candidate(protocol, host, port, credentials)?;
    if let Some(region) = text(&["region", "country"])? {
        candidate.region = Some(region.to_owned());
    }
    if let Some(carrier) = text(&["carrier"])? {
        candidate.carrier = Some(carrier.to_owned());
    }
    if let Some(value) = fields.get("max_sessions") {
        let sessions = value
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or(EntryError::Malformed)?;
        candidate.max_sessions = Some(sessions);
    }
    candidate.expires_at_ms = expiry(fields, now)?;
    candidate.issued_at_ms = issued(fields)?;
    Ok(candidate)
}

/// A non-negative number field (`InvalidExpiry` otherwise), or `None` when absent.
fn time_field(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, EntryError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.is_finite())
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or(EntryError::InvalidExpiry),
        Some(_) => Err(EntryError::InvalidExpiry),
    }
}

/// When the vendor says it issued the proxy: `issued_at_ms`, or `issued_at` /
/// `created_at` in Unix seconds. After a loss of the pool store it proves a proxy new.
fn issued(fields: &Map<String, Value>) -> Result<Option<UnixMillis>, EntryError> {
    if let Some(ms) = time_field(fields, "issued_at_ms")? {
        return Ok(Some(ms));
    }
    for name in ["issued_at", "created_at"] {
        if let Some(secs) = time_field(fields, name)? {
            return Ok(Some(secs.saturating_mul(1000)));
        }
    }
    Ok(None)
}

/// The entry's own hard expiry, from whichever lifetime field it carries.
fn expiry(fields: &Map<String, Value>, now: UnixMillis) -> Result<Option<UnixMillis>, EntryError> {
    let number = |name: &str| time_field(fields, name);
    if let Some(ms) = number("expires_at_ms")? {
        return Ok(Some(ms));
    }
    if let Some(secs) = number("expires_at")? {
        return Ok(Some(secs.saturating_mul(1000)));
    }
    if let Some(ms) = number("ttl_ms")? {
        return Ok(Some(now.saturating_add(ms)));
    }
    for name in ["ttl_seconds", "ttl"] {
        if let Some(secs) = number(name)? {
            return Ok(Some(now.saturating_add(secs.saturating_mul(1000))));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::Protocol;

    #[test]
    fn reads_entries_and_lifetimes() {
        let body = br#"{"proxies": [
            {"host": "1.2.3.4", "port": 8080},
            {"ip": "5.6.7.8", "port": "1080", "protocol": "socks5", "username": "u", "password": "p",
             "region": "US", "carrier": "att", "ttl_seconds": 30, "extra": {"ignored": true}},
            {"host": "9.9.9.9", "port": 80, "expires_at": 2000, "issued_at": 900},
            {"host": "9.9.9.8", "port": 80, "ttl_ms": 500, "max_sessions": 2, "issued_at_ms": 950},
            {"host": "9.9.9.7", "port": 80, "created_at": 800}
        ]}"#;
        let list = parse_json(body, 1_000, &EntryDefaults::plain_http()).unwrap();
        assert!(list.dropped.is_empty());
        let c = &list.candidates;
        assert_eq!(c[0].expires_at_ms, None);
        assert_eq!(c[1].protocol, Protocol::Socks5);
        assert_eq!(c[1].region.as_deref(), Some("US"));
        assert_eq!(c[1].expires_at_ms, Some(31_000));
        assert_eq!(c[2].expires_at_ms, Some(2_000_000));
        assert_eq!(c[3].expires_at_ms, Some(1_500));
        assert_eq!(c[3].max_sessions, Some(2));
        let issued: Vec<_> = c.iter().map(|c| c.issued_at_ms).collect();
        assert_eq!(
            issued,
            [None, None, Some(900_000), Some(950), Some(800_000)]
        );
    }

    #[test]
    fn bad_entries_are_dropped_and_bad_bodies_refused() {
        let body = br#"[1, {"port": 80}, {"host": "h", "port": 0}, {"host": "h", "port": 80, "protocol": "ftp"},
            {"host": "h", "port": 80, "password": "p"}, {"host": "h", "port": 80, "ttl": "soon"},
            {"host": "h", "port": 80, "issued_at": -5}, {"host": "ok", "port": 1}]"#;
        let list = parse_json(body, 0, &EntryDefaults::plain_http()).unwrap();
        assert_eq!(list.candidates.len(), 1);
        assert_eq!(list.dropped[&EntryError::Malformed], 3);
        assert_eq!(list.dropped[&EntryError::InvalidPort], 1);
        assert_eq!(list.dropped[&EntryError::UnknownScheme], 1);
        assert_eq!(list.dropped[&EntryError::InvalidExpiry], 2);
        assert_eq!(
            parse_json(b"{\"x\": 1}", 0, &EntryDefaults::plain_http()).unwrap_err(),
            NotAList
        );
        assert_eq!(
            parse_json(b"not json", 0, &EntryDefaults::plain_http()).unwrap_err(),
            NotAList
        );
    }
}
