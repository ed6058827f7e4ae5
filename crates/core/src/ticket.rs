//! Feedback tickets: a gateway's proof that it routed a client through a proxy while the
//! proxy was in one lease generation.
//!
//! `POST /v1/feedback` by `proxy_id` puts a proxy on cooldown for a domain, so only a
//! client that used the proxy may do it: one that holds it from a live extraction, or one
//! a gateway routed through it recently. The gateway proves the second with a ticket in
//! each response that names a proxy (`X-Proxypool-Ticket` next to `X-Proxypool-Proxy`):
//! an HMAC-SHA256, under the pool store's [`TicketKey`], of (client id, proxy id, lease
//! epoch, expiry). The client API checks it with the same key, read from the store, and
//! with the proxy's lease epoch as the store knows it now ([`Reporter::Unheld`]); the
//! gateway gets the key in its snapshots and the epoch with each lease.
//!
//! **Bound to a lease generation.** The lease epoch is the ownership epoch of the proxy's
//! latest lease since it last entered the pool (every lease takes a new one, so a proxy
//! leased to another gateway has moved on); an extraction, a return and a new generation
//! from the vendor clear it, and a proxy without one takes no ticket at all (a gateway
//! routes only through leased proxies). A ticket is thus good until its expiry
//! ([`TICKET_LIFETIME_MS`] after it was issued), for that client and that proxy, and only
//! while the proxy has not moved on from the lease it was issued under: once the proxy was
//! leased again, extracted, returned or renewed by the vendor, tickets issued before stop
//! verifying.
//!
//! Text form: `v2.<expires_at_ms>.<mac>`: the version, the expiry in decimal milliseconds
//! since the epoch (no sign, no leading zero) and the MAC as 64 lowercase hex digits. The
//! epoch is not in the text: the verifier takes it from the store, so a ticket says
//! nothing about leases, and one of another generation simply does not match. The MAC
//! covers a length-prefixed encoding (see [`TicketSigner::mac`]), so no two different
//! (client, proxy, epoch, expiry) tuples share an input. Verification recomputes the MAC
//! and compares it in constant time (`subtle`).
//!
//! `v1` (no epoch in its MAC) is refused: it cannot say which generation it was issued
//! for, so accepting it under its old rule would keep a ticket good after the proxy moved
//! on for as long as any gateway still issued it. A client gets a `v2` with its next
//! response through the gateway, so a gateway and an API of different versions cost only
//! ticketed feedback until both are upgraded (reports by session still work).
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
    /// a gateway's ticket for it issued under `lease_epoch` (it routed through the proxy
    /// recently, and the proxy has not moved on since).
    Unheld {
        /// The epoch of the proxy's latest lease since it last entered the pool; `None`
        /// when it has not been leased since (no gateway routed anyone through it, so no
        /// ticket for it is good).
        lease_epoch: Option<u64>,
    },
    /// The pool does not hold the proxy, another client's live extraction does, or it
    /// was given back and is withheld: the same answer for all, so it tells nothing
    /// about proxies that are not the client's.
    No,
}

/// How long a gateway's ticket stays good: 15 minutes after the response that carried it.
pub const TICKET_LIFETIME_MS: u64 = 15 * 60 * 1000;

/// The version prefix of the only ticket format accepted.
const VERSION: &str = "v2";

/// The domain separator in front of every MAC input, so the key signs nothing else by
/// accident. Short, so a ticket's MAC input stays within two SHA-256 blocks for client
/// ids of up to 43 bytes.
const CONTEXT: &[u8] = b"proxypool ticket v2\0";

/// Bytes of a key.
pub const TICKET_KEY_BYTES: usize = 32;

/// The longest ticket text: `v2.`, an expiry of up to 20 digits, `.`, 64 hex digits.
pub const MAX_TICKET_LEN: usize = VERSION.len() + 1 + 20 + 1 + 64;

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
        crate::hex::decode_into(text, &mut bytes).ok_or(BadTicketKey)?;
        Ok(TicketKey(bytes))
    }

    /// The key as 64 lowercase hex digits (what the store keeps; never log it).
    pub fn to_hex(&self) -> String {
        crate::hex::encode(&self.0)
    }

    /// The first 8 bytes of an HMAC under the key: a public name of it.
    fn id_bytes(&self) -> [u8; 8] {
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(b"proxypool ticket key id");
        let mut out = [0u8; 8];
        out.copy_from_slice(&mac.finalize().into_bytes()[..8]);
        out
    }

    /// A short public name of the key (16 hex digits of an HMAC under it): what snapshot
    /// checksums and logs may carry instead of the key.
    pub fn id(&self) -> String {
        crate::hex::encode(&self.id_bytes())
    }

    /// The keyed MAC state, built once and cloned per ticket.
    pub fn signer(&self) -> TicketSigner {
        TicketSigner {
            mac: <HmacSha256 as Mac>::new_from_slice(&self.0)
                .expect("HMAC takes a key of any length"),
            tag: u64::from_be_bytes(self.id_bytes()),
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
    /// Not `v2.<digits>.<64 hex digits>`.
    #[error("not a ticket")]
    Malformed,
    /// Another format version (`v1` among them: it binds no lease generation).
    #[error("unknown ticket version")]
    Version,
    /// Its expiry is not after now.
    #[error("ticket expired")]
    Expired,
    /// The MAC does not match: another client, another proxy, another lease generation,
    /// another expiry, another key.
    #[error("ticket does not match")]
    Mismatch,
}

/// What a ticket names: who, on which proxy, in which of its lease generations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketSubject<'a> {
    pub client: &'a ClientId,
    pub proxy: &'a ProxyId,
    /// The epoch of the lease the proxy was routed under (`Reporter::Unheld`).
    pub lease_epoch: u64,
}

/// A ticket's text, kept inline (no allocation): at most [`MAX_TICKET_LEN`] ASCII bytes.
#[derive(Clone, Copy)]
pub struct TicketText {
    bytes: [u8; MAX_TICKET_LEN],
    len: usize,
}

impl TicketText {
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written (`TicketSigner::issue_text`).
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

impl Default for TicketText {
    /// The empty text (not a ticket).
    fn default() -> Self {
        TicketText {
            bytes: [0; MAX_TICKET_LEN],
            len: 0,
        }
    }
}

impl fmt::Debug for TicketText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TicketText").field(&self.as_str()).finish()
    }
}

/// A [`TicketKey`]'s keyed HMAC state: issues and verifies tickets. Cheap to clone (one
/// clone per ticket); build it once per key. `Debug` is redacted.
#[derive(Clone)]
pub struct TicketSigner {
    mac: HmacSha256,
    /// The key's public name as a number (the first 8 bytes of [`TicketKey::id`]).
    tag: u64,
}

impl fmt::Debug for TicketSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketSigner(<redacted>)")
    }
}

impl TicketSigner {
    /// Names the key this signer signs with (not secret), so a cache of issued tickets
    /// can tell tickets of another key apart without comparing keys.
    pub fn key_tag(&self) -> u64 {
        self.tag
    }

    /// The MAC of (client, proxy, lease epoch, expiry): over the context, the expiry and
    /// the epoch as 8 big-endian bytes each, then each id as its length (4 big-endian
    /// bytes) and its bytes.
    fn mac(&self, subject: TicketSubject<'_>, expires_at_ms: UnixMillis) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(CONTEXT);
        mac.update(&expires_at_ms.to_be_bytes());
        mac.update(&subject.lease_epoch.to_be_bytes());
        for part in [subject.client.as_str(), subject.proxy.as_str()] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            mac.update(&len.to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac.finalize().into_bytes().into()
    }

    /// The ticket for `subject`, good until `expires_at_ms`, written inline.
    pub fn issue_text(&self, subject: TicketSubject<'_>, expires_at_ms: UnixMillis) -> TicketText {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mac = self.mac(subject, expires_at_ms);
        let mut text = TicketText::default();
        text.push(VERSION.as_bytes());
        text.push(b".");
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = expires_at_ms;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        text.push(&digits[at..]);
        text.push(b".");
        for byte in mac {
            text.push(&[
                DIGITS[usize::from(byte >> 4)],
                DIGITS[usize::from(byte & 0x0f)],
            ]);
        }
        text
    }

    /// The ticket for `subject`, good until `expires_at_ms`.
    pub fn issue(&self, subject: TicketSubject<'_>, expires_at_ms: UnixMillis) -> String {
        self.issue_text(subject, expires_at_ms).as_str().to_owned()
    }

    /// Whether `ticket` was issued under this key for `subject` (the proxy's lease epoch
    /// as the store knows it now) and is still good at `now`.
    pub fn verify(
        &self,
        ticket: &str,
        subject: TicketSubject<'_>,
        now: UnixMillis,
    ) -> Result<(), TicketError> {
        let (expires_at_ms, given) = parse(ticket)?;
        let expected = self.mac(subject, expires_at_ms);
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
    subject: TicketSubject<'_>,
    expires_at_ms: UnixMillis,
) -> String {
    key.signer().issue(subject, expires_at_ms)
}

/// [`TicketSigner::verify`] under `key`.
pub fn verify_ticket(
    key: &TicketKey,
    ticket: &str,
    subject: TicketSubject<'_>,
    now: UnixMillis,
) -> Result<(), TicketError> {
    key.signer().verify(ticket, subject, now)
}

/// `v2.<expiry>.<mac>` into (expiry, mac).
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
    crate::hex::decode_into(mac, &mut bytes).ok_or(TicketError::Malformed)?;
    Ok((expires_at_ms, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = 1_700_000_000_000;
    const EPOCH: u64 = 7;

    fn key() -> TicketKey {
        TicketKey::from_bytes([7; 32])
    }

    fn client(name: &str) -> ClientId {
        ClientId::new(name).unwrap()
    }

    fn proxy(n: u8) -> ProxyId {
        ProxyId::new(format!("{n:032x}")).unwrap()
    }

    fn subject<'a>(
        client: &'a ClientId,
        proxy: &'a ProxyId,
        lease_epoch: u64,
    ) -> TicketSubject<'a> {
        TicketSubject {
            client,
            proxy,
            lease_epoch,
        }
    }

    fn ticket() -> String {
        let (c, p) = (client("acme"), proxy(1));
        issue_ticket(&key(), subject(&c, &p, EPOCH), NOW + TICKET_LIFETIME_MS)
    }

    fn verify(t: &str, c: &str, p: u8, epoch: u64, now: UnixMillis) -> Result<(), TicketError> {
        let (c, p) = (client(c), proxy(p));
        verify_ticket(&key(), t, subject(&c, &p, epoch), now)
    }

    #[test]
    fn a_ticket_verifies_for_its_client_proxy_and_lease_until_it_expires() {
        let ticket = ticket();
        assert!(ticket.starts_with(&format!("v2.{}.", NOW + TICKET_LIFETIME_MS)));
        assert_eq!(ticket.len(), "v2.".len() + 13 + 1 + 64);
        assert_eq!(verify(&ticket, "acme", 1, EPOCH, NOW), Ok(()));
        assert_eq!(
            verify(&ticket, "acme", 1, EPOCH, NOW + TICKET_LIFETIME_MS - 1),
            Ok(())
        );
        assert_eq!(
            verify(&ticket, "other", 1, EPOCH, NOW),
            Err(TicketError::Mismatch)
        );
        assert_eq!(
            verify(&ticket, "acme", 2, EPOCH, NOW),
            Err(TicketError::Mismatch)
        );
        assert_eq!(
            verify(&ticket, "acme", 1, EPOCH, NOW + TICKET_LIFETIME_MS),
            Err(TicketError::Expired)
        );
        let (c, p) = (client("acme"), proxy(1));
        assert_eq!(
            key().signer().verify(&ticket, subject(&c, &p, EPOCH), NOW),
            Ok(())
        );
    }

    #[test]
    fn a_ticket_of_another_lease_generation_is_refused() {
        let ticket = ticket();
        for epoch in [0, EPOCH - 1, EPOCH + 1, u64::MAX] {
            assert_eq!(
                verify(&ticket, "acme", 1, epoch, NOW),
                Err(TicketError::Mismatch),
                "{epoch}"
            );
        }
    }

    #[test]
    fn a_v1_ticket_is_refused_even_with_a_mac_of_the_old_rule() {
        // The old rule's MAC: context, expiry, then the ids; no lease epoch.
        let expiry = NOW + TICKET_LIFETIME_MS;
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&[7; 32]).unwrap();
        mac.update(b"proxypool feedback ticket v1\0");
        mac.update(&expiry.to_be_bytes());
        for part in ["acme", proxy(1).as_str()] {
            mac.update(&(part.len() as u32).to_be_bytes());
            mac.update(part.as_bytes());
        }
        let old = format!(
            "v1.{expiry}.{}",
            crate::hex::encode(&mac.finalize().into_bytes())
        );
        for epoch in [0, EPOCH] {
            assert_eq!(
                verify(&old, "acme", 1, epoch, NOW),
                Err(TicketError::Version)
            );
        }
    }

    #[test]
    fn the_inline_text_is_the_issued_ticket() {
        let signer = key().signer();
        let (c, p) = (client("acme"), proxy(1));
        for expiry in [0, 9, 10, NOW, u64::MAX] {
            let text = signer.issue_text(subject(&c, &p, EPOCH), expiry);
            assert_eq!(text.as_str(), signer.issue(subject(&c, &p, EPOCH), expiry));
            assert_eq!(text.as_bytes(), text.as_str().as_bytes());
            assert!(text.as_str().starts_with(&format!("v2.{expiry}.")));
            if expiry > 0 {
                assert_eq!(verify(text.as_str(), "acme", 1, EPOCH, expiry - 1), Ok(()));
            }
        }
        let longest = signer.issue_text(subject(&c, &p, EPOCH), u64::MAX);
        assert_eq!(longest.as_str().len(), "v2.".len() + 20 + 1 + 64);
        assert!(longest.as_str().len() <= MAX_TICKET_LEN);
    }

    #[test]
    fn a_signer_names_its_key_without_showing_it() {
        let signer = key().signer();
        assert_eq!(signer.key_tag(), key().signer().key_tag());
        assert_ne!(
            signer.key_tag(),
            TicketKey::from_bytes([8; 32]).signer().key_tag()
        );
        assert_eq!(format!("{:016x}", signer.key_tag()), key().id());
    }

    #[test]
    fn a_ticket_under_another_key_is_refused() {
        let other = TicketKey::from_bytes([8; 32]);
        let (c, p) = (client("acme"), proxy(1));
        assert_eq!(
            verify_ticket(&other, &ticket(), subject(&c, &p, EPOCH), NOW),
            Err(TicketError::Mismatch)
        );
    }

    #[test]
    fn tampered_and_malformed_tickets_are_refused() {
        let ticket = ticket();
        let verify = |t: &str| verify(t, "acme", 1, EPOCH, NOW);
        let (_, rest) = ticket.split_once('.').unwrap();
        let (_, mac) = rest.split_once('.').unwrap();
        // A later expiry with the same MAC.
        let later = format!("v2.{}.{mac}", NOW + 10 * TICKET_LIFETIME_MS);
        assert_eq!(verify(&later), Err(TicketError::Mismatch));
        // The same expiry written another way.
        let padded = format!("v2.0{}.{mac}", NOW + TICKET_LIFETIME_MS);
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
            verify(&ticket.replacen("v2", "v1", 1)),
            Err(TicketError::Version)
        );
        assert_eq!(
            verify(&ticket.replacen("v2", "v3", 1)),
            Err(TicketError::Version)
        );
        for garbage in [
            "",
            "v2",
            "v2..",
            "v2.1.",
            "v2.x.00",
            "v2.-1.00",
            &format!("{ticket}.x"),
        ] {
            assert!(verify(garbage).is_err(), "{garbage:?}");
        }
        assert_eq!(
            verify(&format!("v2.99999999999999999999.{mac}")),
            Err(TicketError::Malformed)
        );
    }

    #[test]
    fn the_encoding_keeps_the_ids_apart() {
        // ("ab", "c...") and ("a", "bc...") must not sign the same input.
        let signer = key().signer();
        let (ab, a) = (client("ab"), client("a"));
        let (p1, shifted) = (proxy(1), ProxyId::new(format!("b{:031x}", 1)).unwrap());
        let first = signer.mac(subject(&ab, &p1, EPOCH), NOW);
        let second = signer.mac(subject(&a, &shifted, EPOCH), NOW);
        assert_ne!(first, second);
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
