//! A backconnect upstream (`kind = "backconnect"`): one vendor gateway address where the
//! username chooses the exit. The controller keeps `count` sessions per group alive as
//! proxies of the pool; each is the gateway's address under a username rendered from the
//! vendor's template with a fresh session id, and lives `session_lifetime`.
//!
//! Templates are literal text with `{placeholder}`s and `[optional]` parts, left out
//! when a placeholder inside has no value (`customer-{account}[-cc-{country}]-sessid-{session}`).
//! Placeholders: `account` and `password` (the upstream's credentials), `session` (a fresh
//! random id of `session_id_length` hex digits), `minutes` and `seconds` (the lifetime,
//! rounded up), and a group's `country`, `state`, `city`, `carrier` and `asn`.

use crate::check::Check;
use crate::duration::Millis;
use serde::{Deserialize, Serialize};

/// Sessions kept per group at most, and over all groups.
pub const MAX_SESSIONS_PER_GROUP: u32 = 1_000;
pub const MAX_SESSIONS: u32 = 10_000;

/// The vendor gateway and how sessions are named on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackconnectConfig {
    /// The gateway's host name or address.
    pub host: String,
    pub port: u16,
    /// The username template; must hold `{session}` outside any optional part.
    pub username: String,
    /// The password template.
    #[serde(default = "default_password")]
    pub password: String,
    /// How long each session is used; then a new session id takes its place. Keep it
    /// within what the vendor keeps a session's exit for.
    #[serde(default = "default_lifetime")]
    pub session_lifetime: Millis,
    /// The selector combinations and how many sessions of each to keep available.
    #[serde(default)]
    pub sessions: Vec<SessionGroup>,
    /// Hex digits of a session id (some vendors want a fixed length).
    #[serde(default = "default_session_id_length")]
    pub session_id_length: u8,
    /// The parsed templates, filled by validation.
    #[serde(skip)]
    pub templates: Option<(Template, Template)>,
}

fn default_password() -> String {
    "{password}".into()
}

fn default_session_id_length() -> u8 {
    16
}

fn default_lifetime() -> Millis {
    Millis::from_secs(600)
}

/// One selector combination of sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionGroup {
    /// Also the proxies' `region` label.
    #[serde(default)]
    pub country: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub city: Option<String>,
    /// Also the proxies' `carrier` label.
    #[serde(default)]
    pub carrier: Option<String>,
    #[serde(default)]
    pub asn: Option<String>,
    /// Sessions of this group kept available (not handed out) at once.
    pub count: u32,
}

impl SessionGroup {
    /// The group's own value of a placeholder.
    pub fn value(&self, placeholder: Placeholder) -> Option<&str> {
        match placeholder {
            Placeholder::Country => self.country.as_deref(),
            Placeholder::State => self.state.as_deref(),
            Placeholder::City => self.city.as_deref(),
            Placeholder::Carrier => self.carrier.as_deref(),
            Placeholder::Asn => self.asn.as_deref(),
            Placeholder::Account
            | Placeholder::Password
            | Placeholder::Session
            | Placeholder::Minutes
            | Placeholder::Seconds => None,
        }
    }
}

/// What a template may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    Account,
    Password,
    Session,
    Minutes,
    Seconds,
    Country,
    State,
    City,
    Carrier,
    Asn,
}

impl Placeholder {
    const ALL: [(&'static str, Placeholder); 10] = [
        ("account", Placeholder::Account),
        ("password", Placeholder::Password),
        ("session", Placeholder::Session),
        ("minutes", Placeholder::Minutes),
        ("seconds", Placeholder::Seconds),
        ("country", Placeholder::Country),
        ("state", Placeholder::State),
        ("city", Placeholder::City),
        ("carrier", Placeholder::Carrier),
        ("asn", Placeholder::Asn),
    ];

    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Value(Placeholder),
    Optional(Vec<Part>),
}

/// A parsed username or password template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Parses `text`; optional parts do not nest.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut optional: Option<Vec<Part>> = None;
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}', '[', ']']) {
            let target = optional.as_mut().unwrap_or(&mut parts);
            if at > 0 {
                target.push(Part::Text(rest[..at].to_owned()));
            }
            match rest.as_bytes()[at] {
                b'{' => {
                    let end = rest[at..].find('}').ok_or("a { without its }")?;
                    let name = &rest[at + 1..at + end];
                    let placeholder = Placeholder::named(name)
                        .ok_or_else(|| format!("unknown placeholder {{{name}}}"))?;
                    target.push(Part::Value(placeholder));
                    rest = &rest[at + end + 1..];
                    continue;
                }
                b'}' => return Err("a } without its {".into()),
                b'[' if optional.is_some() => {
                    return Err("optional parts do not nest".into());
                }
                b'[' => optional = Some(Vec::new()),
                _ => match optional.take() {
                    Some(inner) => parts.push(Part::Optional(inner)),
                    None => return Err("a ] without its [".into()),
                },
            }
            rest = &rest[at + 1..];
        }
        if optional.is_some() {
            return Err("a [ without its ]".into());
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        if parts.is_empty() {
            return Err("the template is empty".into());
        }
        Ok(Template { parts })
    }

    /// Whether `placeholder` appears outside every optional part.
    pub fn requires(&self, placeholder: Placeholder) -> bool {
        self.parts.contains(&Part::Value(placeholder))
    }

    /// The placeholders outside optional parts.
    fn required(&self) -> impl Iterator<Item = Placeholder> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::Value(p) => Some(*p),
            _ => None,
        })
    }

    /// The text with every placeholder's value; an optional part is left out when one of
    /// its placeholders has none. `Err` names a required placeholder without a value.
    pub fn render(&self, value: impl Fn(Placeholder) -> Option<String>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Value(p) => {
                    out.push_str(
                        &value(*p).ok_or_else(|| format!("{{{}}} has no value", p.name()))?,
                    );
                }
                Part::Optional(inner) => {
                    let mut piece = String::new();
                    let complete = inner.iter().all(|part| match part {
                        Part::Text(text) => {
                            piece.push_str(text);
                            true
                        }
                        Part::Value(p) => value(*p).map(|v| piece.push_str(&v)).is_some(),
                        Part::Optional(_) => false,
                    });
                    if complete {
                        out.push_str(&piece);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// `{minutes}` for a lifetime: whole minutes, rounded up (vendors take minutes).
pub fn lifetime_minutes(lifetime: Millis) -> u64 {
    lifetime.as_ms().div_ceil(60_000).max(1)
}

/// `{seconds}` for a lifetime: whole seconds, rounded up.
pub fn lifetime_seconds(lifetime: Millis) -> u64 {
    lifetime.as_ms().div_ceil(1_000).max(1)
}

/// A group value: letters, digits and `_` (it goes inside a username).
fn is_value(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a backconnect provider's table at `path` and parses its templates.
pub(crate) fn validate(
    c: &mut Check<'_>,
    path: &str,
    backconnect: &mut BackconnectConfig,
    has_credentials: bool,
) {
    c.require(
        crate::tls::is_server_name(&backconnect.host),
        format!("{path}.host"),
        "must be a host name or an IP address",
    );
    c.require(
        backconnect.port != 0,
        format!("{path}.port"),
        "must be 1..=65535",
    );
    c.duration(
        &format!("{path}.session_lifetime"),
        backconnect.session_lifetime,
        Millis::from_secs(10),
        Millis::from_secs(86_400),
    );
    c.require(
        (6..=32).contains(&backconnect.session_id_length),
        format!("{path}.session_id_length"),
        "must be 6..=32",
    );
    c.require(
        has_credentials,
        format!("{path}.username"),
        "a backconnect upstream needs [upstreams.credentials]: they are {account} and {password}",
    );
    let username = Template::parse(&backconnect.username);
    let password = Template::parse(&backconnect.password);
    if let Err(message) = &username {
        c.at(format!("{path}.username"), message.clone());
    }
    if let Err(message) = &password {
        c.at(format!("{path}.password"), message.clone());
    }
    if let Ok(username) = &username {
        c.require(
            username.requires(Placeholder::Session),
            format!("{path}.username"),
            "must hold {session} outside optional parts: it is what makes each session its own proxy",
        );
    }
    c.require(
        !backconnect.sessions.is_empty(),
        format!("{path}.sessions"),
        "at least one session group is needed",
    );
    let mut total = 0u32;
    for (j, group) in backconnect.sessions.iter().enumerate() {
        let gpath = format!("{path}.sessions[{j}]");
        c.require(
            (1..=MAX_SESSIONS_PER_GROUP).contains(&group.count),
            format!("{gpath}.count"),
            "must be 1..=1000",
        );
        total = total.saturating_add(group.count);
        for (name, value) in [
            ("country", &group.country),
            ("state", &group.state),
            ("city", &group.city),
            ("carrier", &group.carrier),
            ("asn", &group.asn),
        ] {
            if let Some(value) = value {
                c.require(
                    is_value(value),
                    format!("{gpath}.{name}"),
                    "must be 1-64 letters, digits or _",
                );
            }
        }
        for template in [&username, &password].into_iter().flatten() {
            for placeholder in template.required() {
                let own = !matches!(
                    placeholder,
                    Placeholder::Account
                        | Placeholder::Password
                        | Placeholder::Session
                        | Placeholder::Minutes
                        | Placeholder::Seconds
                );
                if own && group.value(placeholder).is_none() {
                    c.at(
                        format!("{gpath}.{}", placeholder.name()),
                        format!(
                            "the template needs {{{}}}: set it here or put it in an optional [part]",
                            placeholder.name()
                        ),
                    );
                }
            }
        }
    }
    c.require(
        total <= MAX_SESSIONS,
        format!("{path}.sessions"),
        "at most 10000 sessions over all groups",
    );
    if let (Ok(username), Ok(password)) = (username, password) {
        backconnect.templates = Some((username, password));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(p: Placeholder) -> Option<String> {
        match p {
            Placeholder::Account => Some("acme42".into()),
            Placeholder::Session => Some("a1b2".into()),
            Placeholder::Minutes => Some("10".into()),
            Placeholder::Country => Some("us".into()),
            _ => None,
        }
    }

    #[test]
    fn renders_values_and_leaves_out_optional_parts_without_one() {
        let t = Template::parse(
            "customer-{account}[-cc-{country}][-city-{city}]-sessid-{session}-sesstime-{minutes}",
        )
        .unwrap();
        assert_eq!(
            t.render(values).unwrap(),
            "customer-acme42-cc-us-sessid-a1b2-sesstime-10"
        );
        assert!(t.requires(Placeholder::Session));
        assert!(!t.requires(Placeholder::Country));
        let needs_city = Template::parse("{account}-city-{city}").unwrap();
        assert_eq!(
            needs_city.render(values).unwrap_err(),
            "{city} has no value"
        );
    }

    #[test]
    fn refuses_malformed_templates() {
        for (text, why) in [
            ("user-{sesion}", "unknown placeholder {sesion}"),
            ("user-{session", "a { without its }"),
            ("user-}", "a } without its {"),
            ("user[-a[-b]]", "optional parts do not nest"),
            ("user[-cc-{country}", "a [ without its ]"),
            ("user]-x", "a ] without its ["),
            ("", "the template is empty"),
        ] {
            assert_eq!(Template::parse(text).unwrap_err(), why, "{text}");
        }
    }

    #[test]
    fn minutes_and_seconds_round_up() {
        assert_eq!(lifetime_seconds(Millis(1_500)), 2);
        assert_eq!(lifetime_minutes(Millis::from_secs(600)), 10);
        assert_eq!(lifetime_minutes(Millis::from_secs(90)), 2);
        assert_eq!(lifetime_minutes(Millis::from_secs(20)), 1);
    }
}
