//! StoreIdentity and LeaseStore over groups: every group carries the store's mark (a
//! group that lost it, or holds another, makes the whole store read as lost), and the
//! leases live in the home group with a copy in every other, written after the home
//! group's with the same expiry, so a fenced call in any group checks its term atomically
//! and no copy outlives the lease it copies.

use super::RedisPool;
use async_trait::async_trait;
use futures_util::future::try_join_all;
use proxypool_core::{
    Expectation, Lease, LeaseStore, PoolResult, StoreIdentity, StoreMark, UnixMillis,
};

#[async_trait]
impl StoreIdentity for RedisPool {
    async fn read_mark(&self) -> PoolResult<Option<StoreMark>> {
        self.check_groups().await?;
        let marks = try_join_all(self.groups().iter().map(|g| g.read_mark())).await?;
        let Some(Some(home)) = marks.first().cloned() else {
            return Ok(None);
        };
        // A group without the mark, or with another identity, lost (or never saw) what
        // the home group vouches for: the store as a whole is not the one it was.
        let mut mark = home;
        for other in &marks[1..] {
            match other {
                Some(m) if m.identity == mark.identity => {
                    mark.generation = mark.generation.min(m.generation);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(mark))
    }

    async fn install_mark(&self, now: UnixMillis, mark: &StoreMark) -> PoolResult<StoreMark> {
        self.check_groups().await?;
        // The other groups first: the home group's mark is what a reader trusts first.
        for group in &self.groups()[1..] {
            group.install_mark(now, mark).await?;
        }
        self.home().install_mark(now, mark).await
    }

    async fn advance_generation(&self, now: UnixMillis) -> PoolResult<u64> {
        let generation = self.home().advance_generation(now).await?;
        if self.groups().len() > 1 {
            // The home group's mark (checked against the expectation above) names the
            // identity; the others take the new generation over (install only raises).
            let Some(mut mark) = self.home().read_mark().await? else {
                return Err(proxypool_core::PoolError::Unavailable(
                    proxypool_core::Unavailable::StoreLost(proxypool_core::LossReason::Missing),
                ));
            };
            mark.generation = generation;
            for group in &self.groups()[1..] {
                group.install_mark(now, &mark).await?;
            }
        }
        Ok(generation)
    }

    async fn end_recovery(&self, now: UnixMillis) -> PoolResult<()> {
        for group in self.groups() {
            group.end_recovery(now).await?;
        }
        Ok(())
    }

    fn expect(&self, expectation: Option<Expectation>) {
        for group in self.groups() {
            group.expect(expectation.clone());
        }
    }
}

#[async_trait]
impl LeaseStore for RedisPool {
    async fn try_acquire(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> PoolResult<Option<Lease>> {
        let lease = self.home().try_acquire(now, name, holder, ttl_ms).await?;
        if let Some(lease) = &lease {
            // A copy that could not be written leaves that group refusing the term's fenced
            // calls until the next renewal: fail closed, and said here so the term waits.
            try_join_all(
                self.groups()[1..]
                    .iter()
                    .map(|g| g.mirror_lease(now, lease, false)),
            )
            .await?;
        }
        Ok(lease)
    }

    async fn release(
        &self,
        now: UnixMillis,
        name: &str,
        holder: &str,
        token: u64,
    ) -> PoolResult<()> {
        let held = self.home().current(now, name).await?;
        self.home().release(now, name, holder, token).await?;
        if let Some(lease) = held.filter(|l| l.holder == holder && l.token == token) {
            try_join_all(
                self.groups()[1..]
                    .iter()
                    .map(|g| g.mirror_lease(now, &lease, true)),
            )
            .await?;
        }
        Ok(())
    }

    async fn current(&self, now: UnixMillis, name: &str) -> PoolResult<Option<Lease>> {
        self.home().current(now, name).await
    }
}
