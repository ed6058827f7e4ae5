//! [`RedisPool`]: the activity pool over one or more shard groups, each a [`GroupPool`]
//! whose keys share one hash tag, so a Redis Cluster spreads the groups over its primaries
//! while every script stays atomic within its group.
//!
//! With one group (the default) every call goes to it unchanged. With more:
//! - **Per proxy.** A proxy lives in the group its id hashes to (`group_of`); a call
//!   about proxies goes to their groups, a batch split by group (`data`, `ownership`).
//! - **Home.** The first group holds what is the cluster's, not a proxy's: the leader
//!   lease (copied to every group so a fenced call checks its term in its own atomic step,
//!   `identity`), the ticket key, worker modes, provider statuses, usage and session
//!   feedback.
//! - **Everywhere.** The store's mark, the worker sessions and the issued snapshots are
//!   written to every group, so each judges them atomically with its own proxies
//!   (`runtime`); a session is granted only as long as every group holds it.
//! - **Counters read as one.** The ownership epoch and each worker's snapshot counter are
//!   per group; a reader raises every group to the highest value it read, so any later
//!   change counts above what it returns, and one number serves as the epoch of a
//!   snapshot and the version of a journal (`raise.lua`).
//! - **Extraction** is anchored in the group its id hashes to, which answers alone when it
//!   holds enough (one call, as with one group) and otherwise keeps a claim under which the
//!   other groups add their parts; all-or-nothing takes parts and gives them back when the
//!   whole falls short (`extract`).

mod calls;
mod data;
mod extract;
mod identity;
mod ownership;
mod runtime;

use crate::client::RedisClient;
use crate::durability::Durability;
use crate::group::GroupPool;
use crate::keys;
use crate::options::RedisPoolOptions;
use proxypool_core::{ActivityPool, Fence, Fencing, PoolError, PoolResult, ProxyId};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The activity pool in Redis: every port call is one atomic Lua function per shard group
/// it touches (see the module doc).
#[derive(Debug, Clone)]
pub struct RedisPool {
    groups: Arc<[GroupPool]>,
    options: RedisPoolOptions,
    /// Whether the store's pinned group count was found to be this pool's.
    pinned: Arc<AtomicBool>,
}

// RedisPool is a complete activity pool (and a lease store), like MemoryPool.
const _: fn() = || {
    fn implements<T: proxypool_core::ActivityPool + proxypool_core::LeaseStore>() {}
    implements::<RedisPool>();
};

impl RedisPool {
    /// A pool on `client` (nothing connects until the first call, so a Redis that is down
    /// at start-up is a 503 per call, not a failed start). Fails only on invalid options.
    pub fn new(client: impl Into<RedisClient>, options: RedisPoolOptions) -> PoolResult<RedisPool> {
        options.validate()?;
        let (conn, scripts) = GroupPool::shared(client, &options);
        let groups = keys::group_tags(options.groups)
            .iter()
            .map(|tag| GroupPool::new(conn.clone(), scripts.clone(), options.clone(), tag))
            .collect();
        Ok(RedisPool {
            groups,
            options,
            pinned: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The options the pool runs with.
    pub fn options(&self) -> &RedisPoolOptions {
        &self.options
    }

    /// The key prefix every key of the home group's current incarnation starts with
    /// (`{prefix}:{activity}:v3:` and the identity it expects, if any), for operators and
    /// tests that inspect the keyspace.
    pub fn keyspace(&self) -> String {
        self.home().keyspace()
    }

    /// The key prefixes of every group, home first.
    pub fn group_keyspaces(&self) -> Vec<String> {
        self.groups.iter().map(GroupPool::keyspace).collect()
    }

    /// One trivial script round trip (`EVALSHA` of `return 1`) through the same connection,
    /// timeout and error mapping as every port call: a readiness probe, and the ceiling the
    /// benchmark compares extraction with.
    pub async fn probe(&self) -> PoolResult<()> {
        self.home().probe().await
    }

    /// What the server (every primary of a cluster) keeps across a restart.
    pub async fn durability(&self) -> PoolResult<Durability> {
        self.home().durability().await
    }

    pub(crate) fn home(&self) -> &GroupPool {
        &self.groups[0]
    }

    pub(crate) fn groups(&self) -> &[GroupPool] {
        &self.groups
    }

    /// Whether the pool has a single group (every call goes to it unchanged).
    pub(crate) fn single(&self) -> Option<&GroupPool> {
        (self.groups.len() == 1).then(|| self.home())
    }

    /// The index of the group `proxy` lives in (0 is the home group; the order of
    /// [`group_keyspaces`](Self::group_keyspaces)).
    pub fn group_index(&self, proxy: &ProxyId) -> usize {
        self.index_of(proxy.as_str())
    }

    /// The group a name (a proxy id, an extraction id) hashes to.
    pub(crate) fn index_of(&self, name: &str) -> usize {
        let digest = Sha256::digest(name.as_bytes());
        let word = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        (word % self.groups.len() as u64) as usize
    }

    /// Every group's answer to a read that lists at most `limit`, merged in `order` and cut
    /// at `limit`: what one group holding the whole pool would answer.
    pub(crate) async fn gathered<'a, T, Fut>(
        &'a self,
        limit: usize,
        call: impl Fn(&'a GroupPool) -> Fut,
        order: impl FnMut(&T, &T) -> std::cmp::Ordering,
    ) -> PoolResult<Vec<T>>
    where
        Fut: std::future::Future<Output = PoolResult<Vec<T>>>,
    {
        let parts = futures_util::future::try_join_all(self.groups.iter().map(call)).await?;
        let mut all: Vec<T> = parts.into_iter().flatten().collect();
        all.sort_by(order);
        all.truncate(limit);
        Ok(all)
    }

    /// The group `proxy` lives in.
    pub(crate) fn group_of(&self, proxy: &ProxyId) -> &GroupPool {
        &self.groups[self.group_index(proxy)]
    }

    /// Splits `items` by the group of the proxy each names, keeping their order.
    pub(crate) fn split<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        id: impl Fn(&T) -> &ProxyId,
    ) -> Vec<Vec<T>> {
        let mut parts: Vec<Vec<T>> = (0..self.groups.len()).map(|_| Vec::new()).collect();
        for item in items {
            let g = self.group_index(id(&item));
            parts[g].push(item);
        }
        parts
    }

    /// Fails unless the store is pinned to this pool's group count (pinning it when
    /// nobody has): checked once per pool, before the store's mark is read or written, which
    /// every controller does before anything else.
    pub(crate) async fn check_groups(&self) -> PoolResult<()> {
        if self.pinned.load(Ordering::Acquire) {
            return Ok(());
        }
        let pinned = self.home().pin_groups(self.groups.len()).await?;
        if pinned != self.groups.len() {
            return Err(PoolError::invalid(format!(
                "the store's keys are spread over {pinned} shard groups, this process is configured for {} ([store] groups): a store keeps the count it was first used with",
                self.groups.len()
            )));
        }
        self.pinned.store(true, Ordering::Release);
        Ok(())
    }
}

impl Fencing for RedisPool {
    fn fenced(&self, fence: Fence) -> Arc<dyn ActivityPool> {
        Arc::new(RedisPool {
            groups: self.groups.iter().map(|g| g.with_fence(&fence)).collect(),
            options: self.options.clone(),
            pinned: self.pinned.clone(),
        })
    }
}
