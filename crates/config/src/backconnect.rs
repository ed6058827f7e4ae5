//! A backconnect upstream (`kind = "backconnect"`): one vendor gateway address where the
//! username chooses the exit. The controller keeps `count` sessions per group alive as
//! proxies of the pool; each is the gateway's address under a username rendered from the
//! vendor's template with a fresh session id, and lives `session_lifetime`.
//!
//! Templates ([`template`]) are literal text with `{placeholder}`s, each with optional
//! transforms (`{city|lower|plus}`), and `[optional]` parts, left out when a placeholder
//! inside has no value (`customer-{account}[-cc-{country|upper}]-sessid-{session}`).
//! Placeholders: `account` and `password` (the upstream's credentials; `password` only in
//! the password template, since a rendered username is shown wherever a proxy's
//! credentials are printed), `session` (a fresh random id of `session_id_length` hex
//! digits, at least 12: ids are drawn at random for every session of every group, and
//! shorter ones collide among thousands), `minutes` and `seconds` (the lifetime, rounded
//! up), and a group's `country`, `state`, `city`, `carrier` and `asn`.
//!
//! Validation renders every group value as each template writes it, so a value that would
//! carry a character the vendor reads as the end of a value (and so inject a parameter of
//! its own) is refused at load, never sent. A template that names `{country}` takes a city
//! or state only with its country: vendors resolve a place name within a country.

pub mod template;

use crate::check::Check;
use crate::duration::Millis;
use proxypool_core::GeoLabel;
use serde::{Deserialize, Serialize};
pub use template::{Placeholder, Slot, Template, Transform};

/// Sessions kept per group at most, and over all groups.
pub const MAX_SESSIONS_PER_GROUP: u32 = 1_000;
pub const MAX_SESSIONS: u32 = 10_000;

/// Bounds of `session_id_length`, in hex digits. The lower one keeps random ids apart:
/// with 6 digits (16.7 million ids) two of a few thousand sessions share an id with odds
/// near one in three, and two sessions on one id share an exit; 12 digits (48 bits) make
/// that about one in a hundred million for the 10,000 sessions a file may keep.
pub const SESSION_ID_DIGITS: std::ops::RangeInclusive<u8> = 12..=32;

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
    /// Hex digits of a session id (some vendors want a fixed length), 12 to 32.
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
    /// As the state is called (`California`, `NY`); also the proxies' `state` geo label.
    #[serde(default)]
    pub state: Option<String>,
    /// As the city is called (`New York`); also the proxies' `city` geo label.
    #[serde(default)]
    pub city: Option<String>,
    /// Also the proxies' `carrier` label.
    #[serde(default)]
    pub carrier: Option<String>,
    /// The AS number (`7922`); also the proxies' `asn` geo label.
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

    /// The group's value of a geo label, as written (the store keeps its canonical form).
    pub fn geo(&self, label: GeoLabel) -> Option<&str> {
        match label {
            GeoLabel::City => self.city.as_deref(),
            GeoLabel::State => self.state.as_deref(),
            GeoLabel::Asn => self.asn.as_deref(),
        }
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

/// What a group's own value may be, by placeholder; `Err` says what it must be. Country and
/// carrier are also the proxies' `region` and `carrier` labels, so they are label text;
/// a city or state may be written as the place is called (`New York`), as long as it has
/// a canonical geo label; an ASN is its number.
fn check_value(placeholder: Placeholder, value: &str) -> Result<(), &'static str> {
    let sized = !value.is_empty() && value.len() <= 64;
    match placeholder {
        Placeholder::Country | Placeholder::Carrier => {
            let label = sized
                && !value.starts_with('_')
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            label
                .then_some(())
                .ok_or("must be 1-64 ASCII letters, digits or _, not starting with _")
        }
        Placeholder::City | Placeholder::State => {
            let label = if placeholder == Placeholder::City {
                GeoLabel::City
            } else {
                GeoLabel::State
            };
            let place = sized
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '+' | '_'))
                && label.canonical(value).is_some();
            place.then_some(()).ok_or(
                "must be 1-64 ASCII letters, digits, spaces, -, + or _, with a letter or digit (Sao Paulo, not São Paulo)",
            )
        }
        Placeholder::Asn => {
            let number = value.len() <= 10
                && value.bytes().all(|b| b.is_ascii_digit())
                && GeoLabel::Asn.canonical(value).is_some();
            number
                .then_some(())
                .ok_or("must be the AS number, digits only (7922, not AS7922)")
        }
        Placeholder::Account
        | Placeholder::Password
        | Placeholder::Session
        | Placeholder::Minutes
        | Placeholder::Seconds => Ok(()),
    }
}

/// Checks how `slot` writes `value` into `template`: letters, digits, `_` and `+` only,
/// and none of the characters that end a value there. `Err` says why not.
fn check_rendered(template: &Template, slot: &Slot, value: &str) -> Result<(), String> {
    let rendered = slot.write(value);
    let ends = template.value_ends();
    if let Some(bad) = rendered.chars().find(|c| ends.contains(c)) {
        return Err(format!(
            "{} writes it as \"{rendered}\", whose {bad:?} ends a value in this template: the vendor would read the rest as another parameter; add a transform that joins the words (|plus, |underscore or |nospace) or write the value without it",
            slot.spec()
        ));
    }
    if let Some(bad) = rendered
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '+')))
    {
        return Err(format!(
            "{} writes it as \"{rendered}\", and a username or password carries no {bad:?}: add a transform that joins the words (|plus, |underscore or |nospace)",
            slot.spec()
        ));
    }
    if rendered.is_empty() {
        return Err(format!("{} writes it as nothing", slot.spec()));
    }
    Ok(())
}

/// Checks one session group against the parsed templates (named by their keys).
fn check_group(
    c: &mut Check<'_>,
    gpath: &str,
    group: &SessionGroup,
    templates: &[(&str, &Template)],
) {
    c.require(
        (1..=MAX_SESSIONS_PER_GROUP).contains(&group.count),
        format!("{gpath}.count"),
        "must be between 1 and 1000",
    );
    let own = [
        Placeholder::Country,
        Placeholder::State,
        Placeholder::City,
        Placeholder::Carrier,
        Placeholder::Asn,
    ];
    for placeholder in own {
        let Some(value) = group.value(placeholder) else {
            continue;
        };
        let key = format!("{gpath}.{}", placeholder.name());
        if let Err(why) = check_value(placeholder, value) {
            c.at(key, why);
            continue;
        }
        for (which, template) in templates {
            for slot in template.slots().filter(|s| s.placeholder == placeholder) {
                if let Err(why) = check_rendered(template, slot, value) {
                    c.at(key.clone(), format!("in the {which} template: {why}"));
                }
            }
        }
    }
    for (_, template) in templates {
        for placeholder in template.required() {
            if placeholder.is_group_value() && group.value(placeholder).is_none() {
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
    // A template that names the country declares that the vendor resolves a city or a
    // state within it: without the country the vendor would refuse the username, or pick
    // a namesake elsewhere.
    let names_country = templates.iter().any(|(_, t)| t.names(Placeholder::Country));
    if names_country && group.country.is_none() {
        for placeholder in [Placeholder::City, Placeholder::State] {
            if group.value(placeholder).is_some() {
                c.at(
                    format!("{gpath}.country"),
                    format!(
                        "this group sets a {} and the templates name {{country}}: the vendor takes a {} only with its country, so set country too",
                        placeholder.name(),
                        placeholder.name()
                    ),
                );
            }
        }
    }
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
        "must be between 1 and 65535",
    );
    c.duration(
        &format!("{path}.session_lifetime"),
        backconnect.session_lifetime,
        Millis::from_secs(10),
        Millis::from_secs(86_400),
    );
    if !SESSION_ID_DIGITS.contains(&backconnect.session_id_length) {
        c.at(
            format!("{path}.session_id_length"),
            format!(
                "must be between {} and {} hex digits: shorter random session ids collide among thousands of sessions, and two sessions on one id share an exit",
                SESSION_ID_DIGITS.start(),
                SESSION_ID_DIGITS.end()
            ),
        );
    }
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
        c.require(
            !username.names(Placeholder::Password),
            format!("{path}.username"),
            "must not hold {password}: a username is shown wherever a proxy's credentials are printed or logged; put the password in the password template",
        );
    }
    c.require(
        !backconnect.sessions.is_empty(),
        format!("{path}.sessions"),
        "at least one session group is needed",
    );
    let templates: Vec<(&str, &Template)> = [("username", &username), ("password", &password)]
        .into_iter()
        .filter_map(|(which, t)| t.as_ref().ok().map(|t| (which, t)))
        .collect();
    let mut total = 0u32;
    for (j, group) in backconnect.sessions.iter().enumerate() {
        check_group(c, &format!("{path}.sessions[{j}]"), group, &templates);
        total = total.saturating_add(group.count);
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

    #[test]
    fn minutes_and_seconds_round_up() {
        assert_eq!(lifetime_seconds(Millis(1_500)), 2);
        assert_eq!(lifetime_minutes(Millis::from_secs(600)), 10);
        assert_eq!(lifetime_minutes(Millis::from_secs(90)), 2);
        assert_eq!(lifetime_minutes(Millis::from_secs(20)), 1);
    }
}
