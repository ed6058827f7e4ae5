//! The JSON list format: an array of objects, or an object holding it under `proxies` or
//! `data` (the two wrappers vendors use most), or wherever the upstream's `fields.list`
//! pointer says.
//!
//! Entry fields, unless `fields` maps them elsewhere: `host` (or `ip`), `port` (number or
//! numeric string), `protocol` (or `scheme`), `username`, `password`, `region` (or
//! `country`), `carrier`, `max_sessions`, and a lifetime as `ttl_ms`, `ttl_seconds` (or
//! `ttl`), `expires_at_ms` or `expires_at`, and when the vendor issued it as
//! `issued_at_ms`, or `issued_at` or `created_at`. Times are read by [`super::timestamps`]:
//! Unix seconds or milliseconds, or RFC 3339 strings. A mapped field is read at its
//! pointer only; mapped `city`, `state` and `asn` become the proxy's labels of those names
//! (the domain model keeps places other than the region as labels, canonicalised when the
//! batch is prepared). A mapped `valid` field keeps only the entries whose value there is
//! one of `valid_values`. Unknown fields are ignored: vendors add fields freely, and an
//! entry is judged by what we need from it.
//!
//! An expiry or a lifetime that cannot be read drops the entry (`invalid_expires_at`,
//! `invalid_ttl`): a proxy kept past the vendor's end would fail clients. An issue time
//! that cannot be read is left out and counted (`invalid_issued_at`), and the entry kept.

use super::entry::{EntryDefaults, EntryError, Ignored, ParsedList, parse_port, parse_scheme};
use super::timestamps::read_time;
use crate::config::{FieldMapConfig, FlagValue, TimeUnit};
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
    let usable = fields.valid.as_ref().map(|_| fields.usable_values());
    let mut list = ParsedList::default();
    for entry in entries {
        let mut ignored = None;
        let parsed = match entry {
            Value::Object(_) => {
                let entry = Entry {
                    entry,
                    fields,
                    usable: usable.as_deref(),
                };
                parse_entry(&entry, now, defaults, &mut ignored)
            }
            _ => Err(EntryError::Malformed),
        };
        if let (Ok(_), Some(reason)) = (&parsed, ignored) {
            list.ignore(reason);
        }
        list.push(parsed);
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

/// One entry object, where its fields are, and the values of `valid` that mean usable
/// (`None`: no validity field is mapped).
struct Entry<'a> {
    entry: &'a Value,
    fields: &'a FieldMapConfig,
    usable: Option<&'a [FlagValue]>,
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

    /// A label's text, a whole number written as its digits (an ASN as a JSON number).
    fn label(&self, mapped: &Option<String>) -> Result<Option<String>, EntryError> {
        match self.get(mapped, &[]) {
            Some(Value::Number(n)) if n.is_u64() => Ok(Some(n.to_string())),
            _ => Ok(self.text(mapped, &[])?.map(str::to_owned)),
        }
    }

    /// Whether the vendor says the entry is usable (always, when no `valid` is mapped).
    fn usable(&self) -> bool {
        let Some(usable) = self.usable else {
            return true;
        };
        let value = self.get(&self.fields.valid, &[]);
        usable.iter().any(|flag| match (flag, value) {
            (FlagValue::Bool(b), Some(Value::Bool(v))) => b == v,
            (FlagValue::Integer(i), Some(Value::Number(n))) => {
                n.as_i64() == Some(*i) || n.as_f64() == Some(*i as f64)
            }
            (FlagValue::Text(t), Some(Value::String(v))) => t == v,
            _ => false,
        })
    }

    /// A time at the mapped pointer, or under the first default name present.
    fn time(
        &self,
        mapped: &Option<String>,
        names: &[(&str, Option<TimeUnit>)],
    ) -> Result<Option<UnixMillis>, ()> {
        let unit = self.fields.time_unit;
        if let Some(pointer) = mapped {
            return read_time(self.entry.pointer(pointer), unit).map_err(|_| ());
        }
        for (name, named_unit) in names {
            if let Some(at) =
                read_time(self.entry.get(*name), named_unit.or(unit)).map_err(|_| ())?
            {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }
}

fn parse_entry(
    entry: &Entry<'_>,
    now: UnixMillis,
    defaults: &EntryDefaults,
    ignored: &mut Option<Ignored>,
) -> Result<Candidate, EntryError> {
    if !entry.usable() {
        return Err(EntryError::VendorInvalid);
    }
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
    for (key, mapped) in [
        ("city", &map.city),
        ("state", &map.state),
        ("asn", &map.asn),
    ] {
        if let Some(value) = entry.label(mapped)? {
            candidate.labels.insert(key.to_owned(), value);
        }
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
    candidate.expires_at_ms = match &map.expires_at {
        Some(_) => entry
            .time(&map.expires_at, &[])
            .map_err(|()| EntryError::InvalidExpiresAt)?,
        None => expiry(entry, now)?,
    };
    let issued = [
        ("issued_at_ms", Some(TimeUnit::Ms)),
        ("issued_at", None),
        ("created_at", None),
    ];
    // After a loss of the pool store the issue time proves a proxy new; without it the
    // proxy waits out the recovery like any other, so a bad one costs only itself.
    candidate.issued_at_ms = entry.time(&map.issued_at, &issued).unwrap_or_else(|()| {
        *ignored = Some(Ignored::InvalidIssuedAt);
        None
    });
    Ok(candidate)
}

/// The entry's own hard expiry, from whichever default-named lifetime field it carries:
/// an absolute time first, then a lifetime from `now`.
fn expiry(entry: &Entry<'_>, now: UnixMillis) -> Result<Option<UnixMillis>, EntryError> {
    let absolute = [("expires_at_ms", Some(TimeUnit::Ms)), ("expires_at", None)];
    if let Some(at) = entry
        .time(&None, &absolute)
        .map_err(|()| EntryError::InvalidExpiresAt)?
    {
        return Ok(Some(at));
    }
    for (name, scale) in [("ttl_ms", 1), ("ttl_seconds", 1000), ("ttl", 1000)] {
        if let Some(ttl) = duration(entry.entry.get(name))? {
            return Ok(Some(now.saturating_add(ttl.saturating_mul(scale))));
        }
    }
    Ok(None)
}

/// A lifetime: a non-negative number (a fraction of the unit is dropped), or `None` when
/// absent.
fn duration(value: Option<&Value>) -> Result<Option<u64>, EntryError> {
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
            .ok_or(EntryError::InvalidTtl),
        Some(_) => Err(EntryError::InvalidTtl),
    }
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
        // The entry with a bad issue time is kept without it.
        assert_eq!(list.candidates.len(), 2);
        assert_eq!(list.candidates[0].issued_at_ms, None);
        assert_eq!(list.ignored[&Ignored::InvalidIssuedAt], 1);
        assert_eq!(list.dropped[&EntryError::Malformed], 3);
        assert_eq!(list.dropped[&EntryError::InvalidPort], 1);
        assert_eq!(list.dropped[&EntryError::UnknownScheme], 1);
        assert_eq!(list.dropped[&EntryError::InvalidTtl], 1);
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
            state: at("/geo/state"),
            asn: at("/geo/asn"),
            carrier: at("/isp"),
            expires_at: at("/valid_until"),
            issued_at: at("/issued"),
            max_sessions: at("/slots"),
            valid: None,
            valid_values: None,
            time_unit: Some(unit),
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

    /// Webshare's `/api/v2/proxy/list/` page, as its documentation shows one.
    const WEBSHARE_PAGE: &[u8] =
        br#"{"count": 3, "next": "https://proxy.webshare.io/api/v2/proxy/list/?mode=direct&page=2",
        "previous": null, "results": [
        {"id": "d-10513", "username": "user1", "password": "pw1", "proxy_address": "203.0.113.10",
         "port": 8168, "valid": true, "last_verification": "2026-11-03T16:19:03.018667+00:00",
         "country_code": "US", "city_name": "New York", "asn_name": "COMCAST", "asn_number": 7922,
         "high_country_confidence": true, "created_at": "2026-11-03T16:19:03.018667+00:00"},
        {"id": "d-10514", "username": "user1", "password": "pw1", "proxy_address": "203.0.113.11",
         "port": 8169, "valid": false, "last_verification": "2026-11-03T16:19:03.018667+00:00",
         "country_code": "DE", "city_name": "Berlin", "asn_name": "DTAG", "asn_number": 3320,
         "high_country_confidence": true, "created_at": "2026-11-03T09:19:03.018667-07:00"},
        {"id": "d-10515", "username": "user1", "password": "pw1", "proxy_address": "203.0.113.12",
         "port": 8170, "valid": true, "last_verification": null,
         "country_code": "US", "city_name": "Los Angeles", "asn_name": null, "asn_number": null,
         "high_country_confidence": false, "created_at": "2026-11-03T09:19:03.5-07:00"}
    ]}"#;

    fn webshare_fields() -> FieldMapConfig {
        let at = |p: &str| Some(p.to_owned());
        FieldMapConfig {
            list: at("/results"),
            host: at("/proxy_address"),
            region: at("/country_code"),
            city: at("/city_name"),
            asn: at("/asn_number"),
            valid: at("/valid"),
            ..FieldMapConfig::default()
        }
    }

    #[test]
    fn a_webshare_page_keeps_the_valid_entries_with_their_iso_issue_times() {
        let page = parse_json_page(
            WEBSHARE_PAGE,
            0,
            &EntryDefaults::plain_http(),
            &webshare_fields(),
            Some("/next"),
        )
        .unwrap();
        assert_eq!(page.entries, 3);
        assert_eq!(
            page.next.as_deref(),
            Some("https://proxy.webshare.io/api/v2/proxy/list/?mode=direct&page=2")
        );
        assert_eq!(page.list.dropped[&EntryError::VendorInvalid], 1);
        assert!(page.list.ignored.is_empty());
        let c = &page.list.candidates;
        assert_eq!(
            c.iter()
                .map(|c| (c.host.as_str(), c.port))
                .collect::<Vec<_>>(),
            [("203.0.113.10", 8168), ("203.0.113.12", 8170)]
        );
        // `created_at`, read by its default name, in any offset.
        assert_eq!(c[0].issued_at_ms, Some(1_793_722_743_018));
        assert_eq!(c[1].issued_at_ms, Some(1_793_722_743_500));
        assert_eq!(c[0].credentials.as_ref().unwrap().username, "user1");
        assert_eq!(c[0].region.as_deref(), Some("US"));
        assert_eq!(
            c[0].labels.get("city").map(String::as_str),
            Some("New York")
        );
        // A JSON number is an ASN's digits; a null one is no label.
        assert_eq!(c[0].labels.get("asn").map(String::as_str), Some("7922"));
        assert_eq!(c[1].labels.get("asn"), None);
    }

    #[test]
    fn valid_values_of_every_kind_and_a_missing_flag_is_unusable() {
        let body = br#"[{"host": "h1", "port": 1, "status": "active"},
            {"host": "h2", "port": 1, "status": 1},
            {"host": "h3", "port": 1, "status": 1.0},
            {"host": "h4", "port": 1, "status": "Active"},
            {"host": "h5", "port": 1, "status": true},
            {"host": "h6", "port": 1, "status": "1"},
            {"host": "h7", "port": 1},
            {"host": "h8", "port": 1, "status": null}]"#;
        let fields = FieldMapConfig {
            valid: Some("/status".into()),
            valid_values: Some(vec![
                FlagValue::Text("active".into()),
                FlagValue::Integer(1),
            ]),
            ..FieldMapConfig::default()
        };
        let page = parse_json_page(body, 0, &EntryDefaults::plain_http(), &fields, None).unwrap();
        let hosts: Vec<_> = page
            .list
            .candidates
            .iter()
            .map(|c| c.host.as_str())
            .collect();
        assert_eq!(hosts, ["h1", "h2", "h3"]);
        assert_eq!(page.list.dropped[&EntryError::VendorInvalid], 5);
        // Without a validity field every entry counts as usable.
        let page = parse_json_page(
            body,
            0,
            &EntryDefaults::plain_http(),
            &FieldMapConfig::default(),
            None,
        )
        .unwrap();
        assert_eq!(page.list.candidates.len(), 8);
    }

    #[test]
    fn times_in_every_form_and_refusals_named_by_field() {
        let body = br#"[
            {"host": "a", "port": 1, "expires_at": "2026-11-03T16:19:03Z", "issued_at": 1793722743018},
            {"host": "b", "port": 1, "expires_at": 1793722743, "created_at": "2026-11-03T16:19:03+00:00"},
            {"host": "c", "port": 1, "expires_at_ms": "2026-11-03T16:19:03Z"},
            {"host": "d", "port": 1, "expires_at": "2026-11-03T16:19:03"},
            {"host": "e", "port": 1, "expires_at_ms": -1},
            {"host": "f", "port": 1, "ttl_seconds": "30"},
            {"host": "g", "port": 1, "created_at": "yesterday"},
            {"host": "h", "port": 1, "issued_at_ms": {"at": 1}}
        ]"#;
        let list = parse_json(body, 0, &EntryDefaults::plain_http()).unwrap();
        let t = 1_793_722_743_000;
        let kept: Vec<_> = list
            .candidates
            .iter()
            .map(|c| (c.host.as_str(), c.expires_at_ms, c.issued_at_ms))
            .collect();
        assert_eq!(
            kept,
            [
                ("a", Some(t), Some(t + 18)),
                ("b", Some(t), Some(t)),
                ("c", Some(t), None),
                ("g", None, None),
                ("h", None, None),
            ]
        );
        assert_eq!(list.dropped[&EntryError::InvalidExpiresAt], 2);
        assert_eq!(list.dropped[&EntryError::InvalidTtl], 1);
        assert_eq!(list.ignored[&Ignored::InvalidIssuedAt], 2);

        // Mapped fields: an ISO expiry, and a bare number by `time_unit` or by its size.
        let body = br#"{"result": {"items": [
            {"addr": "m1", "port_no": 1, "valid_until": "2026-11-03T18:19:03+02:00", "issued": "soon"},
            {"addr": "m2", "port_no": 1, "valid_until": 1793722743018},
            {"addr": "m3", "port_no": 1, "valid_until": false}
        ]}}"#;
        let mut fields = mapped(TimeUnit::Seconds);
        fields.time_unit = None;
        let page = parse_json_page(body, 0, &EntryDefaults::plain_http(), &fields, None).unwrap();
        let c = &page.list.candidates;
        assert_eq!((c[0].expires_at_ms, c[0].issued_at_ms), (Some(t), None));
        assert_eq!(c[1].expires_at_ms, Some(t + 18));
        assert_eq!(page.list.ignored[&Ignored::InvalidIssuedAt], 1);
        assert_eq!(page.list.dropped[&EntryError::InvalidExpiresAt], 1);
    }

    #[test]
    fn mapped_state_and_asn_are_labels() {
        let body = br#"{"result": {"items": [
            {"addr": "1.2.3.4", "port_no": 1, "geo": {"state": "New York", "asn": "AS7922"}},
            {"addr": "1.2.3.5", "port_no": 1, "geo": {"state": null, "asn": 3320}},
            {"addr": "1.2.3.6", "port_no": 1, "geo": {"asn": [1]}}
        ]}}"#;
        let page = parse_json_page(
            body,
            0,
            &EntryDefaults::plain_http(),
            &mapped(TimeUnit::Seconds),
            None,
        )
        .unwrap();
        let labels: Vec<_> = page
            .list
            .candidates
            .iter()
            .map(|c| c.labels.clone())
            .collect();
        let pairs = |p: &[(&str, &str)]| {
            p.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(
            labels,
            [
                pairs(&[("state", "New York"), ("asn", "AS7922")]),
                pairs(&[("asn", "3320")])
            ]
        );
        assert_eq!(page.list.dropped[&EntryError::Malformed], 1);
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
