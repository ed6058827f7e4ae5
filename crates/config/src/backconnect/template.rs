//! The username and password templates of a backconnect upstream: literal text,
//! `{placeholder}`s with optional transforms (`{city|lower|plus}`) and `[optional]` parts,
//! left out when a placeholder inside has no value.
//!
//! Vendors write the same value differently (`cc-US`, `country-us`; `city-new_york`,
//! `city-new+york`, `city-newyork`), so a placeholder names the value once and its
//! transforms say how this vendor writes it. A template also says which characters end a
//! value in it (the `-` of `-city-{city}-session-`): a group value that would render with
//! one of them could start another vendor parameter, and validation refuses it.

use std::collections::BTreeSet;

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

    /// Its name in a template and in a session group.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether its value is a session group's own (the operator's text), rather than the
    /// upstream's credentials or what the keeper makes up (session id, lifetime).
    pub fn is_group_value(self) -> bool {
        matches!(
            self,
            Placeholder::Country
                | Placeholder::State
                | Placeholder::City
                | Placeholder::Carrier
                | Placeholder::Asn
        )
    }
}

/// How a value is written into the template, applied left to right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// ASCII lower case (`US` → `us`).
    Lower,
    /// ASCII upper case (`us` → `US`).
    Upper,
    /// Words joined by `+` (`New York` → `New+York`).
    Plus,
    /// Words joined by `_` (`New York` → `New_York`).
    Underscore,
    /// Words joined with nothing between (`New York` → `NewYork`).
    NoSpace,
}

impl Transform {
    const ALL: [(&'static str, Transform); 5] = [
        ("lower", Transform::Lower),
        ("upper", Transform::Upper),
        ("plus", Transform::Plus),
        ("underscore", Transform::Underscore),
        ("nospace", Transform::NoSpace),
    ];

    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }

    fn apply(self, value: &str) -> String {
        match self {
            Transform::Lower => value.to_ascii_lowercase(),
            Transform::Upper => value.to_ascii_uppercase(),
            Transform::Plus => join_words(value, "+"),
            Transform::Underscore => join_words(value, "_"),
            Transform::NoSpace => join_words(value, ""),
        }
    }
}

/// The words of `value` joined by `joiner`. Words are separated by runs of spaces, `-`,
/// `+` and `_`: the separators the stored geo labels fold too, so `New York`,
/// `new-york` and `new_york` render alike.
fn join_words(value: &str, joiner: &str) -> String {
    value
        .split(|c: char| c.is_whitespace() || matches!(c, '-' | '+' | '_'))
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(joiner)
}

/// One placeholder of a template and its transforms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub placeholder: Placeholder,
    transforms: Vec<Transform>,
}

impl Slot {
    /// Parses what is between `{` and `}`: a name, then `|transform`s.
    fn parse(spec: &str) -> Result<Self, String> {
        let mut names = spec.split('|').map(str::trim);
        let name = names.next().unwrap_or_default();
        let placeholder =
            Placeholder::named(name).ok_or_else(|| format!("unknown placeholder {{{spec}}}"))?;
        let transforms = names
            .map(|t| {
                Transform::named(t).ok_or_else(|| {
                    format!(
                        "unknown transform \"{t}\" in {{{spec}}}: the transforms are lower, upper, plus, underscore and nospace"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Slot {
            placeholder,
            transforms,
        })
    }

    /// `value` as this slot writes it.
    pub fn write(&self, value: &str) -> String {
        self.transforms
            .iter()
            .fold(value.to_owned(), |v, t| t.apply(&v))
    }

    /// How it is written in the template (`{city|lower|plus}`), for messages.
    pub fn spec(&self) -> String {
        let mut spec = format!("{{{}", self.placeholder.name());
        for t in &self.transforms {
            spec.push('|');
            spec.push_str(t.name());
        }
        spec.push('}');
        spec
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Value(Slot),
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
                    target.push(Part::Value(Slot::parse(&rest[at + 1..at + end])?));
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
        self.required().any(|p| p == placeholder)
    }

    /// The placeholders outside optional parts.
    pub fn required(&self) -> impl Iterator<Item = Placeholder> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::Value(slot) => Some(slot.placeholder),
            _ => None,
        })
    }

    /// Every slot, optional parts' included.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.parts
            .iter()
            .flat_map(|part| match part {
                Part::Optional(inner) => inner.as_slice(),
                other => std::slice::from_ref(other),
            })
            .filter_map(|part| match part {
                Part::Value(slot) => Some(slot),
                _ => None,
            })
    }

    /// Whether `placeholder` appears anywhere, optional parts included.
    pub fn names(&self, placeholder: Placeholder) -> bool {
        self.slots().any(|slot| slot.placeholder == placeholder)
    }

    /// The characters that can come right after a value in some rendering (an optional
    /// part that may be left out lets the next one's first character follow too), other
    /// than letters and digits: where the vendor's parser ends a value. A value holding
    /// one would end early and its rest be read as another parameter.
    pub fn value_ends(&self) -> BTreeSet<char> {
        let mut ends = BTreeSet::new();
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Value(_) => follow(&self.parts[i + 1..], &mut ends),
                Part::Optional(inner) => {
                    for (j, inner_part) in inner.iter().enumerate() {
                        if matches!(inner_part, Part::Value(_)) {
                            // Within the part; at its end, whatever follows the part.
                            if !first_char(&inner[j + 1..], &mut ends) {
                                follow(&self.parts[i + 1..], &mut ends);
                            }
                        }
                    }
                }
                Part::Text(_) => {}
            }
        }
        ends.retain(|c| !c.is_alphanumeric());
        ends
    }

    /// The text with every placeholder's value as its slot writes it; an optional part is
    /// left out when one of its placeholders has none. `Err` names a required placeholder
    /// without a value.
    pub fn render(&self, value: impl Fn(Placeholder) -> Option<String>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Value(slot) => {
                    let v = value(slot.placeholder)
                        .ok_or_else(|| format!("{{{}}} has no value", slot.placeholder.name()))?;
                    out.push_str(&slot.write(&v));
                }
                Part::Optional(inner) => {
                    let mut piece = String::new();
                    let complete = inner.iter().all(|part| match part {
                        Part::Text(text) => {
                            piece.push_str(text);
                            true
                        }
                        Part::Value(slot) => value(slot.placeholder)
                            .map(|v| piece.push_str(&slot.write(&v)))
                            .is_some(),
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

/// Adds the first character of `parts` to `ends`; `false` when `parts` is empty (the
/// caller looks further), `true` when a text or a value decides it.
fn first_char(parts: &[Part], ends: &mut BTreeSet<char>) -> bool {
    match parts.first() {
        Some(Part::Text(text)) => {
            ends.extend(text.chars().next());
            true
        }
        Some(Part::Value(_)) => true,
        Some(Part::Optional(_)) | None => false,
    }
}

/// Adds what can follow at the start of the top-level `parts`: a text's first character,
/// and each optional part's first character until a part that is always there.
fn follow(parts: &[Part], ends: &mut BTreeSet<char>) {
    for part in parts {
        match part {
            Part::Optional(inner) => {
                first_char(inner, ends);
            }
            Part::Text(text) => {
                ends.extend(text.chars().next());
                return;
            }
            Part::Value(_) => return,
        }
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
            Placeholder::City => Some("New York".into()),
            _ => None,
        }
    }

    #[test]
    fn renders_values_and_leaves_out_optional_parts_without_one() {
        let t = Template::parse(
            "customer-{account}[-cc-{country}][-st-{state}]-sessid-{session}-sesstime-{minutes}",
        )
        .unwrap();
        assert_eq!(
            t.render(values).unwrap(),
            "customer-acme42-cc-us-sessid-a1b2-sesstime-10"
        );
        assert!(t.requires(Placeholder::Session));
        assert!(!t.requires(Placeholder::Country));
        assert!(t.names(Placeholder::Country));
        assert!(!t.names(Placeholder::City));
        let needs_state = Template::parse("{account}-st-{state}").unwrap();
        assert_eq!(
            needs_state.render(values).unwrap_err(),
            "{state} has no value"
        );
    }

    #[test]
    fn each_transform_writes_the_value_as_its_vendor_does() {
        for (template, rendered) in [
            ("{country|upper}", "US"),
            ("{country|lower}", "us"),
            ("{city|plus}", "New+York"),
            ("{city|underscore}", "New_York"),
            ("{city|nospace}", "NewYork"),
            ("{city|lower|plus}", "new+york"),
            ("{city|lower|underscore}", "new_york"),
            ("{city|nospace|lower}", "newyork"),
            ("{city|upper|nospace}", "NEWYORK"),
            ("{city}", "New York"),
            ("{ city | lower | plus }", "new+york"),
        ] {
            let t = Template::parse(template).unwrap();
            assert_eq!(t.render(values).unwrap(), rendered, "{template}");
        }
        // Words are split at every separator the stored labels fold, so any spelling of a
        // place renders one way.
        for written in [
            "New York",
            "new-york",
            "new_york",
            "new+york",
            " new  york ",
        ] {
            assert_eq!(
                Slot::parse("city|lower|underscore").unwrap().write(written),
                "new_york",
                "{written}"
            );
        }
        assert_eq!(
            Slot::parse("city|lower|plus").unwrap().spec(),
            "{city|lower|plus}"
        );
    }

    #[test]
    fn refuses_malformed_templates() {
        for (text, why) in [
            ("user-{sesion}", "unknown placeholder {sesion}"),
            (
                "user-{city|camel}",
                "unknown transform \"camel\" in {city|camel}: the transforms are lower, upper, plus, underscore and nospace",
            ),
            (
                "user-{city|}",
                "unknown transform \"\" in {city|}: the transforms are lower, upper, plus, underscore and nospace",
            ),
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
    fn the_characters_that_end_a_value_are_those_that_can_follow_one() {
        let ends = |text: &str| -> String {
            Template::parse(text)
                .unwrap()
                .value_ends()
                .into_iter()
                .collect()
        };
        // Oxylabs-like: `_` inside `us_{state}` does not end a value, `-` does.
        assert_eq!(
            ends("customer-{account}[-cc-{country}][-st-us_{state}]-sessid-{session}"),
            "-"
        );
        // IPRoyal-like: parameters are `_`-separated; the last value ends the text.
        assert_eq!(
            ends(
                "{password}[_country-{country}][_city-{city}]_session-{session}_lifetime-{minutes}m"
            ),
            "_"
        );
        // A left-out optional part lets the next one's first character follow.
        assert_eq!(ends("{account}[.x-{city}][+y-{state}]:z"), "+.:");
        assert_eq!(ends("{account}"), "");
    }
}
