//! The store reads a build shares besides the proxies: the session, the ticket key (read
//! again at most every [`TICKET_KEY_REREAD_MS`]), the advisories and the session feedback.

use super::SnapshotPublisher;
use proxypool_core::control::{Advisories, GatewayClient};
use proxypool_core::cooldown::MAX_SESSION_FEEDBACK;
use proxypool_core::{
    ClientId, Conflict, LockExt, PoolError, PoolResult, ProxyId, SessionFeedback, TicketKey,
    UnixMillis, WorkerId, WorkerSession,
};
use std::collections::BTreeSet;

/// How long a build reuses the ticket key it read: the key changes only with the store's
/// incarnation (whose loss starts new sessions and new snapshots anyway).
pub(super) const TICKET_KEY_REREAD_MS: u64 = 60_000;

impl SnapshotPublisher {
    /// The store's ticket key, read at most every [`TICKET_KEY_REREAD_MS`].
    pub(super) async fn ticket_key(&self, now: UnixMillis) -> PoolResult<TicketKey> {
        let cached = self.ticket_key.lock_or_recover().clone();
        if let Some((key, read_at)) = cached
            && now.saturating_sub(read_at) < TICKET_KEY_REREAD_MS
        {
            return Ok(key);
        }
        let key = self.pool.ticket_key(now).await?;
        *self.ticket_key.lock_or_recover() = Some((key.clone(), now));
        Ok(key)
    }

    /// The policy, the remembered cooldowns of the listed proxies `ids` (sorted, each
    /// once; answered by proxy id, then domain) and the live feedback on sessions of the
    /// snapshot's clients (oldest first).
    pub(super) async fn advisories(
        &self,
        now: UnixMillis,
        ids: &[ProxyId],
        clients: &[GatewayClient],
    ) -> PoolResult<Advisories> {
        // The store answers in the order asked, each proxy's entries by domain.
        let cooldowns = if ids.is_empty() {
            Vec::new()
        } else {
            self.pool.cooldowns_of(now, ids).await?
        };
        let session_feedback = self.served_feedback(now, clients).await?;
        Ok(Advisories {
            policy: Some(**self.cooldown_policy.load()),
            cooldowns,
            session_feedback,
        })
    }

    /// The live session feedback of the given clients, oldest first.
    pub(super) async fn served_feedback(
        &self,
        now: UnixMillis,
        clients: &[GatewayClient],
    ) -> PoolResult<Vec<SessionFeedback>> {
        let served: BTreeSet<&ClientId> = clients.iter().map(|c| &c.id).collect();
        Ok(self
            .pool
            .session_feedback(now, MAX_SESSION_FEEDBACK)
            .await?
            .into_iter()
            .filter(|f| served.contains(&f.client))
            .collect())
    }

    /// The worker's session when it is `session_id`; `Conflict(Fenced)` otherwise.
    pub(super) async fn current_session(
        &self,
        now: u64,
        worker: &WorkerId,
        session_id: &str,
    ) -> PoolResult<WorkerSession> {
        self.pool
            .session(now, worker)
            .await?
            .filter(|s| s.session_id == session_id)
            .ok_or(PoolError::Conflict(Conflict::Fenced))
    }
}
