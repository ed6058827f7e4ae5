//! [`RedisPool`]: the one constructor and the plumbing every port shares.

use crate::client::RedisClient;
use crate::codec::clamp_ms;
use crate::connection::Connector;
use crate::keys;
use crate::options::RedisPoolOptions;
use crate::reply::{self, Reply};
use crate::scripts::{Function, Scripts};
use proxypool_core::{ActivityPool, Conflict, Fence, Fencing, PoolError, PoolResult, UnixMillis};
use redis::Value;
use std::sync::Arc;

/// The activity pool in Redis: every port call is one atomic Lua function (or one read).
#[derive(Debug)]
pub struct RedisPool {
    pub(crate) options: RedisPoolOptions,
    base: String,
    conn: Arc<Connector>,
    pub(crate) scripts: Arc<Scripts>,
    /// The leader term of a handle made by [`Fencing::fenced`], as the scripts read it
    /// (`"<lease name>\t<token>"`); empty for an unfenced handle.
    fence: String,
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
            conn: Arc::new(Connector::new(client.into(), options.call_timeout)),
            scripts: Arc::new(Scripts::load()),
            fence: String::new(),
            options,
        })
    }

    pub(crate) fn conn(&self) -> &Connector {
        &self.conn
    }

    /// The options the pool runs with.
    pub fn options(&self) -> &RedisPoolOptions {
        &self.options
    }

    /// The key prefix every key of this pool starts with (`{prefix}:{activity}:v2:`), for
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

    /// Calls a library function with the common leading arguments (now, cleanup count, TTL slack, the
    /// handle's fence). A fenced call the script refused is `Conflict::StaleTerm` whatever
    /// the script, so no reply parser needs to know about fencing.
    pub(crate) async fn eval(
        &self,
        function: &Function,
        now: UnixMillis,
        side: Side,
        args: Vec<String>,
    ) -> PoolResult<Value> {
        let cleanup = match side {
            Side::Write => self.options.opportunistic_cleanup,
            Side::Read => 0,
        };
        let mut all = Vec::with_capacity(args.len() + 4);
        all.push(clamp_ms(now).to_string());
        all.push(cleanup.to_string());
        all.push(self.options.key_ttl_slack_ms.to_string());
        all.push(self.fence.clone());
        all.extend(args);
        let value = self.conn.fcall(function, &self.base, &all).await?;
        if !self.fence.is_empty() && is_stale_term(&value) {
            return Err(PoolError::Conflict(Conflict::StaleTerm));
        }
        Ok(value)
    }

    /// [`eval`](Self::eval) with the reply split into status and payload, for the scripts
    /// whose reply echoes no requested count (every one but extraction's).
    pub(crate) async fn call(
        &self,
        function: &Function,
        now: UnixMillis,
        side: Side,
        args: Vec<String>,
    ) -> PoolResult<Reply> {
        reply::parse(self.eval(function, now, side, args).await?, 0)
    }

    /// `GET` of a key under this pool's base.
    pub(crate) async fn get(&self, name: &str) -> PoolResult<Option<Vec<u8>>> {
        self.conn.get(&format!("{}{name}", self.base)).await
    }
}

/// The reply `lib/runner.lua`'s `P.run` gives instead of running a fenced script.
fn is_stale_term(value: &Value) -> bool {
    match value {
        Value::Array(items) => matches!(
            items.first(),
            Some(Value::BulkString(word)) if word == b"stale_term"
        ),
        _ => false,
    }
}

impl Fencing for RedisPool {
    fn fenced(&self, fence: Fence) -> Arc<dyn ActivityPool> {
        Arc::new(RedisPool {
            options: self.options.clone(),
            base: self.base.clone(),
            conn: self.conn.clone(),
            scripts: self.scripts.clone(),
            fence: format!("{}\t{}", fence.lease, fence.token),
        })
    }
}
