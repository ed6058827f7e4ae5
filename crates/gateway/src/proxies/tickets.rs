//! One proxy's feedback tickets at this gateway (`proxypool_core::ticket`): the epoch of
//! the lease the gateway holds on it, which every ticket for it is bound to, and the last
//! ticket it issued, handed out again while it fits.
//!
//! The store refuses a ticket once the proxy has moved on from the lease it names (leased
//! again, extracted, given back), so the epoch must be the one of the lease the request
//! was routed under: the snapshot applier sets it with every lease it gives the slot, a
//! lease-only delta included (a proxy leased again to this same gateway keeps its view
//! entry but takes a new epoch). Before the first lease no ticket is issued.
//!
//! A ticket costs an HMAC; most responses through a proxy go to the client the previous
//! one went to (a sticky session, a rotation that keeps a proxy for a while), so the slot
//! keeps the last ticket as a header value with what it was issued for (key, epoch, client,
//! expiry) and hands out a shared copy of it (no allocation, no formatting) when the next
//! response asks for the same. Expiries are rounded up to [`EXPIRY_STEP_MS`], so the
//! requests within one step share a ticket, each good for at least [`TICKET_LIFETIME_MS`].
//! The lock is
//! only tried: a response that finds it taken signs its own ticket, so no request waits
//! on another.

use http::HeaderValue;
use proxypool_core::ticket::TicketSubject;
use proxypool_core::{ClientId, ProxyId, TICKET_LIFETIME_MS, TicketSigner, UnixMillis};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tickets issued within one step of each other share their expiry (and their text).
pub(crate) const EXPIRY_STEP_MS: u64 = 10_000;

/// The longest client id (`proxypool_core::ids`): what the kept ticket's client fits in.
const MAX_CLIENT_ID: usize = 128;

/// The expiry of a ticket issued at `now`: [`TICKET_LIFETIME_MS`] later, rounded up to the
/// next [`EXPIRY_STEP_MS`].
pub(crate) fn ticket_expiry(now: UnixMillis) -> UnixMillis {
    now.saturating_add(TICKET_LIFETIME_MS)
        .div_ceil(EXPIRY_STEP_MS)
        .saturating_mul(EXPIRY_STEP_MS)
}

/// One proxy's lease epoch and last ticket.
#[derive(Debug, Default)]
pub(crate) struct ProxyTickets {
    /// The epoch of the lease this gateway holds on the proxy as the latest snapshot gave
    /// it; 0 before the first.
    lease_epoch: AtomicU64,
    last: Mutex<Option<Issued>>,
}

/// A ticket and what it was issued for.
#[derive(Debug)]
struct Issued {
    key_tag: u64,
    lease_epoch: u64,
    expires_at_ms: UnixMillis,
    /// The client id's bytes, kept inline so keeping a ticket allocates nothing for it.
    client: [u8; MAX_CLIENT_ID],
    client_len: usize,
    /// The ticket, ready to be sent (clones share its bytes).
    value: Option<HeaderValue>,
}

impl Issued {
    /// Fits no request: tickets are asked for only under a lease, and no lease has epoch 0.
    fn empty() -> Issued {
        Issued {
            key_tag: 0,
            lease_epoch: 0,
            expires_at_ms: 0,
            client: [0; MAX_CLIENT_ID],
            client_len: 0,
            value: None,
        }
    }

    fn fits(
        &self,
        key_tag: u64,
        lease_epoch: u64,
        expires_at_ms: UnixMillis,
        client: &str,
    ) -> bool {
        self.key_tag == key_tag
            && self.lease_epoch == lease_epoch
            && self.expires_at_ms == expires_at_ms
            && &self.client[..self.client_len] == client.as_bytes()
    }
}

impl ProxyTickets {
    /// The lease the gateway holds on the proxy now has `epoch`.
    pub(crate) fn set_lease_epoch(&self, epoch: u64) {
        self.lease_epoch.store(epoch, Ordering::Release);
    }

    /// The epoch tickets for the proxy are bound to now (0: none yet).
    pub(crate) fn lease_epoch(&self) -> u64 {
        self.lease_epoch.load(Ordering::Acquire)
    }

    /// The `X-Proxypool-Ticket` value for `client` on `proxy` at `now`, signed by `signer`
    /// and bound to the current lease; `None` before the first lease (or for a client id
    /// that is not a header value, which a validated id never is).
    pub(crate) fn header(
        &self,
        signer: &TicketSigner,
        client: &ClientId,
        proxy: &ProxyId,
        now: UnixMillis,
    ) -> Option<HeaderValue> {
        let lease_epoch = self.lease_epoch();
        if lease_epoch == 0 {
            return None;
        }
        let key_tag = signer.key_tag();
        let expires_at_ms = ticket_expiry(now);
        let subject = TicketSubject {
            client,
            proxy,
            lease_epoch,
        };
        let id = client.as_str().as_bytes();
        let Ok(mut last) = self.last.try_lock() else {
            // Another response through this proxy is at it: this one signs its own.
            let text = signer.issue_text(subject, expires_at_ms);
            return HeaderValue::from_bytes(text.as_bytes()).ok();
        };
        let issued = last.get_or_insert_with(Issued::empty);
        if issued.value.is_none()
            || !issued.fits(key_tag, lease_epoch, expires_at_ms, client.as_str())
        {
            let text = signer.issue_text(subject, expires_at_ms);
            issued.value = HeaderValue::from_bytes(text.as_bytes()).ok();
            if id.len() <= MAX_CLIENT_ID {
                issued.key_tag = key_tag;
                issued.lease_epoch = lease_epoch;
                issued.expires_at_ms = expires_at_ms;
                issued.client[..id.len()].copy_from_slice(id);
                issued.client_len = id.len();
            } else {
                // Cannot be kept (no valid client id is this long): never reused.
                issued.lease_epoch = 0;
            }
        }
        issued.value.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::{TicketError, TicketKey, verify_ticket};

    const NOW: UnixMillis = 1_700_000_000_123;

    fn ids() -> (ClientId, ClientId, ProxyId) {
        (
            ClientId::new("alice").unwrap(),
            ClientId::new("bob").unwrap(),
            ProxyId::new(format!("{:032x}", 1)).unwrap(),
        )
    }

    fn verify(
        key: &TicketKey,
        value: &HeaderValue,
        client: &ClientId,
        proxy: &ProxyId,
        epoch: u64,
    ) -> Result<(), TicketError> {
        let subject = TicketSubject {
            client,
            proxy,
            lease_epoch: epoch,
        };
        verify_ticket(key, value.to_str().unwrap(), subject, NOW)
    }

    #[test]
    fn expiries_round_up_to_the_step_and_keep_the_whole_lifetime() {
        for now in [0, 1, NOW, NOW - NOW % EXPIRY_STEP_MS] {
            let expiry = ticket_expiry(now);
            assert_eq!(expiry % EXPIRY_STEP_MS, 0);
            assert!(expiry >= now + TICKET_LIFETIME_MS, "{now}");
            assert!(expiry < now + TICKET_LIFETIME_MS + EXPIRY_STEP_MS, "{now}");
        }
        // Saturates at the end of time rather than wrapping to the past.
        assert_eq!(ticket_expiry(u64::MAX), u64::MAX);
    }

    #[test]
    fn no_ticket_before_the_first_lease() {
        let (alice, _, proxy) = ids();
        let tickets = ProxyTickets::default();
        let signer = TicketKey::from_bytes([1; 32]).signer();
        assert_eq!(tickets.header(&signer, &alice, &proxy, NOW), None);
    }

    #[test]
    fn a_ticket_names_the_current_lease_and_is_reused_only_while_it_fits() {
        let (alice, bob, proxy) = ids();
        let key = TicketKey::from_bytes([1; 32]);
        let signer = key.signer();
        let tickets = ProxyTickets::default();
        tickets.set_lease_epoch(5);
        let first = tickets.header(&signer, &alice, &proxy, NOW).unwrap();
        assert_eq!(verify(&key, &first, &alice, &proxy, 5), Ok(()));
        assert_eq!(
            verify(&key, &first, &alice, &proxy, 6),
            Err(TicketError::Mismatch)
        );
        // Within the step, for the same client: the same ticket.
        let again = tickets.header(&signer, &alice, &proxy, NOW + 1).unwrap();
        assert_eq!(again, first);
        // Another client, the next step, a new lease, a new key: each its own.
        let for_bob = tickets.header(&signer, &bob, &proxy, NOW).unwrap();
        assert_eq!(verify(&key, &for_bob, &bob, &proxy, 5), Ok(()));
        let later = tickets
            .header(&signer, &bob, &proxy, NOW + EXPIRY_STEP_MS)
            .unwrap();
        assert_ne!(later, for_bob);
        tickets.set_lease_epoch(9);
        let released = tickets
            .header(&signer, &bob, &proxy, NOW + EXPIRY_STEP_MS)
            .unwrap();
        assert_eq!(verify(&key, &released, &bob, &proxy, 9), Ok(()));
        assert_eq!(
            verify(&key, &released, &bob, &proxy, 5),
            Err(TicketError::Mismatch)
        );
        let other_key = TicketKey::from_bytes([2; 32]);
        let rekeyed = tickets
            .header(&other_key.signer(), &bob, &proxy, NOW + EXPIRY_STEP_MS)
            .unwrap();
        assert_eq!(verify(&other_key, &rekeyed, &bob, &proxy, 9), Ok(()));
    }
}
