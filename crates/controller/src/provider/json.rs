//! The JSON list format: an array of objects, or an object holding it under `proxies` or
//! `data` (the two wrappers vendors use most), or wherever the upstream's `fields.list`
//! pointer says.
//!
//! Entry fields, unless `fields` maps them elsewhere: `host` (or `ip`), `port` (number or
//! numeric string), `protocol` (or `scheme`), `username`, `password`, `region` (or
//! `country`), `carrier`, `max_sessions`, and a lifetime as `ttl_ms`, `ttl_seconds` (or
//! `ttl`), `expires_at_ms` or `expires_at` (Unix seconds), and when the vendor issued it as
//! `issued_at_ms`, or `issued_at` or `created_at` (Unix seconds). A mapped field is read at
//! its pointer only; mapped `expires_at` and `issued_at` are absolute times in the
//! mapping's `time_unit`; a mapped `city` becomes the proxy's `city` label (the domain
//! model keeps places other than the region as labels). Unknown fields are ignored:
//! vendors add fields freely, and an entry is judged by what we need from it.

use super::entry::{EntryDefaults, EntryError, ParsedList, parse_port, parse_scheme};
use crate::config::{FieldMapConfig, TimeUnit};
use proxypool_core::{Candidate, Credentials, UnixMillis};
use serde_json::Value;

/// The body is not a JSON list at all (the whole fetch fails, nothing is upserted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the body is not a JSON proxy list")]
pub struct NotAList;

/// One page of a JSON list: its entries, how many there were (the empty page that ends a
/// page-numbered walk has none), and the next page's URL when the body names one.
#[derive(Debug, Default)]
pub struct JsonPage {
    pub list: ParsedList,
    pub entries: usize,
    pub next: Option<String>,
}

/// Parses a whole JSON body with the default field names.
pub fn parse_json(
    body: &[u8],
    now: UnixMillis,
    defaults: &EntryDefaults,
) -> Result<ParsedList, NotAList> {
    parse_json_page(body, now, defaults, &FieldMapConfig::default(), None).map(|page| page.list)
}

/// Parses one page: the list where `fields.list` points (or the default places), each
/// entry by `fields`, and the next URL at `next` (null, empty or absent: none; any other
/// non-string: not a list).
pub fn parse_json_page(
    body: &[u8],
    now: UnixMillis,
    defaults: &EntryDefaults,
    fields: &FieldMapConfig,
    next: Option<&str>,
) -> Result<JsonPage, NotAList> {
    let root: Value = serde_json::from_slice(body).map_err(|_| NotAList)?;
    let entries = match (&fields.list, &root) {
        (Some(pointer), _) => match root.pointer(pointer) {
            Some(Value::Array(entries)) => entries,
            _ => return Err(NotAList),
        },
        (None, Value::Array(entries)) => entries,
        (None, Value::Object(object)) => {
            match object.get("proxies").or_else(|| object.get("data")) {
                Some(Value::Array(entries)) => entries,
                _ => return Err(NotAList),
            }
        }
        _ => return Err(NotAList),
    };
    let mut list = ParsedList::default();
    for entry in entries {
        list.push(match entry {
            Value::Object(_) => parse_entry(&Entry { entry, fields }, now, defaults),
            _ => Err(EntryError::Malformed),
        });
    }
    let next = match next.map(|pointer| root.pointer(pointer)) {
        None | Some(None | Some(Value::Null)) => None,
        Some(Some(Value::String(url))) if url.trim().is_empty() => None,
        Some(Some(Value::String(url))) => Some(url.trim().to_owned()),
        Some(Some(_)) => return Err(NotAList),
    };
    Ok(JsonPage {
        list,
        entries: entries.len(),
        next,
    })
}

/// One entry object and where its fields are.
struct Entry<'a> {
    entry: &'a Value,
    fields: &'a FieldMapConfig,
}

impl Entry<'_> {
    /// The value at the mapped pointer, or under the first default name present.
    fn get(&self, mapped: &Option<String>, names: &[&str]) -> Option<&Value> {
        match mapped {
            Some(pointer) => self.entry.pointer(pointer),
            None => names.iter().find_map(|n| self.entry.get(*n)),
        }
    }

    fn text(&self, mapped: &Option<String>, names: &[&str]) -> Result<Option<&str>, EntryError> {
        match self.get(mapped, names) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(EntryError::Malformed),
        }
    }
}

fn parse_entry(
    entry: &Entry<'_>,
    now: UnixMillis,
    defaults: &EntryDefaults,
) -> Result<Candidate, EntryError> {
    let map = entry.fields;
    let host = entry
        .text(&map.host, &["host", "ip"])?
        .ok_or(EntryError::Malformed)?;
    let port = match entry.get(&map.port, &["port"]) {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .ok_or(EntryError::InvalidPort)?,
        Some(Value::String(s)) => parse_port(s)?,
        _ => return Err(EntryError::InvalidPort),
    };
    let protocol = entry
        .text(&map.protocol, &["protocol", "scheme"])?
        .map(parse_scheme)
        .transpose()?;
    let credentials = match (
        entry.text(&map.username, &["username", "user"])?,
        entry.text(&map.password, &["password", "pass"])?,
    ) {
        (None, None) => None,
        (Some(user), Some(pass)) if !user.is_empty() => Some(Credentials::new(user, pass)),
        _ => return Err(EntryError::Malformed),
    };
    let mut candidate = defaults.candidate(protocol, host, port, credentials)?;
    if let Some(region) = entry.text(&map.region, &["region", "country"])? {
        candidate.region = Some(region.to_owned());
    }
    if let Some(city) = entry.text(&map.city, &[])? {
        candidate.labels.insert("city".to_owned(), city.to_owned());
    }
    if let Some(carrier) = entry.text(&map.carrier, &["carrier"])? {
        candidate.carrier = Some(carrier.to_owned());
    }
    match entry.get(&map.max_sessions, &["max_sessions"]) {
        None | Some(Value::Null) => {}
        Some(value) => {
            let sessions = value
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(EntryError::Malformed)?;
            candidate.max_sessions = Some(sessions);
        }
    }
    let in_ms = |value: u64| match map.time_unit {
        TimeUnit::Seconds => value.saturating_mul(1000),
        TimeUnit::Ms => value,
    };
    candidate.expires_at_ms = match &map.expires_at {
        Some(pointer) => time_value(entry.entry.pointer(pointer))?.map(in_ms),
        None => expiry(entry.entry, now)?,
    };
    candidate.issued_at_ms = match &map.issued_at {
        Some(pointer) => time_value(entry.entry.pointer(pointer))?.map(in_ms),
        None => issued(entry.entry)?,
    };
    Ok(candidate)
}

/// A non-negative number (`InvalidExpiry` otherwise), or `None` when absent.
fn time_value(value: Option<&Value>) -> Result<Option<u64>, EntryError> {
    match value {
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

/// A default-named time field.
fn time_field(fields: &Value, name: &str) -> Result<Option<u64>, EntryError> {
    time_value(fields.get(name))
}

/// When the vendor says it issued the proxy: `issued_at_ms`, or `issued_at` /
/// `created_at` in Unix seconds. After a loss of the pool store it proves a proxy new.
fn issued(fields: &Value) -> Result<Option<UnixMillis>, EntryError> {
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
fn expiry(fields: &Value, now: UnixMillis) -> Result<Option<UnixMillis>, EntryError> {
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

    /// The simulated vendor's API shape, mapped.
    fn mapped(unit: TimeUnit) -> FieldMapConfig {
        let at = |p: &str| Some(p.to_owned());
        FieldMapConfig {
            list: at("/result/items"),
            host: at("/addr"),
            port: at("/port_no"),
            protocol: at("/kind"),
            username: at("/login"),
            password: at("/secret"),
            region: at("/geo/country"),
            city: at("/geo/city"),
            carrier: at("/isp"),
            expires_at: at("/valid_until"),
            issued_at: at("/issued"),
            max_sessions: at("/slots"),
            time_unit: unit,
        }
    }

    #[test]
    fn mapped_fields_are_read_at_their_pointers_only() {
        let body = br#"{"result": {"items": [
            {"addr": "1.2.3.4", "port_no": 8080, "kind": "socks5", "login": "u", "secret": "p",
             "geo": {"country": "DE", "city": "Berlin"}, "isp": "dt", "valid_until": 2000,
             "issued": 900, "slots": 3},
            {"addr": "1.2.3.5", "port_no": "81", "host": "ignored", "ttl": 5},
            {"host": "9.9.9.9", "port_no": 80},
            {"addr": "1.2.3.6"}
        ]}, "links": {"next": "/p/2"}}"#;
        let page = parse_json_page(
            body,
            1_000,
            &EntryDefaults::plain_http(),
            &mapped(TimeUnit::Seconds),
            Some("/links/next"),
        )
        .unwrap();
        assert_eq!((page.entries, page.next.as_deref()), (4, Some("/p/2")));
        let c = &page.list.candidates;
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].host.as_str(), c[0].port), ("1.2.3.4", 8080));
        assert_eq!(c[0].protocol, Protocol::Socks5);
        assert_eq!(c[0].credentials.as_ref().unwrap().username, "u");
        assert_eq!(c[0].region.as_deref(), Some("DE"));
        assert_eq!(c[0].labels.get("city").map(String::as_str), Some("Berlin"));
        assert_eq!(c[0].carrier.as_deref(), Some("dt"));
        assert_eq!(c[0].expires_at_ms, Some(2_000_000));
        assert_eq!(c[0].issued_at_ms, Some(900_000));
        assert_eq!(c[0].max_sessions, Some(3));
        // A mapped expiry replaces the default names: `ttl` is not read.
        assert_eq!(c[1].expires_at_ms, None);
        // The mapped host is missing in one entry, the port in another: refused, counted.
        assert_eq!(page.list.dropped[&EntryError::Malformed], 1);
        assert_eq!(page.list.dropped[&EntryError::InvalidPort], 1);
    }

    #[test]
    fn times_in_ms_and_the_end_of_the_walk() {
        let body = br#"{"result": {"items": [{"addr": "h", "port_no": 1, "valid_until": 2500}]},
                        "links": {"next": null}}"#;
        let page = parse_json_page(
            body,
            0,
            &EntryDefaults::plain_http(),
            &mapped(TimeUnit::Ms),
            Some("/links/next"),
        )
        .unwrap();
        assert_eq!(page.list.candidates[0].expires_at_ms, Some(2_500));
        assert_eq!(page.next, None);
        for next in [r#""""#, r#""  ""#] {
            let body = format!(r#"{{"result": {{"items": []}}, "links": {{"next": {next}}}}}"#);
            let page = parse_json_page(
                body.as_bytes(),
                0,
                &EntryDefaults::plain_http(),
                &mapped(TimeUnit::Ms),
                Some("/links/next"),
            )
            .unwrap();
            assert_eq!((page.entries, page.next), (0, None));
        }
    }

    #[test]
    fn a_list_pointer_that_is_not_an_array_or_a_next_that_is_not_text_is_no_list() {
        let fields = mapped(TimeUnit::Seconds);
        let defaults = EntryDefaults::plain_http();
        for body in [
            &br#"{"result": {"items": {"addr": "h"}}}"#[..],
            br#"{"proxies": []}"#,
            br#"{"result": {"items": []}, "links": {"next": 2}}"#,
        ] {
            assert_eq!(
                parse_json_page(body, 0, &defaults, &fields, Some("/links/next")).unwrap_err(),
                NotAList
            );
        }
    }
}
