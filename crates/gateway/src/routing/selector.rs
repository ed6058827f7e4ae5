//! Username selectors: `CLIENT[-region-R | -country-R][-city-C][-state-S][-asn-A]
//! [-carrier-C][-upstream-U][-protocol-P][-session-S][-sesstime-MIN | -idle-MIN]
//! [-rotate-N | -rotate-Ts | -rotate-Tm | -rotate-least | -rotate-request][-newip]
//! [-inspect]`, as commercial gateways take them (but for `inspect`, the gateway's own).
//!
//! `country` is another name for `region` (the one selector, given once). Values match
//! whatever their case: region and carrier are labels (lower-cased), and city, state and
//! asn are read in the canonical form the store keeps them in
//! ([`proxypool_core::GeoLabel::canonical`]: `New_York` and `new+york` are `new_york`,
//! `AS7922` is `7922`), so the pick compares plain strings.
//!
//! `newip` and `inspect` are the keys without a value (flags), so a flag can be added to
//! any username without inventing a dummy value; anything written after one must be
//! another key. `inspect` asks the gateway to inspect the request's `CONNECT` tunnel
//! (`crate::inspection`): whether the client may is decided at authentication.
//!
//! Client ids may themselves contain `-`, so the split is driven by the snapshot's client
//! list: the longest prefix (cut at a `-`) that names a known client is the client, and
//! everything after it must be well-formed `key-value` pairs. An unknown key or a bad value
//! is an error with a message that names it, never silently ignored.

use proxypool_core::GeoValues;
use proxypool_core::control::ClientRotation;
use proxypool_core::{GeoLabel, Label, Protocol, UpstreamId};

/// What the username asks for beyond the client id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selectors {
    /// `-region-` or `-country-`.
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    /// `-city-`, `-state-`, `-asn-`, canonical.
    pub geo: GeoValues,
    pub upstream: Option<UpstreamId>,
    pub protocol: Option<Protocol>,
    pub session: Option<String>,
    /// Minutes; only with `session`.
    pub sesstime_minutes: Option<u32>,
    /// Sliding expiry: the session ends this many minutes after its last use. Only with
    /// `session`, never with `sesstime`.
    pub idle_minutes: Option<u32>,
    /// `-rotate-...`: overrides the client's default rotation.
    pub rotate: Option<ClientRotation>,
    /// `-newip`: leave the session's (or rotation key's) proxy for another one.
    pub newip: bool,
    /// `-inspect`: inspect this `CONNECT` tunnel (a client whose `inspection` is
    /// `allowed`); refused for a client whose `inspection` is `off`.
    pub inspect: bool,
}

impl Selectors {
    /// Whether the request filters proxies at all (beyond the client's own restrictions).
    pub fn has_filters(&self) -> bool {
        self.region.is_some()
            || self.carrier.is_some()
            || !self.geo.is_empty()
            || self.upstream.is_some()
            || self.protocol.is_some()
    }
}

/// Longest username accepted (SOCKS5 caps it at 255 bytes anyway); a longer one is
/// refused before it is parsed.
pub(crate) const MAX_USERNAME: usize = 256;

/// Longest client id (as `proxypool_core::ClientId` allows).
const MAX_CLIENT_ID: usize = 128;

/// Splits `username` into (client, rest) at the longest prefix `is_client` accepts.
/// `rest` is empty when there are no selectors. `None` = no known client.
///
/// Only prefixes that can be a client id (at most [`MAX_CLIENT_ID`] bytes) are looked
/// up, so the work is bounded whatever the username's length: a few lookups of at most
/// 128 bytes each, and one scan of the first 129 bytes for `-`.
pub fn split_client(username: &str, is_client: impl Fn(&str) -> bool) -> Option<(&str, &str)> {
    if username.len() <= MAX_CLIENT_ID && is_client(username) {
        return Some((username, ""));
    }
    // A cut below `end` leaves a prefix of at most MAX_CLIENT_ID bytes.
    let mut end = username.len().min(MAX_CLIENT_ID + 1);
    while !username.is_char_boundary(end) {
        end -= 1;
    }
    while let Some(cut) = username[..end].rfind('-') {
        if is_client(&username[..cut]) {
            return Some((&username[..cut], &username[cut + 1..]));
        }
        end = cut;
    }
    None
}

/// Longest session id accepted.
pub(crate) const MAX_SESSION_ID: usize = 64;

/// Every key, for the error that names an unknown one.
const KEYS: &str = "region (or country), city, state, asn, carrier, upstream, protocol, session, sesstime, idle, rotate, newip, inspect";

/// Most consecutive requests `-rotate-N` may keep on one proxy (as the file's
/// `every_requests`).
pub(crate) const MAX_ROTATE_REQUESTS: u32 = proxypool_config::MAX_ROTATE_REQUESTS;

fn is_key(token: &str) -> bool {
    matches!(
        token,
        "region"
            | "country"
            | "city"
            | "state"
            | "asn"
            | "carrier"
            | "upstream"
            | "protocol"
            | "session"
            | "sesstime"
            | "idle"
            | "rotate"
            | "newip"
            | "inspect"
    )
}

/// Parses the selector part (after `CLIENT-`). `max_minutes` bounds `sesstime`.
pub fn parse_selectors(rest: &str, max_minutes: u32) -> Result<Selectors, String> {
    let mut selectors = Selectors::default();
    if rest.is_empty() {
        return Ok(selectors);
    }
    let mut tokens = rest.split('-');
    while let Some(key) = tokens.next() {
        if key.is_empty() {
            return Err("empty selector (two '-' in a row?)".into());
        }
        let flag = match key {
            "newip" => Some(&mut selectors.newip),
            "inspect" => Some(&mut selectors.inspect),
            _ => None,
        };
        if let Some(flag) = flag {
            if *flag {
                return Err(format!("selector '{key}' given twice"));
            }
            *flag = true;
            // A value after the flag is a mistake to name, not an unknown key to guess at.
            if let Some(next) = tokens.clone().next()
                && !is_key(next)
            {
                return Err(format!("selector '{key}' takes no value, got '{next}'"));
            }
            continue;
        }
        let Some(value) = tokens.next() else {
            return Err(format!("selector '{key}' has no value"));
        };
        if value.is_empty() {
            return Err(format!("selector '{key}' has an empty value"));
        }
        let duplicate = match key {
            "region" | "country" => set(&mut selectors.region, label(key, value)?),
            "city" | "state" | "asn" => {
                let geo = GeoLabel::from_key(key).expect("a geo key");
                set(selectors.geo.slot(geo), geo_value(geo, value)?)
            }
            "carrier" => set(&mut selectors.carrier, label(key, value)?),
            "upstream" => set(
                &mut selectors.upstream,
                UpstreamId::new(value).map_err(|_| bad_label(key, value))?,
            ),
            "protocol" => set(
                &mut selectors.protocol,
                Protocol::parse(value).ok_or_else(|| {
                    format!("protocol '{value}' is not one of http, https, socks5")
                })?,
            ),
            "session" => set(&mut selectors.session, session_id(value)?),
            "sesstime" => set(
                &mut selectors.sesstime_minutes,
                minutes(key, value, max_minutes)?,
            ),
            "idle" => set(
                &mut selectors.idle_minutes,
                minutes(key, value, max_minutes)?,
            ),
            "rotate" => set(&mut selectors.rotate, rotate(value, max_minutes)?),
            other => {
                return Err(format!("unknown selector '{other}' (known: {KEYS})"));
            }
        };
        if duplicate {
            return Err(match key {
                "region" | "country" => {
                    "selector 'region' (or 'country', its other name) given twice".into()
                }
                _ => format!("selector '{key}' given twice"),
            });
        }
    }
    if selectors.sesstime_minutes.is_some() && selectors.session.is_none() {
        return Err("sesstime needs a session".into());
    }
    if selectors.idle_minutes.is_some() && selectors.session.is_none() {
        return Err("idle needs a session".into());
    }
    if selectors.idle_minutes.is_some() && selectors.sesstime_minutes.is_some() {
        return Err(
            "idle and sesstime are exclusive (sesstime: the session ends MIN minutes after it began; idle: MIN minutes after its last use)"
                .into(),
        );
    }
    if selectors.session.is_some() && selectors.rotate == Some(ClientRotation::PerRequest) {
        return Err(
            "rotate-request cannot be combined with a session (a session pins its proxy)".into(),
        );
    }
    Ok(selectors)
}

/// Stores `value`; true when the slot was already taken.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    slot.replace(value).is_some()
}

fn label(key: &str, value: &str) -> Result<Label, String> {
    Label::new(value).map_err(|_| bad_label(key, value))
}

/// A city, state or asn as the store keeps it, or an error saying what it may be.
fn geo_value(label: GeoLabel, value: &str) -> Result<String, String> {
    label.canonical(value).ok_or_else(|| match label {
        GeoLabel::Asn => format!("asn '{value}' must be a number, with or without 'AS' (AS7922)"),
        GeoLabel::City | GeoLabel::State => format!(
            "{} '{value}' must be letters and digits, words joined by '_' or '+' (new_york), at most {} characters",
            label.key(),
            proxypool_core::geo::MAX_GEO_VALUE
        ),
    })
}

fn bad_label(key: &str, value: &str) -> String {
    format!("{key} '{value}' must be 1-64 characters of [a-z0-9_]")
}

fn session_id(value: &str) -> Result<String, String> {
    if value.len() <= MAX_SESSION_ID
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "session id must be 1-{MAX_SESSION_ID} characters of [A-Za-z0-9_.]"
        ))
    }
}

fn minutes(key: &str, value: &str, max_minutes: u32) -> Result<u32, String> {
    match digits(value) {
        Some(minutes) if (1..=u64::from(max_minutes)).contains(&minutes) => Ok(minutes as u32),
        _ => Err(format!(
            "{key} '{value}' must be a whole number of minutes from 1 to {max_minutes}"
        )),
    }
}

/// Plain ASCII digits only (`u64::from_str` would take a leading `+`).
fn digits(value: &str) -> Option<u64> {
    if value.is_empty() || value.len() > 12 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// `N` requests, `Ts` seconds or `Tm` minutes (up to `max_minutes`, the longest session),
/// `least` or `request`.
fn rotate(value: &str, max_minutes: u32) -> Result<ClientRotation, String> {
    let max_ms = u64::from(max_minutes) * 60_000;
    let parsed = match value {
        "least" => Some(ClientRotation::LeastUsed),
        "request" => Some(ClientRotation::PerRequest),
        _ => {
            let (number, unit_ms) = match value.as_bytes().last() {
                Some(b's') => (&value[..value.len() - 1], Some(1_000)),
                Some(b'm') => (&value[..value.len() - 1], Some(60_000)),
                _ => (value, None),
            };
            match (digits(number), unit_ms) {
                (Some(n), None) if (1..=u64::from(MAX_ROTATE_REQUESTS)).contains(&n) => {
                    Some(ClientRotation::EveryRequests(n as u32))
                }
                (Some(n), Some(unit)) if n >= 1 && n * unit <= max_ms => {
                    Some(ClientRotation::EveryMs(n * unit))
                }
                _ => None,
            }
        }
    };
    parsed.ok_or_else(|| {
        format!(
            "rotate '{value}' must be a number of requests from 1 to {MAX_ROTATE_REQUESTS}, a time from 1s to {max_minutes}m (e.g. 30s, 5m), 'least' or 'request'"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> bool {
        matches!(name, "alice" | "team-b" | "team")
    }

    #[test]
    fn splits_at_the_longest_known_client() {
        assert_eq!(split_client("alice", known), Some(("alice", "")));
        assert_eq!(
            split_client("alice-region-us", known),
            Some(("alice", "region-us"))
        );
        assert_eq!(
            split_client("team-b-session-x", known),
            Some(("team-b", "session-x"))
        );
        assert_eq!(split_client("team-c", known), Some(("team", "c")));
        assert_eq!(split_client("bob-region-us", known), None);
        assert_eq!(split_client("", known), None);
    }

    #[test]
    fn parses_every_selector() {
        let selectors = parse_selectors(
            "region-US-carrier-vodafone-upstream-acme-protocol-socks5-session-abc_1-sesstime-30",
            1440,
        )
        .unwrap();
        assert_eq!(selectors.region.unwrap().as_str(), "us");
        assert_eq!(selectors.carrier.unwrap().as_str(), "vodafone");
        assert_eq!(selectors.upstream.unwrap().as_str(), "acme");
        assert_eq!(selectors.protocol, Some(Protocol::Socks5));
        assert_eq!(selectors.session.as_deref(), Some("abc_1"));
        assert_eq!(selectors.sesstime_minutes, Some(30));
        assert_eq!(parse_selectors("", 10).unwrap(), Selectors::default());
    }

    #[test]
    fn rejects_with_a_message_naming_the_problem() {
        let cases = [
            ("colour-red", "unknown selector 'colour'"),
            ("region", "has no value"),
            ("region-us-region-de", "given twice"),
            ("protocol-ftp", "not one of"),
            ("sesstime-5", "needs a session"),
            ("session-a-sesstime-0", "from 1 to 60"),
            ("session-a-sesstime-61", "from 1 to 60"),
            ("session-a-sesstime-x", "whole number"),
            ("region--us", "empty"),
            ("region-u$", "[a-z0-9_]"),
        ];
        for (input, expected) in cases {
            let error = parse_selectors(input, 60).unwrap_err();
            assert!(error.contains(expected), "{input}: {error}");
        }
        let long = format!("session-{}", "a".repeat(65));
        assert!(parse_selectors(&long, 60).is_err());
    }

    #[test]
    fn parses_rotation_selectors() {
        let rotate = |rest: &str| parse_selectors(rest, 60).unwrap().rotate;
        assert_eq!(rotate("rotate-5"), Some(ClientRotation::EveryRequests(5)));
        assert_eq!(rotate("rotate-30s"), Some(ClientRotation::EveryMs(30_000)));
        assert_eq!(rotate("rotate-2m"), Some(ClientRotation::EveryMs(120_000)));
        assert_eq!(
            rotate("rotate-60m"),
            Some(ClientRotation::EveryMs(3_600_000))
        );
        assert_eq!(rotate("rotate-least"), Some(ClientRotation::LeastUsed));
        assert_eq!(rotate("rotate-request"), Some(ClientRotation::PerRequest));
        assert_eq!(rotate("region-us"), None);
        let both = parse_selectors("region-us-session-s1-rotate-5-idle-10", 60).unwrap();
        assert_eq!(both.session.as_deref(), Some("s1"));
        assert_eq!(both.idle_minutes, Some(10));
        assert_eq!(both.sesstime_minutes, None);
        assert_eq!(both.rotate, Some(ClientRotation::EveryRequests(5)));
        assert!(!both.newip);
    }

    #[test]
    fn flags_take_no_value() {
        let alone = parse_selectors("newip", 60).unwrap();
        assert!(alone.newip);
        let middle = parse_selectors("session-s1-newip-region-us", 60).unwrap();
        assert!(middle.newip);
        assert_eq!(middle.session.as_deref(), Some("s1"));
        assert_eq!(middle.region.unwrap().as_str(), "us");
        let last = parse_selectors("rotate-5-newip", 60).unwrap();
        assert!(last.newip);
        // A session may be called "newip": values are read by position.
        let named = parse_selectors("session-newip", 60).unwrap();
        assert_eq!(named.session.as_deref(), Some("newip"));
        assert!(!named.newip);
        assert!(!parse_selectors("session-s1", 60).unwrap().newip);
        let both = parse_selectors("session-s1-inspect-newip", 60).unwrap();
        assert!(both.inspect && both.newip);
        assert!(parse_selectors("inspect", 60).unwrap().inspect);
        assert!(!parse_selectors("newip", 60).unwrap().inspect);
    }

    #[test]
    fn rejects_bad_rotation_selectors_with_a_message_naming_the_problem() {
        let cases = [
            ("newip-x", "selector 'newip' takes no value, got 'x'"),
            ("newip-1", "selector 'newip' takes no value, got '1'"),
            ("newip-newip", "selector 'newip' given twice"),
            ("inspect-x", "selector 'inspect' takes no value, got 'x'"),
            ("inspect-newip-inspect", "selector 'inspect' given twice"),
            ("rotate", "selector 'rotate' has no value"),
            ("rotate-0", "rotate '0' must be a number of requests"),
            ("rotate-1000001", "from 1 to 1000000"),
            ("rotate-0s", "rotate '0s'"),
            ("rotate-61m", "from 1s to 60m"),
            ("rotate-3601s", "rotate '3601s'"),
            ("rotate-5h", "rotate '5h'"),
            ("rotate-+5", "rotate '+5'"),
            ("rotate-s", "rotate 's'"),
            ("rotate-most", "'least' or 'request'"),
            ("rotate-5-rotate-6", "selector 'rotate' given twice"),
            ("idle-5", "idle needs a session"),
            (
                "session-a-idle-0",
                "idle '0' must be a whole number of minutes from 1 to 60",
            ),
            ("session-a-idle-61", "from 1 to 60"),
            (
                "session-a-idle-5-sesstime-5",
                "idle and sesstime are exclusive",
            ),
            (
                "session-a-rotate-request",
                "rotate-request cannot be combined with a session",
            ),
            (
                "sesstime-x-session-a",
                "sesstime 'x' must be a whole number",
            ),
            (
                "colour-red",
                "known: region (or country), city, state, asn, carrier, upstream, protocol, session, sesstime, idle, rotate, newip, inspect",
            ),
        ];
        for (input, expected) in cases {
            let error = parse_selectors(input, 60).unwrap_err();
            assert!(error.contains(expected), "{input}: {error}");
        }
    }

    #[test]
    fn country_is_region_s_other_name_and_geo_selectors_are_canonical() {
        let parsed = |rest: &str| parse_selectors(rest, 60).unwrap();
        assert_eq!(parsed("country-US").region, parsed("region-us").region);
        assert_eq!(parsed("country-US").region.unwrap().as_str(), "us");
        let geo = parsed("city-New_York-state-NY-asn-AS7922").geo;
        assert_eq!(geo.city.as_deref(), Some("new_york"));
        assert_eq!(geo.state.as_deref(), Some("ny"));
        assert_eq!(geo.asn.as_deref(), Some("7922"));
        assert_eq!(
            parsed("city-new+york").geo.city.as_deref(),
            Some("new_york")
        );
        assert_eq!(parsed("asn-7922").geo, parsed("asn-as7922").geo);
        assert!(parsed("city-boston").has_filters());
        assert!(!parsed("session-s1").has_filters());
        let cases = [
            (
                "region-us-country-de",
                "'region' (or 'country', its other name) given twice",
            ),
            ("country-us-country-us", "given twice"),
            ("country-us-region-us", "given twice"),
            ("city-a-city-b", "selector 'city' given twice"),
            ("asn-1-asn-1", "selector 'asn' given twice"),
            ("city-a;b", "city 'a;b' must be letters and digits"),
            ("state-a.b", "state 'a.b' must be letters and digits"),
            ("asn-ASx", "asn 'ASx' must be a number"),
            ("asn-99999999999", "asn '99999999999' must be a number"),
            ("city", "selector 'city' has no value"),
            ("country-u$", "[a-z0-9_]"),
        ];
        for (input, expected) in cases {
            let error = parse_selectors(input, 60).unwrap_err();
            assert!(error.contains(expected), "{input}: {error}");
        }
        let long = format!("city-{}", "a".repeat(65));
        assert!(
            parse_selectors(&long, 60)
                .unwrap_err()
                .contains("at most 64")
        );
    }

    #[test]
    fn a_huge_username_is_split_with_bounded_work() {
        use std::cell::Cell;
        // 64 KiB of "a-a-a-...": every '-' is a possible cut.
        let username = "a-".repeat(32 * 1024);
        let (lookups, bytes) = (Cell::new(0usize), Cell::new(0usize));
        let counting = |prefix: &str| {
            lookups.set(lookups.get() + 1);
            bytes.set(bytes.get() + prefix.len());
            false
        };
        assert_eq!(split_client(&username, counting), None);
        assert!(lookups.get() <= MAX_CLIENT_ID, "{} lookups", lookups.get());
        assert!(
            bytes.get() <= MAX_CLIENT_ID * MAX_CLIENT_ID,
            "{} bytes looked up",
            bytes.get()
        );
        // A client id at the start is still found, with the rest after it.
        let long = format!("alice-{}", "session-x-".repeat(6_000));
        assert_eq!(
            split_client(&long, known).map(|(client, _)| client),
            Some("alice")
        );
        // Multi-byte characters around the cut limit do not break the split.
        let wide = format!("alice-{}", "é".repeat(200));
        assert_eq!(split_client(&wide, known).map(|(c, _)| c), Some("alice"));
    }
}
