//! Backconnect templates as the file states them: each documented vendor's template with
//! its transforms loads and renders that vendor's syntax; an unknown transform or
//! placeholder, a city or state without the country a template names, a group value that
//! would inject a vendor parameter, `{password}` in a username template and a session id
//! shorter than 12 hex digits are refused whole, by file, line and key.

use proxypool_config::{Config, ConfigError, Env, Placeholder, Role, SessionGroup};
use std::path::Path;

/// A file with one backconnect upstream: `username` and `password` templates, and the
/// session group written as TOML lines.
fn file(username: &str, password: &str, group: &str) -> String {
    format!(
        r#"[[upstreams]]
id = "resi_bc"
ttl = "10m"
max_size = 100
[upstreams.credentials]
username = "acct42"
password = {{ env = "BC_PASSWORD" }}
[upstreams.provider]
kind = "backconnect"
[upstreams.provider.backconnect]
host = "gate.vendor.example"
port = 7777
username = "{username}"
password = "{password}"
session_lifetime = "10m"
[[upstreams.provider.backconnect.sessions]]
{group}
count = 2
[[upstreams.health.targets]]
url = "http://example.com/"
"#
    )
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(
        text,
        "proxypool.toml",
        Path::new("/nonexistent"),
        Role::Controller,
        &Env::from_pairs(vec![("BC_PASSWORD", "pw")]),
    )
}

/// Every problem as `line N: key: message`.
fn problems(text: &str) -> Vec<String> {
    match load(text) {
        Err(ConfigError::Invalid { problems, .. }) => problems
            .into_iter()
            .map(|p| format!("line {}: {}: {}", p.line.unwrap_or(0), p.path, p.message))
            .collect(),
        other => panic!("expected an invalid configuration, got {other:?}"),
    }
}

/// The username and password the loaded file renders for its group, with session `s1`.
fn rendered(text: &str) -> (String, String) {
    let config = load(text).unwrap_or_else(|e| panic!("{e}"));
    let backconnect = config.upstreams[0].provider.backconnect.as_ref().unwrap();
    let group: &SessionGroup = &backconnect.sessions[0];
    let value = |p: Placeholder| match p {
        Placeholder::Account => Some("acct42".to_owned()),
        Placeholder::Password => Some("pw".to_owned()),
        Placeholder::Session => Some("s1".to_owned()),
        Placeholder::Minutes => Some("10".to_owned()),
        Placeholder::Seconds => Some("600".to_owned()),
        own => group.value(own).map(str::to_owned),
    };
    let (username, password) = backconnect.templates.as_ref().unwrap();
    (
        username.render(value).unwrap(),
        password.render(value).unwrap(),
    )
}

/// The templates of the vendor table in docs/vendors.md, and what each renders for a
/// group in New York, as each vendor writes the place.
#[test]
fn each_documented_vendor_template_renders_its_vendors_syntax() {
    let group = "country = \"us\"\nstate = \"New York\"\ncity = \"New York\"";
    let bright = "country = \"us\"\nstate = \"NY\"\ncity = \"New York\"\nasn = \"701\"";
    let soax = "country = \"us\"\nstate = \"New York\"\ncity = \"New York\"\ncarrier = \"verizon_wireless\"";
    for (vendor, username, password, group, expected) in [
        (
            "oxylabs",
            "customer-{account}[-cc-{country|upper}][-city-{city|lower|underscore}][-st-us_{state|lower|underscore}]-sessid-{session}-sesstime-{minutes}",
            "{password}",
            group,
            (
                "customer-acct42-cc-US-city-new_york-st-us_new_york-sessid-s1-sesstime-10",
                "pw",
            ),
        ),
        (
            "bright data",
            "brd-customer-{account}-zone-ZONE[-country-{country|lower}][-state-{state|lower}][-city-{city|lower|nospace}][-asn-{asn}]-session-{session}",
            "{password}",
            bright,
            (
                "brd-customer-acct42-zone-ZONE-country-us-state-ny-city-newyork-asn-701-session-s1",
                "pw",
            ),
        ),
        (
            "decodo",
            "user-{account}[-country-{country|lower}][-city-{city|lower|underscore}]-session-{session}-sessionduration-{minutes}",
            "{password}",
            group,
            (
                "user-acct42-country-us-city-new_york-session-s1-sessionduration-10",
                "pw",
            ),
        ),
        (
            "soax",
            "package-{account}[-country-{country|lower}][-region-{state|lower|plus}][-city-{city|lower|plus}][-isp-{carrier|lower|plus}]-sessionid-{session}-sessionlength-{seconds}",
            "{password}",
            soax,
            (
                "package-acct42-country-us-region-new+york-city-new+york-isp-verizon+wireless-sessionid-s1-sessionlength-600",
                "pw",
            ),
        ),
    ] {
        let (user, pass) = rendered(&file(username, password, group));
        assert_eq!((user.as_str(), pass.as_str()), expected, "{vendor}");
    }
    // A vendor that takes the session id in the password (IPRoyal) cannot be served: a
    // proxy is known by its address and username, so every session would be one proxy.
    let iproyal = file(
        "{account}",
        "{password}[_country-{country|lower}][_city-{city|lower|nospace}]_session-{session}_lifetime-{minutes}m",
        group,
    );
    let found = problems(&iproyal);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("must hold {session}"), "{found:?}");
}

#[test]
fn an_unknown_transform_or_placeholder_is_refused_by_file_line_and_key() {
    for (template, message) in [
        (
            "customer-{account}[-city-{city|camel}]-sessid-{session}",
            "unknown transform \"camel\" in {city|camel}",
        ),
        (
            "customer-{account}[-city-{town|lower}]-sessid-{session}",
            "unknown placeholder {town|lower}",
        ),
    ] {
        let text = file(
            template,
            "{password}",
            "country = \"us\"\ncity = \"Berlin\"",
        );
        let line = text
            .lines()
            .position(|l| l.starts_with("username = \"customer"))
            .unwrap()
            + 1;
        let err = load(&text).unwrap_err().to_string();
        assert!(err.starts_with("proxypool.toml: "), "{err}");
        assert!(
            err.contains(&format!(
                "line {line}: upstreams[0].provider.backconnect.username: {message}"
            )),
            "{err}"
        );
    }
    let text = file(
        "{account}-sessid-{session}",
        "{password}[_city-{city|plural}]",
        "city = \"Berlin\"",
    );
    let found = problems(&text);
    assert!(
        found.iter().any(|p| p
            .contains("upstreams[0].provider.backconnect.password: unknown transform \"plural\"")),
        "{found:?}"
    );
}

#[test]
fn a_city_or_state_needs_its_country_when_the_templates_name_one() {
    let template = "customer-{account}[-cc-{country|upper}][-st-{state|lower}][-city-{city|lower|underscore}]-sessid-{session}";
    for (group, what) in [
        ("city = \"Berlin\"", "city"),
        ("state = \"California\"", "state"),
    ] {
        let found = problems(&file(template, "{password}", group));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("upstreams[0].provider.backconnect.sessions[0].country")
                && found[0].contains(&format!("sets a {what} and the templates name {{country}}")),
            "{found:?}"
        );
    }
    // With its country, or where no template names the country, a city stands alone.
    rendered(&file(
        template,
        "{password}",
        "country = \"de\"\ncity = \"Berlin\"",
    ));
    let (user, _) = rendered(&file(
        "customer-{account}[-city-{city|lower}]-sessid-{session}",
        "{password}",
        "city = \"Berlin\"",
    ));
    assert_eq!(user, "customer-acct42-city-berlin-sessid-s1");
}

#[test]
fn a_group_value_that_would_inject_a_vendor_parameter_is_refused() {
    let dashes = "customer-{account}[-city-{city}]-sessid-{session}";
    // A `-` ends a value in this template: the rest would be read as a session of its own.
    let found = problems(&file(dashes, "{password}", "city = \"x-sessid-fixed\""));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("sessions[0].city: in the username template: {city} writes it as \"x-sessid-fixed\", whose '-' ends a value"),
        "{found:?}"
    );
    // A space is no part of a username; a transform that joins the words fixes both.
    let found = problems(&file(dashes, "{password}", "city = \"New York\""));
    assert!(found[0].contains("carries no ' '"), "{found:?}");
    let (user, _) = rendered(&file(
        "customer-{account}[-city-{city|underscore}]-sessid-{session}",
        "{password}",
        "city = \"x-sessid-fixed\"",
    ));
    assert_eq!(user, "customer-acct42-city-x_sessid_fixed-sessid-s1");

    // Where `_` ends a value (parameters in the password), `|underscore` is refused too.
    let found = problems(&file(
        "{account}",
        "{password}[_city-{city|lower|underscore}]_session-{session}",
        "city = \"New York\"",
    ));
    assert!(
        found.iter().any(|p| p.contains("in the password template: {city|lower|underscore} writes it as \"new_york\", whose '_' ends a value")),
        "{found:?}"
    );

    // Characters no value may hold at all, whatever the transforms.
    for (key, value) in [
        ("city", "new:york"),
        ("city", "São Paulo"),
        ("city", "--"),
        ("state", "a/b"),
        ("country", "u-s"),
        ("country", "_us"),
        ("carrier", "at&t"),
        ("asn", "AS7922"),
        ("asn", "12345678901"),
    ] {
        let group = if key == "country" {
            format!("country = \"{value}\"")
        } else {
            format!("country = \"us\"\n{key} = \"{value}\"")
        };
        let found = problems(&file(
            "customer-{account}[-cc-{country}][-st-{state|plus}][-city-{city|plus}][-isp-{carrier}][-asn-{asn}]-sessid-{session}",
            "{password}",
            &group,
        ));
        assert!(
            found
                .iter()
                .any(|p| p.contains(&format!("sessions[0].{key}: must be"))),
            "{key} = {value:?}: {found:?}"
        );
    }
}

#[test]
fn the_password_is_refused_in_a_username_template() {
    for username in [
        "customer-{account}-pw-{password}-sessid-{session}",
        "customer-{account}[-pw-{password}]-sessid-{session}",
    ] {
        let found = problems(&file(username, "{password}", "country = \"us\""));
        assert_eq!(found.len(), 1, "{username}: {found:?}");
        assert!(
            found[0]
                .contains("upstreams[0].provider.backconnect.username: must not hold {password}"),
            "{found:?}"
        );
    }
    // In the password template it is what the vendor wants.
    rendered(&file(
        "customer-{account}-sessid-{session}",
        "{password}",
        "country = \"us\"",
    ));
}

#[test]
fn session_ids_are_at_least_twelve_hex_digits() {
    let with_length = |digits: u8| {
        file(
            "customer-{account}-sessid-{session}",
            "{password}",
            "country = \"us\"",
        )
        .replace(
            "session_lifetime = \"10m\"",
            &format!("session_lifetime = \"10m\"\nsession_id_length = {digits}"),
        )
    };
    for digits in [6, 11, 33] {
        let found = problems(&with_length(digits));
        assert_eq!(found.len(), 1, "{digits}: {found:?}");
        assert!(
            found[0].contains(
                "upstreams[0].provider.backconnect.session_id_length: must be between 12 and 32 hex digits: shorter random session ids collide"
            ),
            "{found:?}"
        );
    }
    for digits in [12, 32] {
        load(&with_length(digits)).unwrap_or_else(|e| panic!("{digits}: {e}"));
    }
    let config = load(&file(
        "customer-{account}-sessid-{session}",
        "{password}",
        "country = \"us\"",
    ))
    .unwrap();
    let backconnect = config.upstreams[0].provider.backconnect.as_ref().unwrap();
    assert!(
        backconnect.session_id_length >= 12,
        "the default is {}",
        backconnect.session_id_length
    );
}

/// The backconnect upstream the shipped example shows commented out loads as written.
#[test]
fn the_examples_backconnect_upstream_loads_once_uncommented() {
    let example = include_str!("../../../../examples/proxypool.toml");
    let start = example
        .find("# [[upstreams]]\n# id = \"resi_bc\"")
        .expect("the example shows a backconnect upstream");
    let block = &example[start..];
    let block = &block[..block.find("\n\n").unwrap_or(block.len())];
    let text: String = block
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("# ").unwrap_or(line)))
        .collect();
    let config = Config::from_toml_str(
        &text,
        "proxypool.toml",
        Path::new("/nonexistent"),
        Role::Controller,
        &Env::from_pairs(vec![("RESI_PASSWORD", "pw")]),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let backconnect = config.upstreams[0].provider.backconnect.as_ref().unwrap();
    let city = &backconnect.sessions[1];
    let (username, _) = backconnect.templates.as_ref().unwrap();
    let rendered = username
        .render(|p| match p {
            Placeholder::Account => Some("acme42".into()),
            Placeholder::Session => Some("s1".into()),
            Placeholder::Minutes => Some("10".into()),
            own => city.value(own).map(str::to_owned),
        })
        .unwrap();
    assert_eq!(
        rendered,
        "customer-acme42-cc-US-city-new_york-sessid-s1-sesstime-10"
    );
}
