//! LeaseStore: named leader leases with fencing tokens (`lease_*.lua`).

use crate::codec::{clamp_ms, corrupt, parse_u64};
use crate::group::{GroupPool, Side};
use crate::reply;
use async_trait::async_trait;
use proxypool_core::lease::validate_lease_request;
use proxypool_core::{Lease, LeaseStore, PoolResult, UnixMillis};

fn decode(name: &str, reply: &reply::Reply) -> PoolResult<Option<Lease>> {
    reply.optional(|reply| {
        let value = reply.text(0)?;
        let f: Vec<&str> = value.split('\t').collect();
        let [holder, token, acquired, expires] = f[..] else {
            return Err(corrupt("lease"));
        };
        Ok(Lease {
            name: name.to_owned(),
            holder: holder.to_owned(),
            token: parse_u64(token, "lease")?,
            acquired_at_ms: parse_u64(acquired, "lease")?,
            expires_at_ms: parse_u64(expires, "lease")?,
        })
    })
}

#[async_trait]
impl LeaseStore for GroupPool {
    async fn try_acquire(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> PoolResult<Option<Lease>> {
        validate_lease_request(name, holder, ttl_ms)?;
        let args = vec![
            name.to_owned(),
            holder.to_owned(),
            clamp_ms(now.saturating_add(ttl_ms)).to_string(),
        ];
        let reply = self
            .call(&self.scripts.lease_acquire, now, Side::Read, args)
            .await?;
        decode(name, &reply)
    }

    async fn release(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        token: u64,
    ) -> PoolResult<()> {
        validate_lease_request(name, holder, 1)?;
        let args = vec![name.to_owned(), holder.to_owned(), token.to_string()];
        self.call(&self.scripts.lease_release, now, Side::Read, args)
            .await
            .map(|_| ())
    }

    async fn current(&self, now: UnixMillis, name: &str) -> PoolResult<Option<Lease>> {
        let reply = self
            .call(
                &self.scripts.lease_current,
                now,
                Side::Read,
                vec![name.to_owned()],
            )
            .await?;
        decode(name, &reply)
    }
}
