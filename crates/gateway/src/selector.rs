//! Username selectors: `CLIENT[-region-R][-carrier-C][-upstream-U][-protocol-P]
//! [-session-S][-sesstime-MIN]`, as commercial gateways take them.
//!
//! Client ids may themselves contain `-`, so the split is driven by the snapshot's client
//! list: the longest prefix (cut at a `-`) that names a known client is the client, and
//! everything after it must be well-formed `key-value` pairs. An unknown key or a bad value
//! is an error with a message that names it, never silently ignored.

use proxypool_core::{Label, Protocol, UpstreamId};

/// What the username asks for beyond the client id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selectors {
    pub region: Option<Label>,
    pub carrier: Option<Label>,
    pub upstream: Option<UpstreamId>,
    pub protocol: Option<Protocol>,
    pub session: Option<String>,
    /// Minutes; only with `session`.
    pub sesstime_minutes: Option<u32>,
}

impl Selectors {
    /// Whether the request filters proxies at all (beyond the client's own restrictions).
    pub fn has_filters(&self) -> bool {
        self.region.is_some()
            || self.carrier.is_some()
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
        let Some(value) = tokens.next() else {
            return Err(format!("selector '{key}' has no value"));
        };
        if value.is_empty() {
            return Err(format!("selector '{key}' has an empty value"));
        }
        let duplicate = match key {
            "region" => set(&mut selectors.region, label(key, value)?),
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
                minutes(value, max_minutes)?,
            ),
            other => {
                return Err(format!(
                    "unknown selector '{other}' (known: region, carrier, upstream, protocol, session, sesstime)"
                ));
            }
        };
        if duplicate {
            return Err(format!("selector '{key}' given twice"));
        }
    }
    if selectors.sesstime_minutes.is_some() && selectors.session.is_none() {
        return Err("sesstime needs a session".into());
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

fn minutes(value: &str, max_minutes: u32) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(minutes) if (1..=max_minutes).contains(&minutes) && !value.starts_with('+') => {
            Ok(minutes)
        }
        _ => Err(format!(
            "sesstime '{value}' must be a whole number of minutes from 1 to {max_minutes}"
        )),
    }
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
