//! Times as vendors write them: Unix seconds, Unix milliseconds, or RFC 3339 / ISO 8601
//! strings (`2026-11-03T16:19:03.018667+00:00`, `...Z`), all read as Unix milliseconds.
//!
//! - A bare number (a JSON number, or a string of digits) is in the mapping's `time_unit`
//!   when it is set; unset, its size tells: below [`MS_FROM`] it is seconds, from it on
//!   milliseconds (as seconds it would lie past the year 5000, as milliseconds before
//!   1974, so no time of today's vendors is ambiguous). A fraction of a second is kept to
//!   the millisecond.
//! - A string is a date and a time with an offset (`Z` or `±HH:MM`, also `±HHMM`), the
//!   date and time apart by `T`, `t` or one space, with any number of fractional digits.
//!   A time without an offset is refused: it could be in any zone, and a guess would move
//!   an expiry by hours.
//! - Anything else (negative, before 1970, a date that does not exist, text) is refused.

use crate::config::{MS_FROM, TimeUnit};
use proxypool_core::UnixMillis;
use serde_json::Value;

/// A time field could not be read as a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadTime;

/// The time `value` names, in Unix milliseconds; `None` when it is absent or null.
pub fn read_time(
    value: Option<&Value>,
    unit: Option<TimeUnit>,
) -> Result<Option<UnixMillis>, BadTime> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(whole) => Ok(Some(from_number(whole, 0, unit))),
            None => n
                .as_f64()
                .map(|f| from_float(f, unit))
                .ok_or(BadTime)?
                .map(Some),
        },
        Some(Value::String(text)) => parse_text(text.trim(), unit).map(Some),
        Some(_) => Err(BadTime),
    }
}

/// A whole number of the unit plus `frac_ms` milliseconds (only for seconds).
fn from_number(whole: u64, frac_ms: u64, unit: Option<TimeUnit>) -> UnixMillis {
    let seconds = match unit {
        Some(TimeUnit::Seconds) => true,
        Some(TimeUnit::Ms) => false,
        None => whole < MS_FROM,
    };
    if seconds {
        whole.saturating_mul(1000).saturating_add(frac_ms)
    } else {
        whole
    }
}

fn from_float(value: f64, unit: Option<TimeUnit>) -> Result<UnixMillis, BadTime> {
    if !value.is_finite() || value < 0.0 || value >= u64::MAX as f64 {
        return Err(BadTime);
    }
    let whole = value.trunc() as u64;
    let frac_ms = ((value - value.trunc()) * 1000.0) as u64;
    Ok(from_number(whole, frac_ms.min(999), unit))
}

fn parse_text(text: &str, unit: Option<TimeUnit>) -> Result<UnixMillis, BadTime> {
    if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()) {
        let whole = text.parse::<u64>().map_err(|_| BadTime)?;
        return Ok(from_number(whole, 0, unit));
    }
    parse_rfc3339(text)
}

/// An RFC 3339 date-time with an offset, in Unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Result<UnixMillis, BadTime> {
    let mut p = Cursor(text.as_bytes());
    let year = p.digits(4)?;
    p.expect(b'-')?;
    let month = p.digits(2)?;
    p.expect(b'-')?;
    let day = p.digits(2)?;
    match p.next() {
        Some(b'T' | b't' | b' ') => {}
        _ => return Err(BadTime),
    }
    let hour = p.digits(2)?;
    p.expect(b':')?;
    let minute = p.digits(2)?;
    p.expect(b':')?;
    let second = p.digits(2)?;
    let mut millis = 0;
    if p.peek() == Some(b'.') {
        p.next();
        let mut scale = 100;
        let mut any = false;
        while let Some(d) = p.peek().filter(u8::is_ascii_digit) {
            p.next();
            any = true;
            millis += u64::from(d - b'0') * scale;
            scale /= 10;
        }
        if !any {
            return Err(BadTime);
        }
    }
    let offset_minutes: i64 = match p.next() {
        Some(b'Z' | b'z') => 0,
        Some(sign @ (b'+' | b'-')) => {
            let hours = p.digits(2)?;
            if p.peek() == Some(b':') {
                p.next();
            }
            let minutes = p.digits(2)?;
            if hours > 23 || minutes > 59 {
                return Err(BadTime);
            }
            let total = (hours * 60 + minutes) as i64;
            if sign == b'+' { total } else { -total }
        }
        _ => return Err(BadTime),
    };
    if !p.0.is_empty() {
        return Err(BadTime);
    }
    let valid = (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        // 60: a leap second, as RFC 3339 allows.
        && second <= 60;
    if !valid {
        return Err(BadTime);
    }
    let days = days_from_civil(year as i64, month, day);
    let local = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64;
    let utc = local - offset_minutes * 60;
    let utc = u64::try_from(utc).map_err(|_| BadTime)?;
    Ok(utc * 1000 + millis)
}

/// The bytes of a time still to read.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    fn next(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    fn expect(&mut self, byte: u8) -> Result<(), BadTime> {
        (self.next() == Some(byte)).then_some(()).ok_or(BadTime)
    }

    /// Exactly `n` decimal digits.
    fn digits(&mut self, n: usize) -> Result<u64, BadTime> {
        let mut value = 0;
        for _ in 0..n {
            match self.next() {
                Some(d) if d.is_ascii_digit() => value = value * 10 + u64::from(d - b'0'),
                _ => return Err(BadTime),
            }
        }
        Ok(value)
    }
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u64, day: u64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(value: Value, unit: Option<TimeUnit>) -> Result<Option<UnixMillis>, BadTime> {
        read_time(Some(&value), unit)
    }

    #[test]
    fn rfc_3339_with_any_offset_and_precision() {
        // 2026-11-03T16:19:03.018667Z, as `date -u -d ... +%s%3N` says.
        let utc = 1_793_722_743_018;
        for text in [
            "2026-11-03T16:19:03.018667+00:00",
            "2026-11-03T16:19:03.018667Z",
            "2026-11-03t16:19:03.018z",
            "2026-11-03 16:19:03.0186+00:00",
            "2026-11-03T09:19:03.018667-07:00",
            "2026-11-03T21:49:03.018+0530",
            "  2026-11-03T16:19:03.018667+00:00 ",
        ] {
            assert_eq!(at(json!(text), None), Ok(Some(utc)), "{text}");
        }
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339("2000-02-29T12:00:00Z"), Ok(951_825_600_000));
        assert_eq!(parse_rfc3339("2016-12-31T23:59:60Z"), Ok(1_483_228_800_000));
    }

    #[test]
    fn numbers_by_unit_or_by_size() {
        let cases = [
            (json!(1_793_722_743u64), None, 1_793_722_743_000),
            (json!(1_793_722_743_018u64), None, 1_793_722_743_018),
            (json!("1793722743"), None, 1_793_722_743_000),
            (json!(1_793_722_743.5), None, 1_793_722_743_500),
            (json!(2000), None, 2_000_000),
            (json!(2000), Some(TimeUnit::Ms), 2000),
            (
                json!(1_793_722_743_018u64),
                Some(TimeUnit::Seconds),
                1_793_722_743_018_000,
            ),
            (json!(99_999_999_999u64), None, 99_999_999_999_000),
            (json!(100_000_000_000u64), None, 100_000_000_000),
        ];
        for (value, unit, ms) in cases {
            assert_eq!(at(value.clone(), unit), Ok(Some(ms)), "{value} {unit:?}");
        }
        assert_eq!(read_time(None, None), Ok(None));
        assert_eq!(at(Value::Null, None), Ok(None));
    }

    #[test]
    fn anything_else_is_refused() {
        for value in [
            json!(-5),
            json!(-0.5),
            json!(true),
            json!([1]),
            json!({"at": 1}),
            json!(""),
            json!("soon"),
            json!("2026-11-03T16:19:03"),
            json!("2026-11-03T16:19:03.5"),
            json!("2026-11-03"),
            json!("2026-11-03T16:19Z"),
            json!("2026-11-03T16:19:03.Z"),
            json!("2026-02-29T16:19:03Z"),
            json!("2026-13-01T00:00:00Z"),
            json!("2026-04-31T00:00:00Z"),
            json!("2026-11-03T24:00:00Z"),
            json!("2026-11-03T16:19:03+24:00"),
            json!("2026-11-03T16:19:03+00:00 junk"),
            json!("1969-12-31T23:59:59Z"),
            json!("+2026-11-03T16:19:03Z"),
            json!("Tue, 03 Nov 2026 16:19:03 GMT"),
        ] {
            assert_eq!(at(value.clone(), None), Err(BadTime), "{value}");
        }
    }
}
