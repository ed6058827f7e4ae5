//! [`RedisPool`]: the one constructor and the plumbing every port shares.

use crate::client::RedisClient;
use crate::codec::clamp_ms;
use crate::connection::Connector;
use crate::keys;
use crate::options::RedisPoolOptions;
use crate::scripts::Scripts;
use proxypool_core::{PoolResult, UnixMillis};
use redis::{Script, Value};

/// The activity pool in Redis: every port call is one atomic Lua script (or one read).
#[derive(Debug)]
pub struct RedisPool {
    pub(crate) options: RedisPoolOptions,
    base: String,
    conn: Connector,
    pub(crate) scripts: Scripts,
}

// RedisPool is a complete activity pool (and a lease store), like MemoryPool.
const _: fn() = || {
    fn implements<T: proxypool_core::ActivityPool + proxypool_core::LeaseStore>() {}
    implements::<RedisPool>();
};

/// Whether a script removes a few expired records on the side: every write does, as
/// MemoryPool's writes do; reads, sweeps and leases (which MemoryPool runs without it) do
/// not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Write,
    Read,
}

impl RedisPool {
    /// A pool on `client` (nothing connects until the first call, so a Redis that is down
    /// at start-up is a 503 per call, not a failed start). Fails only on invalid options.
    pub fn new(client: impl Into<RedisClient>, options: RedisPoolOptions) -> PoolResult<RedisPool> {
        options.validate()?;
        Ok(RedisPool {
            base: keys::base(&options.key_prefix),
            conn: Connector::new(client.into(), options.call_timeout),
            scripts: Scripts::load(),
            options,
        })
    }

    /// The options the pool runs with.
    pub fn options(&self) -> &RedisPoolOptions {
        &self.options
    }

    /// The key prefix every key of this pool starts with (`{prefix}:{activity}:`), for
    /// operators and tests that inspect the keyspace.
    pub fn keyspace(&self) -> &str {
        &self.base
    }

    /// One trivial script round trip (`EVALSHA` of `return 1`) through the same connection,
    /// timeout and error mapping as every port call: a readiness probe, and the ceiling the
    /// benchmark compares extraction with.
    pub async fn probe(&self) -> PoolResult<()> {
        self.conn
            .eval(&self.scripts.probe, &self.base, &[])
            .await
            .map(|_| ())
    }

    /// Runs a script with the common leading arguments (now, cleanup count, TTL slack).
    pub(crate) async fn eval(
        &self,
        script: &Script,
        now: UnixMillis,
        side: Side,
        args: Vec<String>,
    ) -> PoolResult<Value> {
        let cleanup = match side {
            Side::Write => self.options.opportunistic_cleanup,
            Side::Read => 0,
        };
        let mut all = Vec::with_capacity(args.len() + 3);
        all.push(clamp_ms(now).to_string());
        all.push(cleanup.to_string());
        all.push(self.options.key_ttl_slack_ms.to_string());
        all.extend(args);
        self.conn.eval(script, &self.base, &all).await
    }

    /// `GET` of a key under this pool's base.
    pub(crate) async fn get(&self, name: &str) -> PoolResult<Option<Vec<u8>>> {
        self.conn.get(&format!("{}{name}", self.base)).await
    }
}
