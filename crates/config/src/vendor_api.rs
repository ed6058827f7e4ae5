//! The parts of an `http` provider that make a vendor's list API a matter of
//! configuration: how its pages are walked ([`PaginationConfig`]), how the fetch
//! authenticates ([`VendorAuthConfig`]) and where a JSON list keeps its fields
//! ([`FieldMapConfig`]), with the checks of each.

use crate::check::Check;
use crate::secret::SecretRef;
use serde::{Deserialize, Serialize};

/// Pages one round reads when `max_pages` is not set.
pub const DEFAULT_MAX_PAGES: u32 = 20;
/// The most pages `max_pages` may allow: a round holds every page in memory before it
/// upserts anything.
pub const MAX_PAGES: u32 = 1_000;

/// How a list spread over pages is walked. Without this table the list is one page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaginationConfig {
    pub style: PageStyle,
    /// `next_url`: the JSON pointer of the next page's URL in the body (`/next`,
    /// `/links/next`); null, empty or absent ends the walk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// `query_param`: the query parameter that numbers pages (`page`) or offsets
    /// (`offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// `query_param`: its value on the first page.
    #[serde(default = "default_start")]
    pub start: u64,
    /// `query_param`: what each next page adds (1 for page numbers, the page size for
    /// offsets).
    #[serde(default = "default_step")]
    pub step: u64,
    /// The most requests one round's walk makes (the empty page that ends a
    /// `query_param` walk counts); a list that goes on fails the round whole.
    #[serde(default = "default_max_pages")]
    pub max_pages: u32,
}

fn default_start() -> u64 {
    1
}

fn default_step() -> u64 {
    1
}

fn default_max_pages() -> u32 {
    DEFAULT_MAX_PAGES
}

/// Where the next page is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageStyle {
    /// A URL in the JSON body, at the pointer `next`.
    NextUrl,
    /// An RFC 8288 `Link: <...>; rel="next"` header.
    LinkHeader,
    /// A page number or offset query parameter; the walk stops on an empty page.
    QueryParam,
}

/// How the fetch authenticates, beside (or instead of) the `authorization` shorthand.
/// Every request of a round (pages and redirects) carries it, and only to the list's
/// host and `redirect_hosts`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VendorAuthConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<AuthHeaderConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<BasicAuthConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<QueryAuthConfig>,
}

/// A header of any name, its value `scheme value` (`Authorization: Token ...`) or the
/// value alone (`X-Api-Key: ...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthHeaderConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    pub value: SecretRef,
}

/// HTTP Basic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicAuthConfig {
    pub username: String,
    pub password: SecretRef,
}

/// A query parameter holding the key (`?api_key=...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryAuthConfig {
    pub name: String,
    pub value: SecretRef,
}

/// Where a JSON list keeps the list and each entry's fields, as JSON pointers (the list's
/// from the body's root, the fields' from each entry). A field left out is read as
/// before (`host` or `ip`, `port`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldMapConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Stored as the proxy's `city` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// Stored as the proxy's `state` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Stored as the proxy's `asn` label (a JSON number or a string such as `AS7922`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<String>,
    /// An absolute expiry: Unix seconds or milliseconds, or an RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When the vendor issued the proxy, in the same forms as `expires_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<String>,
    /// The vendor's own verdict on an entry: only an entry whose value here is one of
    /// `valid_values` is taken (`valid = "/valid"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<String>,
    /// The values of `valid` that mean usable (unset: `[true]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_values: Option<Vec<FlagValue>>,
    /// The unit of a time written as a bare number: Unix `seconds` or `ms`. Unset, a
    /// number is read by its size (below [`MS_FROM`]: seconds, from it on: milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_unit: Option<TimeUnit>,
}

/// From this value on, a bare time number without a `time_unit` is milliseconds: as
/// seconds it would be the year 5138, as milliseconds it is March 1973, so no time a
/// vendor writes today is ambiguous.
pub const MS_FROM: u64 = 100_000_000_000;

impl FieldMapConfig {
    /// Every entry field's name and pointer (the list's excluded).
    pub fn entry_fields(&self) -> [(&'static str, Option<&str>); 14] {
        [
            ("host", self.host.as_deref()),
            ("port", self.port.as_deref()),
            ("protocol", self.protocol.as_deref()),
            ("username", self.username.as_deref()),
            ("password", self.password.as_deref()),
            ("region", self.region.as_deref()),
            ("city", self.city.as_deref()),
            ("state", self.state.as_deref()),
            ("asn", self.asn.as_deref()),
            ("carrier", self.carrier.as_deref()),
            ("expires_at", self.expires_at.as_deref()),
            ("issued_at", self.issued_at.as_deref()),
            ("max_sessions", self.max_sessions.as_deref()),
            ("valid", self.valid.as_deref()),
        ]
    }

    /// The values of `valid` that mean usable: `valid_values`, or `[true]`.
    pub fn usable_values(&self) -> Vec<FlagValue> {
        self.valid_values
            .clone()
            .unwrap_or_else(|| vec![FlagValue::Bool(true)])
    }
}

/// The unit of a time written as a bare number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    Seconds,
    Ms,
}

/// One value of a vendor's validity field that means usable: a boolean, a whole number or
/// a string, compared with the entry's value exactly (`true` never equals `"true"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FlagValue {
    Bool(bool),
    Integer(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for FlagValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = FlagValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a boolean, a whole number or a string")
            }
            fn visit_bool<E>(self, v: bool) -> Result<FlagValue, E> {
                Ok(FlagValue::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<FlagValue, E> {
                Ok(FlagValue::Integer(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FlagValue, E> {
                i64::try_from(v)
                    .map(FlagValue::Integer)
                    .map_err(|_| E::custom("a usable value must fit in 64 signed bits"))
            }
            fn visit_str<E>(self, v: &str) -> Result<FlagValue, E> {
                Ok(FlagValue::Text(v.to_owned()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Checks an RFC 6901 JSON pointer: empty (the whole document) or `/`-separated tokens in
/// which `~` only starts `~0` or `~1`.
pub fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "{pointer:?} is not a JSON pointer: write \"/a/b\" (or \"\" for the root)"
        ));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "{pointer:?} is not a JSON pointer: `~` must be followed by 0 or 1"
            ));
        }
    }
    Ok(())
}

/// An HTTP token (a header name or an auth scheme): RFC 9110's `tchar`s.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks the pagination table; `json` = the list is `format = "json"`.
pub(crate) fn validate_pagination(c: &mut Check<'_>, path: &str, p: &PaginationConfig, json: bool) {
    c.require(
        (1..=MAX_PAGES).contains(&p.max_pages),
        format!("{path}.max_pages"),
        "must be between 1 and 1000",
    );
    let next_given = p.next.is_some();
    let param_given = p.param.is_some();
    match p.style {
        PageStyle::NextUrl => {
            match &p.next {
                None => c.at(
                    format!("{path}.next"),
                    "style = \"next_url\" needs the JSON pointer of the next URL (\"/next\")",
                ),
                Some(pointer) => {
                    if let Err(message) = check_pointer(pointer) {
                        c.at(format!("{path}.next"), message);
                    }
                }
            }
            c.require(
                json,
                format!("{path}.style"),
                "next_url reads the body, so it needs format = \"json\"",
            );
            c.require(
                !param_given,
                format!("{path}.param"),
                "only for style = \"query_param\"",
            );
        }
        PageStyle::LinkHeader => {
            c.require(
                !next_given && !param_given,
                format!("{path}.style"),
                "link_header takes neither next nor param",
            );
        }
        PageStyle::QueryParam => {
            c.require(
                p.param.as_deref().is_some_and(|n| !n.trim().is_empty()),
                format!("{path}.param"),
                "style = \"query_param\" needs the parameter's name (\"page\", \"offset\")",
            );
            c.require(p.step >= 1, format!("{path}.step"), "must be at least 1");
            c.require(
                !next_given,
                format!("{path}.next"),
                "only for style = \"next_url\"",
            );
        }
    }
}

/// Checks the auth table; `shorthand` = the provider also sets `authorization`.
pub(crate) fn validate_auth(
    c: &mut Check<'_>,
    path: &str,
    auth: &mut VendorAuthConfig,
    shorthand: bool,
) {
    let mut sets_authorization = usize::from(shorthand);
    if let Some(header) = &mut auth.header {
        if !is_token(&header.name) {
            c.at(
                format!("{path}.header.name"),
                format!("{:?} is not a header name", header.name),
            );
        }
        if header.name.eq_ignore_ascii_case("authorization") {
            sets_authorization += 1;
        }
        if let Some(scheme) = &header.scheme
            && !is_token(scheme)
        {
            c.at(
                format!("{path}.header.scheme"),
                format!("{scheme:?} is not an auth scheme (one word, such as Token)"),
            );
        }
        c.resolve_plain(&format!("{path}.header.value"), &mut header.value);
    }
    if let Some(basic) = &mut auth.basic {
        sets_authorization += 1;
        c.require(
            !basic.username.is_empty() && !basic.username.contains(':'),
            format!("{path}.basic.username"),
            "must not be empty nor hold a `:`",
        );
        c.resolve_plain(&format!("{path}.basic.password"), &mut basic.password);
    }
    if sets_authorization > 1 {
        c.at(
            format!("{path}.basic"),
            "more than one setting writes the Authorization header (authorization, auth.basic, \
             auth.header with name = \"Authorization\"): keep one",
        );
    }
    if let Some(query) = &mut auth.query {
        c.require(
            !query.name.trim().is_empty(),
            format!("{path}.query.name"),
            "the query parameter needs a name (\"api_key\")",
        );
        c.resolve_plain(&format!("{path}.query.value"), &mut query.value);
    }
}

/// Checks the field pointers; `json` = the list is `format = "json"`.
pub(crate) fn validate_fields(c: &mut Check<'_>, path: &str, fields: &FieldMapConfig, json: bool) {
    c.require(
        json,
        path.to_owned(),
        "field pointers are for format = \"json\"",
    );
    if let Some(list) = &fields.list
        && let Err(message) = check_pointer(list)
    {
        c.at(format!("{path}.list"), message);
    }
    for (name, pointer) in fields.entry_fields() {
        let Some(pointer) = pointer else { continue };
        let result = check_pointer(pointer).and_then(|()| {
            if pointer.is_empty() {
                Err(
                    "a field's pointer names a field of the entry (\"/addr\"), not the entry"
                        .into(),
                )
            } else {
                Ok(())
            }
        });
        if let Err(message) = result {
            c.at(format!("{path}.{name}"), message);
        }
    }
    match (&fields.valid, &fields.valid_values) {
        (None, Some(_)) => c.at(
            format!("{path}.valid_values"),
            "needs valid, the pointer of the field these values are read from",
        ),
        (Some(_), Some(values)) if values.is_empty() => c.at(
            format!("{path}.valid_values"),
            "list at least one value that means usable (leave it out for [true])",
        ),
        _ => {}
    }
}

/// One `redirect_hosts` entry: a host (a name or an IP address, an IPv6 one bracketed when
/// a port follows) and, as `host:port`, the one port it may be reached on. Without a port
/// the host is allowed on its scheme's standard port only (443 for https, 80 for http).
pub fn parse_redirect_host(entry: &str) -> Result<(String, Option<u16>), String> {
    let bad = || format!("{entry:?} is not a host, an IP address or host:port");
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        match after {
            "" => (host, None),
            after => (host, Some(after.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else if entry.parse::<std::net::IpAddr>().is_ok() {
        (entry, None)
    } else {
        match entry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    let valid_host = host.parse::<std::net::IpAddr>().is_ok()
        || (!host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            }));
    if !valid_host {
        return Err(bad());
    }
    let port = match port {
        None => None,
        Some(digits) => match digits.parse::<u16>() {
            Ok(port) if port != 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Some(port),
            _ => {
                return Err(format!(
                    "{entry:?}: the port must be a number between 1 and 65535"
                ));
            }
        },
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// Checks `redirect_hosts`: hosts or `host:port`, matched exactly.
pub(crate) fn validate_redirect_hosts(c: &mut Check<'_>, path: &str, hosts: &[String]) {
    for (j, host) in hosts.iter().enumerate() {
        if let Err(message) = parse_redirect_host(host) {
            c.at(format!("{path}[{j}]"), message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_follow_rfc_6901() {
        for good in ["", "/", "/a", "/links/next", "/a~1b", "/m~0n", "/0"] {
            assert!(check_pointer(good).is_ok(), "{good}");
        }
        for bad in ["a", "next", "/a~", "/a~2", "links/next"] {
            assert!(check_pointer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn redirect_hosts_are_hosts_or_host_and_port() {
        let ok = |entry: &str, host: &str, port: Option<u16>| {
            assert_eq!(
                parse_redirect_host(entry),
                Ok((host.to_owned(), port)),
                "{entry}"
            );
        };
        ok("dl.Vendor.example", "dl.vendor.example", None);
        ok("dl.vendor.example:8443", "dl.vendor.example", Some(8443));
        ok("203.0.113.7", "203.0.113.7", None);
        ok("203.0.113.7:81", "203.0.113.7", Some(81));
        ok("2001:db8::1", "2001:db8::1", None);
        ok("[2001:db8::1]", "2001:db8::1", None);
        ok("[2001:db8::1]:8443", "2001:db8::1", Some(8443));
        for bad in [
            "",
            "host:",
            "host:0",
            "host:65536",
            "host:+80",
            "host:80:81",
            "[2001:db8::1]8443",
            "[2001:db8::1",
            "bad host",
            "https://host",
            "host/path",
        ] {
            assert!(parse_redirect_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usable_values_are_booleans_whole_numbers_or_strings() {
        #[derive(Deserialize)]
        struct T {
            v: Vec<FlagValue>,
        }
        let t: T = toml::from_str(r#"v = [true, 1, "active"]"#).unwrap();
        assert_eq!(
            t.v,
            [
                FlagValue::Bool(true),
                FlagValue::Integer(1),
                FlagValue::Text("active".into())
            ]
        );
        for bad in ["v = [1.5]", "v = [[true]]", "v = [{ a = 1 }]"] {
            let error = toml::from_str::<T>(bad).err().unwrap().to_string();
            assert!(
                error.contains("a boolean, a whole number or a string"),
                "{bad}: {error}"
            );
        }
        assert_eq!(
            FieldMapConfig::default().usable_values(),
            [FlagValue::Bool(true)]
        );
    }

    #[test]
    fn tokens_are_header_names() {
        assert!(is_token("X-Api-Key") && is_token("Token"));
        assert!(!is_token("") && !is_token("X Api") && !is_token("a:b"));
    }
}
