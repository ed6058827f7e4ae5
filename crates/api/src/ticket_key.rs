//! The store's feedback-ticket key as the API holds it (`proxypool_core::ticket`): read
//! through the port on the first ticket it checks, then kept with its keyed HMAC state.
//! A ticket that does not match the kept key makes one more read (at most every
//! [`REREAD_MS`]): the store may have been replaced by a new incarnation with a new key,
//! which the gateways get with their next snapshot.

use proxypool_core::ticket::TicketSubject;
use proxypool_core::{
    LockExt, PoolResult, TicketError, TicketKey, TicketKeyStore, TicketSigner, UnixMillis,
};
use std::sync::Mutex;

/// The least time between two reads of the key caused by mismatching tickets.
const REREAD_MS: u64 = 5_000;

#[derive(Debug, Default)]
pub(crate) struct TicketKeyCache {
    kept: Mutex<Option<Kept>>,
}

#[derive(Debug, Clone)]
struct Kept {
    key: TicketKey,
    signer: TicketSigner,
    read_at: UnixMillis,
}

impl TicketKeyCache {
    /// Whether `ticket` is good at `now` for `subject` (a client on a proxy in its current
    /// lease generation) under the store's key. A store error is the caller's to answer
    /// (503); any bad ticket is `false`.
    pub(crate) async fn verifies(
        &self,
        store: &dyn TicketKeyStore,
        now: UnixMillis,
        ticket: &str,
        subject: TicketSubject<'_>,
    ) -> PoolResult<bool> {
        let kept = self.kept.lock_or_recover().clone();
        if let Some(kept) = &kept {
            match kept.signer.verify(ticket, subject, now) {
                Ok(()) => return Ok(true),
                // Only a mismatch can be a key the kept one no longer is.
                Err(TicketError::Mismatch) if now.saturating_sub(kept.read_at) >= REREAD_MS => {}
                Err(_) => return Ok(false),
            }
        }
        let key = crate::metrics::timed("tickets", "ticket_key", store.ticket_key(now)).await?;
        let unchanged = kept.as_ref().is_some_and(|kept| kept.key == key);
        let signer = key.signer();
        let verified = !unchanged && signer.verify(ticket, subject, now).is_ok();
        *self.kept.lock_or_recover() = Some(Kept {
            key,
            signer,
            read_at: now,
        });
        Ok(verified)
    }
}
