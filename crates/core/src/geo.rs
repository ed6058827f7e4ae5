//! The geo labels a proxy may carry besides its region and carrier (`city`, `state`,
//! `asn`), and the one canonical form in which they are stored and compared.
//!
//! Vendors write the same place many ways (`New York`, `new+york`, `new_york`, `NEW-YORK`;
//! `AS7922`, `7922`), and clients select with what a gateway username can carry
//! (`[a-z0-9_]`). Storing the canonical form (when a batch is prepared) and canonicalising
//! every selector and filter with the same function means the gateway, the memory pool and
//! the Redis scripts compare plain strings and can never disagree.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// A value for each geo label, canonical ([`GeoLabel::canonical`]): what a snapshot
/// carries for one proxy (only these three, never a record's other labels), what a
/// gateway username selects and what an extraction filters on, so each compares plain
/// strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GeoValues {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn: Option<String>,
}

impl GeoValues {
    /// The geo labels among a record's `labels`, canonical; a value naming no place is
    /// left out (the store keeps them canonical already; this also covers records stored
    /// before it did).
    pub fn of_labels(labels: &BTreeMap<String, String>) -> Self {
        let mut geo = GeoValues::default();
        for label in GeoLabel::ALL {
            *geo.slot(label) = labels.get(label.key()).and_then(|v| label.canonical(v));
        }
        geo
    }

    pub fn get(&self, label: GeoLabel) -> Option<&str> {
        match label {
            GeoLabel::City => self.city.as_deref(),
            GeoLabel::State => self.state.as_deref(),
            GeoLabel::Asn => self.asn.as_deref(),
        }
    }

    pub fn slot(&mut self, label: GeoLabel) -> &mut Option<String> {
        match label {
            GeoLabel::City => &mut self.city,
            GeoLabel::State => &mut self.state,
            GeoLabel::Asn => &mut self.asn,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.city.is_none() && self.state.is_none() && self.asn.is_none()
    }

    /// Whether every label `wanted` names is this one's too (an empty `wanted` always is).
    pub fn covers(&self, wanted: &GeoValues) -> bool {
        GeoLabel::ALL
            .into_iter()
            .all(|label| wanted.get(label).is_none_or(|w| self.get(label) == Some(w)))
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

    #[test]
    fn a_snapshot_carries_only_the_geo_labels_canonical() {
        let labels: BTreeMap<String, String> = [
            ("city", "New York"),
            ("state", "ny"),
            ("asn", "AS7922"),
            ("zip", "10001"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let geo = GeoValues::of_labels(&labels);
        assert_eq!(geo.get(GeoLabel::City), Some("new_york"));
        assert_eq!(geo.get(GeoLabel::State), Some("ny"));
        assert_eq!(geo.get(GeoLabel::Asn), Some("7922"));
        let json = serde_json::to_value(&geo).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"city": "new_york", "state": "ny", "asn": "7922"})
        );
        let bad: BTreeMap<String, String> = [("city".to_owned(), "a/b".to_owned())].into();
        assert!(GeoValues::of_labels(&bad).is_empty());
    }

    #[test]
    fn covers_compares_only_the_labels_asked_for() {
        let proxy = GeoValues {
            city: Some("boston".into()),
            asn: Some("7922".into()),
            ..GeoValues::default()
        };
        assert!(proxy.covers(&GeoValues::default()));
        let wanted = |label: GeoLabel, value: &str| {
            let mut geo = GeoValues::default();
            *geo.slot(label) = Some(value.to_owned());
            geo
        };
        assert!(proxy.covers(&wanted(GeoLabel::City, "boston")));
        assert!(proxy.covers(&wanted(GeoLabel::Asn, "7922")));
        assert!(!proxy.covers(&wanted(GeoLabel::City, "new_york")));
        assert!(!proxy.covers(&wanted(GeoLabel::State, "ma")), "no state");
    }
}
