//! The geo labels a proxy may carry besides its region and carrier (`city`, `state`,
//! `asn`), and the one canonical form in which they are stored and compared.
//!
//! Vendors write the same place many ways (`New York`, `new+york`, `new_york`, `NEW-YORK`;
//! `AS7922`, `7922`), and clients select with what a gateway username can carry
//! (`[a-z0-9_]`). Storing the canonical form (when a batch is prepared) and canonicalising
//! every selector and filter with the same function means the gateway, the memory pool and
//! the Redis scripts compare plain strings and can never disagree.

use serde::{Deserialize, Serialize};

/// The longest canonical geo value.
pub const MAX_GEO_VALUE: usize = 64;

/// A geo label a proxy can be selected by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeoLabel {
    City,
    State,
    Asn,
}

impl GeoLabel {
    pub const ALL: [GeoLabel; 3] = [GeoLabel::City, GeoLabel::State, GeoLabel::Asn];

    /// The key in a proxy's `labels`, the gateway selector's name and the filter's field.
    pub fn key(self) -> &'static str {
        match self {
            GeoLabel::City => "city",
            GeoLabel::State => "state",
            GeoLabel::Asn => "asn",
        }
    }

    pub fn from_key(key: &str) -> Option<GeoLabel> {
        GeoLabel::ALL.into_iter().find(|label| label.key() == key)
    }

    /// The canonical form of `value`, or `None` when it cannot name a place:
    /// - city and state: lower-case; runs of spaces, `-`, `+` and `_` become one `_`; other
    ///   characters must be letters or digits (`São Paulo` → `são_paulo`);
    /// - asn: the number, with an optional `AS` prefix dropped (`AS7922` → `7922`).
    pub fn canonical(self, value: &str) -> Option<String> {
        let value = value.trim();
        let canonical = match self {
            GeoLabel::City | GeoLabel::State => canonical_place(value)?,
            GeoLabel::Asn => canonical_asn(value)?,
        };
        (!canonical.is_empty() && canonical.len() <= MAX_GEO_VALUE).then_some(canonical)
    }
}

fn canonical_place(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut pending_separator = false;
    for c in value.chars() {
        if c.is_control() {
            return None;
        } else if c.is_whitespace() || matches!(c, '-' | '+' | '_') {
            pending_separator = !out.is_empty();
        } else if c.is_alphanumeric() {
            if pending_separator {
                out.push('_');
                pending_separator = false;
            }
            // Lower-casing may add a combining mark (`İ` is `i` and a dot above): marks
            // are dropped, so the canonical form is its own canonical form and `İstanbul`
            // is selected by `istanbul`.
            out.extend(c.to_lowercase().filter(|l| !is_combining_mark(*l)));
        } else {
            return None;
        }
    }
    Some(out)
}

/// The combining diacritical marks block: what `char::to_lowercase` can add.
fn is_combining_mark(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

fn canonical_asn(value: &str) -> Option<String> {
    let digits = match value.get(..2) {
        Some(prefix) if prefix.eq_ignore_ascii_case("as") => &value[2..],
        _ => value,
    };
    let valid =
        !digits.is_empty() && digits.len() <= 10 && digits.bytes().all(|b| b.is_ascii_digit());
    let number: u64 = if valid {
        digits.parse().ok()?
    } else {
        return None;
    };
    (number <= u64::from(u32::MAX)).then(|| number.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_written_one_way() {
        for written in [
            "New York",
            "new+york",
            "new_york",
            "NEW-YORK",
            "  new   york ",
            "new__york",
        ] {
            assert_eq!(
                GeoLabel::City.canonical(written).as_deref(),
                Some("new_york"),
                "{written}"
            );
        }
        assert_eq!(
            GeoLabel::City.canonical("São Paulo").as_deref(),
            Some("são_paulo")
        );
        assert_eq!(GeoLabel::State.canonical("CA").as_deref(), Some("ca"));
        assert_eq!(
            GeoLabel::City.canonical("İSTANBUL").as_deref(),
            Some("istanbul")
        );
        for written in ["New York", "İstanbul", "São Paulo"] {
            let once = GeoLabel::City.canonical(written).unwrap();
            assert_eq!(
                GeoLabel::City.canonical(&once),
                Some(once.clone()),
                "{written}"
            );
        }
    }

    #[test]
    fn places_refuse_what_no_place_is_called() {
        for bad in ["", "  ", "new;york", "a/b", "x\ny", &"a".repeat(65)] {
            assert_eq!(GeoLabel::City.canonical(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn asns_are_numbers_with_an_optional_prefix() {
        assert_eq!(GeoLabel::Asn.canonical("AS7922").as_deref(), Some("7922"));
        assert_eq!(GeoLabel::Asn.canonical("as7922").as_deref(), Some("7922"));
        assert_eq!(GeoLabel::Asn.canonical("007922").as_deref(), Some("7922"));
        for bad in ["", "AS", "ASx1", "79 22", "99999999999", "-1"] {
            assert_eq!(GeoLabel::Asn.canonical(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keys_round_trip() {
        for label in GeoLabel::ALL {
            assert_eq!(GeoLabel::from_key(label.key()), Some(label));
        }
        assert_eq!(GeoLabel::from_key("region"), None);
    }
}
