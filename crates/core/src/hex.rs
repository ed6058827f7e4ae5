//! Lowercase hex, the one form keys, pins and digests travel in as text.

/// `bytes` as `2 * bytes.len()` lowercase hex digits.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// Exactly `2 * out.len()` lowercase hex digits into `out`; `None` (and `out` unspecified)
/// for any other text.
pub fn decode_into(text: &str, out: &mut [u8]) -> Option<()> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let text = text.as_bytes();
    if text.len() != out.len() * 2 {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_anything_else() {
        assert_eq!(encode(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        let mut out = [0u8; 4];
        assert_eq!(decode_into("000fabff", &mut out), Some(()));
        assert_eq!(out, [0x00, 0x0f, 0xab, 0xff]);
        assert_eq!(decode_into("000FABFF", &mut out), None, "lower case only");
        assert_eq!(decode_into("000fab", &mut out), None, "the exact length");
        assert_eq!(decode_into("000fabfg", &mut out), None);
    }
}
