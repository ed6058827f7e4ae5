//! OwnershipRepository over groups: a proxy's lease is written in its group; the sweeps
//! (`expire`, `release_orphaned`) take from one group after another up to the limit, from
//! a group that turns with every call so none waits behind the others; the listings merge
//! the groups' in the order one group lists them; the epoch is the groups' counters read as
//! one (`raise.lua`).

use super::RedisPool;
use super::calls::Counter;
use crate::group::GroupPool;
use async_trait::async_trait;
use futures_util::future::try_join_all;
use proxypool_core::{
    Assignment, OwnedProxy, OwnershipRepository, PoolResult, ProxyId, ProxyRecord, UnixMillis,
    WorkerId,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The group the next sweep starts at.
static NEXT_SWEEP_START: AtomicUsize = AtomicUsize::new(0);

impl RedisPool {
    /// Runs a bounded write (`limit` at most over all groups) on one group after another,
    /// until the limit is reached.
    pub(crate) async fn take_in_turn<'a, T, F, Fut>(
        &'a self,
        limit: usize,
        call: F,
    ) -> PoolResult<Vec<T>>
    where
        F: Fn(&'a GroupPool, usize) -> Fut,
        Fut: Future<Output = PoolResult<Vec<T>>>,
    {
        let groups = self.groups();
        let start = NEXT_SWEEP_START.fetch_add(1, Ordering::Relaxed) % groups.len();
        let mut taken = Vec::new();
        for i in 0..groups.len() {
            let left = limit - taken.len();
            if left == 0 {
                break;
            }
            taken.extend(call(&groups[(start + i) % groups.len()], left).await?);
        }
        Ok(taken)
    }

    /// The groups' counters read as one: the highest, with every group raised to it, so
    /// any later change in any group counts above it.
    pub(crate) async fn read_as_one(
        &self,
        now: UnixMillis,
        counter: Counter<'_>,
        values: Vec<u64>,
    ) -> PoolResult<u64> {
        let highest = values.iter().copied().max().unwrap_or(0);
        try_join_all(
            self.groups()
                .iter()
                .zip(&values)
                .filter(|(_, v)| **v < highest)
                .map(|(g, _)| g.raise(now, counter, highest)),
        )
        .await?;
        Ok(highest)
    }
}

#[async_trait]
impl OwnershipRepository for RedisPool {
    async fn assign(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        self.group_of(proxy)
            .assign(now, proxy, worker, lease_ms)
            .await
    }

    async fn renew(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
        lease_ms: u64,
    ) -> PoolResult<Assignment> {
        self.group_of(proxy)
            .renew(now, proxy, worker, epoch, lease_ms)
            .await
    }

    async fn begin_drain(
        &self,
        now: UnixMillis,
        proxy: &ProxyId,
        worker: &WorkerId,
        epoch: u64,
    ) -> PoolResult<Assignment> {
        self.group_of(proxy)
            .begin_drain(now, proxy, worker, epoch)
            .await
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
        self.group_of(proxy)
            .acknowledge_drain(now, proxy, worker, epoch, active, reserved)
            .await
    }

    async fn get(&self, now: UnixMillis, proxy: &ProxyId) -> PoolResult<Option<Assignment>> {
        OwnershipRepository::get(self.group_of(proxy), now, proxy).await
    }

    async fn expire(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        self.take_in_turn(limit, |g, left| g.expire(now, left))
            .await
    }

    async fn release_orphaned(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<Assignment>> {
        self.take_in_turn(limit, |g, left| g.release_orphaned(now, left))
            .await
    }

    async fn assignable(&self, now: UnixMillis, limit: usize) -> PoolResult<Vec<ProxyRecord>> {
        // Longest-lived first, ties by id descending: one group's (score, id) order.
        self.gathered(
            limit,
            |g| g.assignable(now, limit),
            |a, b| (b.usable_until_ms, &b.id).cmp(&(a.usable_until_ms, &a.id)),
        )
        .await
    }

    async fn owned_by(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<OwnedProxy>> {
        self.gathered(
            limit,
            |g| g.owned_by(now, worker, limit),
            |a, b| a.record.id.cmp(&b.record.id),
        )
        .await
    }

    async fn draining_of(
        &self,
        now: UnixMillis,
        worker: &WorkerId,
        limit: usize,
    ) -> PoolResult<Vec<Assignment>> {
        self.gathered(
            limit,
            |g| g.draining_of(now, worker, limit),
            |a, b| a.proxy_id.cmp(&b.proxy_id),
        )
        .await
    }

    async fn current_epoch(&self, now: UnixMillis) -> PoolResult<u64> {
        if let Some(one) = self.single() {
            return one.current_epoch(now).await;
        }
        let values = try_join_all(self.groups().iter().map(|g| g.current_epoch(now))).await?;
        self.read_as_one(now, Counter::Epoch, values).await
    }
}
