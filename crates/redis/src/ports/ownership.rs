//! OwnershipRepository: one small script per operation, sharing the records and available
//! indexes with extraction, so assign and extract racing for a proxy have one winner.

use crate::codec::{assignment, clamp_ms, record};
use crate::group::{GroupPool, Side};
use crate::reply::Reply;
use async_trait::async_trait;
use proxypool_core::{
    Assignment, OwnedProxy, OwnershipRepository, PoolError, PoolResult, ProxyId, ProxyRecord,
    UnixMillis, WorkerId,
};

/// `proxy, worker, [epoch,] lease ms`: what assigning and renewing send; a zero lease is
/// refused before any call.
fn lease_args(
    proxy: &ProxyId,
    worker: &WorkerId,
    epoch: Option<u64>,
    lease_ms: u64,
) -> PoolResult<Vec<String>> {
    if lease_ms == 0 {
        return Err(PoolError::invalid("lease_ms must be at least 1"));
    }
    let mut args = vec![proxy.to_string(), worker.to_string()];
    args.extend(epoch.map(|epoch| epoch.to_string()));
    args.push(clamp_ms(lease_ms).to_string());
    Ok(args)
}

/// `{'ok', assignment, ticket}` of `proxy`.
fn one(proxy: &ProxyId, reply: &Reply) -> PoolResult<Assignment> {
    assignment::decode(proxy.as_str(), &reply.text(0)?, &reply.text(1)?)
}

/// `{'ok', id, assignment, ticket, ...}`.
fn triples(reply: &Reply) -> PoolResult<Vec<Assignment>> {
    reply
        .texts()?
        .chunks(3)
        .map(|t| match t {
            [id, value, ticket] => assignment::decode(id, value, ticket),
            _ => Err(PoolError::corrupt("undecodable assignment list in redis")),
        })
        .collect()
}

impl GroupPool {
    fn budget(&self) -> String {
        self.options.inventory_scan_budget.to_string()
    }
}

#[async_trait]
impl OwnershipRepository for GroupPool {
    async fn assign(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        let args = lease_args(proxy, worker, None, lease_ms)?;
        let reply = self
            .call(&self.scripts.assign, now, Side::Write, args)
            .await?;
        one(proxy, &reply)
    }

    async fn renew(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        let args = lease_args(proxy, worker, Some(epoch), lease_ms)?;
        let reply = self
            .call(&self.scripts.renew, now, Side::Write, args)
            .await?;
        one(proxy, &reply)
    }

    async fn begin_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
    ) -> PoolResult<Assignment> {
        let args = vec![proxy.to_string(), worker.to_string(), epoch.to_string()];
        let reply = self
            .call(&self.scripts.drain, now, Side::Write, args)
            .await?;
        one(proxy, &reply)
    }

    async fn acknowledge_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        active: u32,
        reserved: u32,
    ) -> PoolResult<()> {
        let args = vec![
            proxy.to_string(),
            worker.to_string(),
            epoch.to_string(),
            active.to_string(),
            reserved.to_string(),
        ];
        self.call(&self.scripts.ack_drain, now, Side::Write, args)
            .await
            .map(|_| ())
    }

    async fn get(&self, now: UnixMillis, proxy: &ProxyId) -> PoolResult<Option<Assignment>> {
        let reply = self
            .call(&self.scripts.get, now, Side::Read, vec![proxy.to_string()])
            .await?;
        reply.optional(|reply| one(proxy, reply))
    }

    async fn expire(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // A fixed work bound per script: a larger limit just takes more calls, as the
        // port allows ("at most limit").
        let limit = limit.min(self.options.inventory_scan_budget).to_string();
        let reply = self
            .call(&self.scripts.expire, now, Side::Write, vec![limit])
            .await?;
        triples(&reply)
    }

    async fn release_orphaned(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // The same fixed work bound per script as `expire`.
        let limit = limit.min(self.options.inventory_scan_budget).to_string();
        let reply = self
            .call(
                &self.scripts.release_orphaned,
                now,
                Side::Write,
                vec![limit],
            )
            .await?;
        triples(&reply)
    }

    async fn assignable(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<ProxyRecord>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let args = vec![
            limit.min(crate::codec::MAX_MS as usize).to_string(),
            self.budget(),
        ];
        let reply = self
            .call(&self.scripts.assignable, now, Side::Read, args)
            .await?;
        reply.texts()?.iter().map(|r| record::decode(r)).collect()
    }

    async fn owned_by(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<OwnedProxy>> {
        let args = vec![worker.to_string(), self.budget()];
        let reply = self
            .call(&self.scripts.owned_by, now, Side::Read, args)
            .await?;
        let mut owned = reply
            .texts()?
            .chunks(3)
            .map(|t| match t {
                [id, value, assigned] => Ok(OwnedProxy {
                    record: record::decode(value)?,
                    assignment: assignment::decode(id, assigned, "")?,
                }),
                _ => Err(PoolError::corrupt("undecodable owned list in redis")),
            })
            .collect::<PoolResult<Vec<_>>>()?;
        owned.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        owned.truncate(limit);
        Ok(owned)
    }

    async fn draining_of(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<Assignment>> {
        let args = vec![worker.to_string(), self.budget()];
        let reply = self
            .call(&self.scripts.draining_of, now, Side::Read, args)
            .await?;
        let mut draining = triples(&reply)?;
        draining.sort_by(|a, b| a.proxy_id.cmp(&b.proxy_id));
        draining.truncate(limit);
        Ok(draining)
    }

    async fn current_epoch(&self, _now: UnixMillis) -> PoolResult<u64> {
        match self.get("epoch").await? {
            None => Ok(0),
            Some(raw) => std::str::from_utf8(&raw)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| PoolError::corrupt("undecodable epoch in redis")),
        }
    }
}
