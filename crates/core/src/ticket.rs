//! Feedback tickets: a gateway's proof that it routed a client through a proxy.
//!
//! `POST /v1/feedback` by `proxy_id` puts a proxy on cooldown for a domain, so only a
//! client that used the proxy may do it: one that holds it from a live extraction, or one
//! a gateway routed through it recently. The gateway proves the second with a ticket in
//! each response that names a proxy (`X-Proxypool-Ticket` next to `X-Proxypool-Proxy`):
//! an HMAC-SHA256, under the pool store's [`TicketKey`], of (client id, proxy id, expiry).
//! The client API checks it with the same key, read from the store; the gateway gets the
//! key in its snapshots. A ticket is good until its expiry ([`TICKET_LIFETIME_MS`] after it
//! was issued) for that client and that proxy only.
//!
//! Text form: `v1.<expires_at_ms>.<mac>`: the version, the expiry in decimal milliseconds
//! since the epoch (no sign, no leading zero) and the MAC as 64 lowercase hex digits. The
//! MAC covers a length-prefixed encoding (see [`TicketSigner::mac`]), so no two different
//! (client, proxy, expiry) triples share an input. Verification recomputes the MAC and
//! compares it in constant time (`subtle`).
//!
//! One key per store incarnation, no rotation: the store creates it on first use (every
//! caller racing on an empty store gets the same one) and keeps it as long as the
//! incarnation; a store loss brings a new key, and tickets issued under the old one stop
//! verifying (clients report by extraction or get a new ticket with their next request).

use crate::ids::{ClientId, ProxyId};
use crate::random::{self, RandomError};
use crate::time::UnixMillis;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Sha256;
use std::fmt;
use subtle::ConstantTimeEq;

/// Who a client is to a proxy it wants to report on (`CooldownStore::may_report`), in
/// one read of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reporter {
    /// The client holds the proxy from a live extraction: it may report.
    Holder,
    /// The pool holds the proxy and no live extraction does: the client may report with
    /// a gateway's ticket for it (it routed through the proxy recently).
    Unheld,
    /// The pool does not hold the proxy, or another client's live extraction does: the
    /// same answer for both, so it tells nothing about proxies that are not the client's.
    No,
}

/// How long a gateway's ticket stays good: 15 minutes after the response that carried it.
pub const TICKET_LIFETIME_MS: u64 = 15 * 60 * 1000;

/// The version prefix of the only ticket format.
const VERSION: &str = "v1";

/// The domain separator in front of every MAC input, so the key signs nothing else by
/// accident.
const CONTEXT: &[u8] = b"proxypool feedback ticket v1\0";

/// Bytes of a key.
pub const TICKET_KEY_BYTES: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The secret tickets are signed with: 32 random bytes. No `Display`; `Debug` is redacted;
/// serialized as 64 lowercase hex digits (that is how the store keeps it and the snapshot
/// carries it).
#[derive(Clone)]
pub struct TicketKey([u8; TICKET_KEY_BYTES]);

/// A text that is not a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a ticket key is {} lowercase hex digits", TICKET_KEY_BYTES * 2)]
pub struct BadTicketKey;

impl TicketKey {
    /// A new key from the operating system's CSPRNG.
    pub fn generate() -> Result<TicketKey, RandomError> {
        let mut bytes = [0u8; TICKET_KEY_BYTES];
        random::fill(&mut bytes)?;
        Ok(TicketKey(bytes))
    }

    pub fn from_bytes(bytes: [u8; TICKET_KEY_BYTES]) -> TicketKey {
        TicketKey(bytes)
    }

    /// Parses 64 lowercase hex digits.
    pub fn from_hex(text: &str) -> Result<TicketKey, BadTicketKey> {
        let mut bytes = [0u8; TICKET_KEY_BYTES];
        decode_hex(text, &mut bytes).ok_or(BadTicketKey)?;
        Ok(TicketKey(bytes))
    }

    /// The key as 64 lowercase hex digits (what the store keeps; never log it).
    pub fn to_hex(&self) -> String {
        encode_hex(&self.0)
    }

    /// A short public name of the key (16 hex digits of an HMAC under it): what snapshot
    /// checksums and logs may carry instead of the key.
    pub fn id(&self) -> String {
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(b"proxypool ticket key id");
        encode_hex(&mac.finalize().into_bytes()[..8])
    }

    /// The keyed MAC state, built once and cloned per ticket.
    pub fn signer(&self) -> TicketSigner {
        TicketSigner {
            mac: <HmacSha256 as Mac>::new_from_slice(&self.0)
                .expect("HMAC takes a key of any length"),
        }
    }
}

impl PartialEq for TicketKey {
    fn eq(&self, other: &TicketKey) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for TicketKey {}

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketKey(<redacted>)")
    }
}

impl Serialize for TicketKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for TicketKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        TicketKey::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

/// Why a ticket was refused. Callers answer every case alike (the feedback route's 404);
/// the cases exist for tests and debugging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// Not `v1.<digits>.<64 hex digits>`.
    #[error("not a ticket")]
    Malformed,
    /// Another format version.
    #[error("unknown ticket version")]
    Version,
    /// Its expiry is not after now.
    #[error("ticket expired")]
    Expired,
    /// The MAC does not match: another client, another proxy, another expiry, another key.
    #[error("ticket does not match")]
    Mismatch,
}

/// A [`TicketKey`]'s keyed HMAC state: issues and verifies tickets. Cheap to clone (one
/// clone per ticket); build it once per key. `Debug` is redacted.
#[derive(Clone)]
pub struct TicketSigner {
    mac: HmacSha256,
}

impl fmt::Debug for TicketSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketSigner(<redacted>)")
    }
}

impl TicketSigner {
    /// The MAC of (client, proxy, expiry): over the context, the expiry as 8 big-endian
    /// bytes, then each id as its length (4 big-endian bytes) and its bytes.
    fn mac(&self, client: &ClientId, proxy: &ProxyId, expires_at_ms: UnixMillis) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(CONTEXT);
        mac.update(&expires_at_ms.to_be_bytes());
        for part in [client.as_str(), proxy.as_str()] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            mac.update(&len.to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac.finalize().into_bytes().into()
    }

    /// The ticket for `client` on `proxy`, good until `expires_at_ms`.
    pub fn issue(&self, client: &ClientId, proxy: &ProxyId, expires_at_ms: UnixMillis) -> String {
        let mac = self.mac(client, proxy, expires_at_ms);
        format!("{VERSION}.{expires_at_ms}.{}", encode_hex(&mac))
    }

    /// Whether `ticket` was issued under this key for `client` on `proxy` and is still good
    /// at `now`.
    pub fn verify(
        &self,
        ticket: &str,
        client: &ClientId,
        proxy: &ProxyId,
        now: UnixMillis,
    ) -> Result<(), TicketError> {
        let (expires_at_ms, given) = parse(ticket)?;
        let expected = self.mac(client, proxy, expires_at_ms);
        if !bool::from(expected.ct_eq(&given)) {
            return Err(TicketError::Mismatch);
        }
        if now >= expires_at_ms {
            return Err(TicketError::Expired);
        }
        Ok(())
    }
}

/// [`TicketSigner::issue`] under `key`.
pub fn issue_ticket(
    key: &TicketKey,
    client: &ClientId,
    proxy: &ProxyId,
    expires_at_ms: UnixMillis,
) -> String {
    key.signer().issue(client, proxy, expires_at_ms)
}

/// [`TicketSigner::verify`] under `key`.
pub fn verify_ticket(
    key: &TicketKey,
    ticket: &str,
    client: &ClientId,
    proxy: &ProxyId,
    now: UnixMillis,
) -> Result<(), TicketError> {
    key.signer().verify(ticket, client, proxy, now)
}

/// `v1.<expiry>.<mac>` into (expiry, mac).
fn parse(ticket: &str) -> Result<(UnixMillis, [u8; 32]), TicketError> {
    let mut parts = ticket.split('.');
    let (Some(version), Some(expiry), Some(mac), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TicketError::Malformed);
    };
    if version != VERSION {
        return Err(TicketError::Version);
    }
    let canonical = !expiry.is_empty()
        && expiry.len() <= 20
        && expiry.bytes().all(|b| b.is_ascii_digit())
        && (expiry == "0" || !expiry.starts_with('0'));
    if !canonical {
        return Err(TicketError::Malformed);
    }
    let expires_at_ms: UnixMillis = expiry.parse().map_err(|_| TicketError::Malformed)?;
    let mut bytes = [0u8; 32];
    decode_hex(mac, &mut bytes).ok_or(TicketError::Malformed)?;
    Ok((expires_at_ms, bytes))
}

fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// Exactly `2 * out.len()` lowercase hex digits into `out`.
fn decode_hex(text: &str, out: &mut [u8]) -> Option<()> {
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

    const NOW: UnixMillis = 1_700_000_000_000;

    fn key() -> TicketKey {
        TicketKey::from_bytes([7; 32])
    }

    fn client(name: &str) -> ClientId {
        ClientId::new(name).unwrap()
    }

    fn proxy(n: u8) -> ProxyId {
        ProxyId::new(format!("{n:032x}")).unwrap()
    }

    fn ticket() -> String {
        issue_ticket(&key(), &client("acme"), &proxy(1), NOW + TICKET_LIFETIME_MS)
    }

    #[test]
    fn a_ticket_verifies_for_its_client_and_proxy_until_it_expires() {
        let ticket = ticket();
        assert!(ticket.starts_with(&format!("v1.{}.", NOW + TICKET_LIFETIME_MS)));
        assert_eq!(ticket.len(), "v1.".len() + 13 + 1 + 64);
        let verify =
            |t: &str, c: &str, p: u8, now| verify_ticket(&key(), t, &client(c), &proxy(p), now);
        assert_eq!(verify(&ticket, "acme", 1, NOW), Ok(()));
        assert_eq!(
            verify(&ticket, "acme", 1, NOW + TICKET_LIFETIME_MS - 1),
            Ok(())
        );
        assert_eq!(verify(&ticket, "other", 1, NOW), Err(TicketError::Mismatch));
        assert_eq!(verify(&ticket, "acme", 2, NOW), Err(TicketError::Mismatch));
        assert_eq!(
            verify(&ticket, "acme", 1, NOW + TICKET_LIFETIME_MS),
            Err(TicketError::Expired)
        );
        let signer = key().signer();
        assert_eq!(
            signer.verify(&ticket, &client("acme"), &proxy(1), NOW),
            Ok(())
        );
    }

    #[test]
    fn a_ticket_under_another_key_is_refused() {
        let other = TicketKey::from_bytes([8; 32]);
        assert_eq!(
            verify_ticket(&other, &ticket(), &client("acme"), &proxy(1), NOW),
            Err(TicketError::Mismatch)
        );
    }

    #[test]
    fn tampered_and_malformed_tickets_are_refused() {
        let ticket = ticket();
        let verify = |t: &str| verify_ticket(&key(), t, &client("acme"), &proxy(1), NOW);
        let (_, rest) = ticket.split_once('.').unwrap();
        let (_, mac) = rest.split_once('.').unwrap();
        // A later expiry with the same MAC.
        let later = format!("v1.{}.{mac}", NOW + 10 * TICKET_LIFETIME_MS);
        assert_eq!(verify(&later), Err(TicketError::Mismatch));
        // The same expiry written another way.
        let padded = format!("v1.0{}.{mac}", NOW + TICKET_LIFETIME_MS);
        assert_eq!(verify(&padded), Err(TicketError::Malformed));
        // Truncated, or one digit of the MAC changed.
        assert_eq!(
            verify(&ticket[..ticket.len() - 1]),
            Err(TicketError::Malformed)
        );
        assert_eq!(
            verify(&ticket[..ticket.len() - 2]),
            Err(TicketError::Malformed)
        );
        let mut flipped = ticket.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        assert_eq!(
            verify(std::str::from_utf8(&flipped).unwrap()),
            Err(TicketError::Mismatch)
        );
        assert_eq!(verify(&ticket.to_uppercase()), Err(TicketError::Version));
        assert_eq!(
            verify(&ticket.replacen("v1", "v2", 1)),
            Err(TicketError::Version)
        );
        for garbage in [
            "",
            "v1",
            "v1..",
            "v1.1.",
            "v1.x.00",
            "v1.-1.00",
            &format!("{ticket}.x"),
        ] {
            assert!(verify(garbage).is_err(), "{garbage:?}");
        }
        assert_eq!(
            verify(&format!("v1.99999999999999999999.{mac}")),
            Err(TicketError::Malformed)
        );
    }

    #[test]
    fn the_encoding_keeps_the_ids_apart() {
        // ("ab", "c...") and ("a", "bc...") must not sign the same input.
        let signer = key().signer();
        let a = signer.mac(&client("ab"), &proxy(1), NOW);
        let b = signer.mac(
            &client("a"),
            &ProxyId::new(format!("b{:031x}", 1)).unwrap(),
            NOW,
        );
        assert_ne!(a, b);
    }

    #[test]
    fn keys_are_hex_in_serde_and_redacted_in_debug() {
        let key = TicketKey::generate().unwrap();
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json.len(), 66);
        let back: TicketKey = serde_json::from_str(&json).unwrap();
        assert_eq!(back, key);
        assert_ne!(TicketKey::generate().unwrap(), key);
        assert_eq!(format!("{key:?}"), "TicketKey(<redacted>)");
        assert_eq!(key.id().len(), 16);
        assert!(!key.to_hex().contains(&key.id()));
        assert!(!format!("{:?}", key.signer()).contains(&key.to_hex()));
        for bad in [
            "\"\"",
            "\"abc\"",
            &json.to_uppercase(),
            &format!("\"{}0\"", key.to_hex()),
        ] {
            assert!(serde_json::from_str::<TicketKey>(bad).is_err(), "{bad}");
        }
    }
}
