//! Durations as the config file writes them: `"250ms"`, `"30s"`, `"5m"`, `"2h"`.
//!
//! A bare integer is refused on purpose: `timeout = 5` reads as seconds to one operator
//! and milliseconds to another, and a unit in the text removes the doubt.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A whole number of milliseconds, written with a unit in the config.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    pub const fn from_secs(secs: u64) -> Self {
        Millis(secs * 1000)
    }

    pub fn as_ms(self) -> u64 {
        self.0
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// Whole milliseconds of `duration` (sub-millisecond parts are dropped).
    pub fn from_duration(duration: Duration) -> Self {
        Millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    /// Whole seconds, rounded up (`Retry-After` style: 1500ms is 2).
    pub fn as_secs_ceil(self) -> u64 {
        self.0.div_ceil(1000)
    }

    /// Parses `<digits><unit>` with unit `ms`, `s`, `m` or `h`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let factor = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => {
                return Err(format!(
                    "invalid duration {text:?}: write a whole number with a unit, e.g. \"500ms\", \"30s\", \"5m\" or \"1h\""
                ));
            }
        };
        let value: u64 = digits.parse().map_err(|_| {
            format!("invalid duration {text:?}: the number is missing or too large")
        })?;
        value
            .checked_mul(factor)
            .map(Millis)
            .ok_or_else(|| format!("invalid duration {text:?}: too large"))
    }
}

impl fmt::Debug for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms != 0 && ms.is_multiple_of(3_600_000) {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms != 0 && ms.is_multiple_of(60_000) {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1_000) {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Millis;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"30s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Millis, E> {
                Millis::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Millis, E> {
                Err(E::custom(format!(
                    "durations need a unit: write \"{v}s\" or \"{v}ms\", not {v}"
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Millis, E> {
                self.visit_i64(v as i64)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_refuses_bare_numbers() {
        assert_eq!(Millis::parse("250ms").unwrap(), Millis(250));
        assert_eq!(Millis::parse("30s").unwrap(), Millis(30_000));
        assert_eq!(Millis::parse("5m").unwrap(), Millis(300_000));
        assert_eq!(Millis::parse("2h").unwrap(), Millis(7_200_000));
        assert!(Millis::parse("30").is_err());
        assert!(Millis::parse("s").is_err());
        assert!(Millis::parse("1.5s").is_err());
        assert!(Millis::parse("99999999999999999999h").is_err());
        assert_eq!(Millis(90_000).to_string(), "90s");
        assert_eq!(Millis(120_000).to_string(), "2m");
        assert_eq!(Millis(1_500).to_string(), "1500ms");
    }
}
