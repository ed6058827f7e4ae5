//! LeaseStore for MemoryPool (one process, so mostly for completeness and the contract).

use super::MemoryPool;
use async_trait::async_trait;
use proxypool_core::lease::validate_lease_request;
use proxypool_core::{Lease, LeaseStore, PoolResult, UnixMillis};

#[async_trait]
impl LeaseStore for MemoryPool {
    async fn try_acquire(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> PoolResult<Option<Lease>> {
        validate_lease_request(name, holder, ttl_ms)?;
        let mut state = self.lock()?;
        let expires_at_ms = now.saturating_add(ttl_ms);
        let last_token = state.lease_tokens.get(name).copied().unwrap_or(0);
        match state.leases.get_mut(name) {
            Some(lease) if now < lease.expires_at_ms && lease.holder != holder => Ok(None),
            Some(lease) if now < lease.expires_at_ms => {
                lease.expires_at_ms = expires_at_ms;
                Ok(Some(lease.clone()))
            }
            _ => {
                let lease = Lease {
                    name: name.to_owned(),
                    holder: holder.to_owned(),
                    token: proxypool_core::next_token(last_token, now),
                    acquired_at_ms: now,
                    expires_at_ms,
                };
                state.lease_tokens.insert(name.to_owned(), lease.token);
                state.leases.insert(name.to_owned(), lease.clone());
                Ok(Some(lease))
            }
        }
    }

    async fn release(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        token: u64,
    ) -> PoolResult<()> {
        validate_lease_request(name, holder, 1)?;
        let mut state = self.lock()?;
        let held = state
            .leases
            .get(name)
            .is_some_and(|l| now < l.expires_at_ms && l.holder == holder && l.token == token);
        if held {
            state.leases.remove(name);
        }
        Ok(())
    }

    async fn current(&self, now: UnixMillis, name: &str) -> PoolResult<Option<Lease>> {
        let state = self.lock()?;
        Ok(state
            .leases
            .get(name)
            .filter(|l| now < l.expires_at_ms)
            .cloned())
    }
}
