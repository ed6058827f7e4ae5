//! Host names that are IPv4 addresses in the forms `inet_aton` accepts (`2130706433`,
//! `0x7f000001`, `0177.0.0.1`, `127.1`), so every check sees the address a resolver
//! would dial instead of a "name" that slips past address rules.
//!
//! Hand-written: `std`'s `Ipv4Addr` parser takes only the dotted-quad form, and no kept
//! crate offers the `inet_aton` grammar; it is a few lines.

use std::net::Ipv4Addr;

/// The address `host` denotes under glibc's `inet_aton`: 1 to 4 dot-separated parts, each
/// decimal, `0x`/`0X` hexadecimal or leading-`0` octal; the last part fills the bytes left
/// (`a` 32 bits, `a.b` with `b` 24 bits, `a.b.c` with `c` 16 bits). Like glibc, anything
/// from the first ASCII whitespace on is ignored, and a trailing dot, an empty part or a
/// value out of range means "not an address".
pub fn inet_aton_v4(host: &str) -> Option<Ipv4Addr> {
    // glibc stops at whitespace; a caller that keeps whitespace in a name refuses it anyway.
    let host = host
        .split(|c: char| c.is_ascii_whitespace())
        .next()
        .unwrap_or_default();
    let mut parts = [0u32; 4];
    let mut count = 0;
    for part in host.split('.') {
        if count == parts.len() {
            return None;
        }
        parts[count] = number(part)?;
        count += 1;
    }
    let (leading, last) = parts[..count].split_at(count - 1);
    if leading.iter().any(|part| *part > 0xff) {
        return None;
    }
    let last_bits = 32 - 8 * leading.len() as u32;
    if last_bits < 32 && last[0] >> last_bits != 0 {
        return None;
    }
    let high = leading
        .iter()
        .enumerate()
        .fold(0u32, |acc, (i, part)| acc | part << (24 - 8 * i as u32));
    Some(Ipv4Addr::from(high | last[0]))
}

/// One part as `strtoul(part, _, 0)` reads it, which must consume the whole part.
fn number(part: &str) -> Option<u32> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(text: &str) -> Option<String> {
        inet_aton_v4(text).map(|ip| ip.to_string())
    }

    #[test]
    fn every_numeric_form_of_an_address() {
        for form in [
            "127.0.0.2",
            "2130706434",
            "0x7f000002",
            "0X7F000002",
            "0177.0.0.2",
            "127.2",
            "127.0.2",
            "0x7f.0.0.02",
            "0x7f.2",
            "00000177.0.0.2",
        ] {
            assert_eq!(v4(form).as_deref(), Some("127.0.0.2"), "{form}");
        }
        assert_eq!(v4("2852039166").as_deref(), Some("169.254.169.254"));
        assert_eq!(v4("167772161").as_deref(), Some("10.0.0.1"));
        assert_eq!(v4("0").as_deref(), Some("0.0.0.0"));
        assert_eq!(v4("0xffffffff").as_deref(), Some("255.255.255.255"));
        assert_eq!(v4("4294967295").as_deref(), Some("255.255.255.255"));
        assert_eq!(v4("1.16777215").as_deref(), Some("1.255.255.255"));
        assert_eq!(v4("1.2.65535").as_deref(), Some("1.2.255.255"));
        // glibc ignores what follows whitespace.
        assert_eq!(v4("127.2 x").as_deref(), Some("127.0.0.2"));
    }

    #[test]
    fn what_inet_aton_refuses_is_not_an_address() {
        for text in [
            "",
            ".",
            "4294967296",
            "0x100000000",
            "08",
            "0.08",
            "09.1.1.1",
            "0x",
            "0xg",
            "1..2",
            ".1.2.3",
            "1.2.3.4.",
            "127.0.0.1.",
            "1.2.3.4.5",
            "256.1",
            "1.16777216",
            "1.2.65536",
            "1.2.3.256",
            "+1",
            "-1",
            " 1",
            "example.com",
            "1.2.3.a",
            "1e3",
            "::1",
            "99999999999999999999",
        ] {
            assert_eq!(v4(text), None, "{text:?}");
        }
    }
}
