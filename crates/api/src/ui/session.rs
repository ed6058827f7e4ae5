//! The dashboard's sign-in sessions: a bounded, server-side table of random session ids,
//! each tied to the admin client whose token opened it, with a CSRF token of its own.
//!
//! Why server-side: signing out (or a reload that removes the client, or takes its admin
//! flag) must end the session at once, which a self-contained cookie cannot do. The table
//! is keyed by a digest of the id, so a lookup's timing says nothing about the id itself,
//! and the CSRF token is compared in constant time. The table holds at most
//! [`MAX_SESSIONS`]; a sign-in when it is full first drops expired sessions, then the
//! oldest one.

use proxypool_core::secret_hash::constant_time_eq;
use proxypool_core::{ClientId, LockExt, SecretHash, UnixMillis, random};
use std::collections::HashMap;
use std::sync::Mutex;

/// Most sessions held at once (every one needs an admin token to open).
pub(crate) const MAX_SESSIONS: usize = 256;
/// How long a session lives after sign-in, whatever it does.
pub(crate) const SESSION_TTL_MS: u64 = 8 * 60 * 60 * 1000;
/// The cookie's name over plain HTTP.
pub(crate) const COOKIE: &str = "pp_session";
/// The cookie's name when it is `Secure`: a browser keeps a `__Host-` cookie only when it
/// is `Secure`, has `Path=/` and no `Domain`, so no sibling host and no plain-HTTP page can
/// set or shadow it.
pub(crate) const SECURE_COOKIE: &str = "__Host-pp_session";
/// The header a cookie-authenticated state-changing request must carry.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// One signed-in operator.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) client: ClientId,
    /// The client's token hash when the session opened: a reload that rotates the token
    /// (a new salted hash) ends the session, one that leaves it alone does not.
    pub(crate) credential: SecretHash,
    pub(crate) csrf: String,
    pub(crate) opened_at_ms: UnixMillis,
    pub(crate) expires_at_ms: UnixMillis,
}

/// A new session's secrets, handed to the browser once.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) id: String,
    pub(crate) csrf: String,
}

#[derive(Debug, Default)]
pub(crate) struct SessionTable {
    sessions: Mutex<HashMap<[u8; 32], Session>>,
}

impl SessionTable {
    /// Opens a session for `client`; `None` when the operating system's random source
    /// cannot be read (the sign-in then fails closed).
    pub(crate) fn open(
        &self,
        now: UnixMillis,
        client: ClientId,
        credential: SecretHash,
    ) -> Option<Opened> {
        let id = random_token()?;
        let csrf = random_token()?;
        let mut sessions = self.sessions.lock_or_recover();
        if sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, s| s.expires_at_ms > now);
        }
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.opened_at_ms)
                .map(|(key, _)| *key)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            key_of(&id),
            Session {
                client,
                credential,
                csrf: csrf.clone(),
                opened_at_ms: now,
                expires_at_ms: now.saturating_add(SESSION_TTL_MS),
            },
        );
        Some(Opened { id, csrf })
    }

    /// The live session of cookie value `id`.
    pub(crate) fn get(&self, now: UnixMillis, id: &str) -> Option<Session> {
        if !plausible(id) {
            return None;
        }
        let key = key_of(id);
        let mut sessions = self.sessions.lock_or_recover();
        match sessions.get(&key) {
            Some(session) if session.expires_at_ms > now => Some(session.clone()),
            Some(_) => {
                sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session of cookie value `id` (signing out); true if there was one.
    pub(crate) fn end(&self, id: &str) -> bool {
        plausible(id)
            && self
                .sessions
                .lock_or_recover()
                .remove(&key_of(id))
                .is_some()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.lock_or_recover().len()
    }
}

/// Compares a presented CSRF token with the session's without an early exit.
pub(crate) fn csrf_matches(session: &Session, presented: &str) -> bool {
    constant_time_eq(session.csrf.as_bytes(), presented.as_bytes())
}

/// Tokens are 64 lowercase hex digits; anything else is not looked up at all.
fn plausible(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn key_of(id: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes()).into()
}

/// 256 bits from the operating system's CSPRNG, as hex. No fallback: a session id must
/// not be guessable, so without the random source there is no sign-in.
fn random_token() -> Option<String> {
    random::hex(32).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str) -> ClientId {
        ClientId::new(name).unwrap()
    }

    fn credential() -> SecretHash {
        SecretHash::derive("token-ops-0123456789", "salt").unwrap()
    }

    #[test]
    fn sessions_live_until_their_ttl_and_end_on_sign_out() {
        let table = SessionTable::default();
        let opened = table.open(1_000, client("ops"), credential()).unwrap();
        assert_ne!(opened.id, opened.csrf);
        let session = table.get(1_000 + SESSION_TTL_MS - 1, &opened.id).unwrap();
        assert_eq!(session.client, client("ops"));
        assert!(csrf_matches(&session, &opened.csrf));
        assert!(!csrf_matches(&session, &opened.id));
        assert!(!csrf_matches(&session, ""));
        assert!(table.get(1_000 + SESSION_TTL_MS, &opened.id).is_none());
        let again = table.open(5_000, client("ops"), credential()).unwrap();
        assert!(table.end(&again.id));
        assert!(table.get(5_001, &again.id).is_none());
        assert!(!table.end(&again.id));
        assert!(table.get(5_001, "not-a-token").is_none());
    }

    #[test]
    fn the_table_is_bounded_and_drops_the_oldest() {
        let table = SessionTable::default();
        let first = table.open(1, client("ops"), credential()).unwrap();
        for i in 0..MAX_SESSIONS as u64 {
            table.open(2 + i, client("ops"), credential()).unwrap();
        }
        assert_eq!(table.len(), MAX_SESSIONS);
        assert!(table.get(10, &first.id).is_none(), "the oldest went first");
    }
}
