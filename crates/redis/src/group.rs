//! [`GroupPool`]: one shard group of the pool (every key under one hash tag) and the call
//! plumbing every port of a group shares. `RedisPool` (`sharded/`) routes over one or more.

use crate::client::RedisClient;
use crate::codec::clamp_ms;
use crate::connection::Connector;
use crate::keys;
use crate::options::RedisPoolOptions;
use crate::reply::{self, Reply};
use crate::scripts::{Function, Scripts};
use proxypool_core::{
    ActivityPool, Conflict, Expectation, Fence, Fencing, LossReason, PoolError, PoolResult,
    Unavailable, UnixMillis,
};
use redis::Value;
use std::sync::{Arc, RwLock};

/// One shard group of the activity pool in Redis: every port call is one atomic Lua
/// function (or one read) over the group's keys, which share one hash tag.
#[derive(Debug)]
pub(crate) struct GroupPool {
    pub(crate) options: RedisPoolOptions,
    /// The group's hash tag (`keys::group_tags`), in every key name of the group.
    tag: Arc<str>,
    /// Which incarnation calls go to and what they check, shared by every handle.
    incarnation: Arc<RwLock<Incarnation>>,
    /// The store's mark (`keys::mark`).
    mark: String,
    conn: Arc<Connector>,
    pub(crate) scripts: Arc<Scripts>,
    /// The leader term of a handle made by [`Fencing::fenced`], as the scripts read it
    /// (`"<lease name>\t<holder>\t<token>"`); empty for an unfenced handle.
    fence: String,
}

/// The keyspace of the store's incarnation a pool expects, and the expectation as the
/// scripts read it (`"<identity>\t<generation>"`, empty when nothing is checked).
#[derive(Debug, Clone)]
struct Incarnation {
    base: String,
    expect: String,
}

// GroupPool is a complete activity pool (and a lease store), like MemoryPool.
const _: fn() = || {
    fn implements<T: proxypool_core::ActivityPool + proxypool_core::LeaseStore>() {}
    implements::<GroupPool>();
};

/// Whether a script removes a few expired records on the side: every write does, as
/// MemoryPool's writes do; reads, sweeps and leases (which MemoryPool runs without it) do
/// not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Write,
    Read,
}

impl GroupPool {
    /// The group tagged `tag` on a connection and a script set the groups share (nothing
    /// connects until the first call, so a Redis that is down at start-up is a 503 per call,
    /// not a failed start).
    pub(crate) fn new(
        conn: Arc<Connector>,
        scripts: Arc<Scripts>,
        options: RedisPoolOptions,
        tag: &str,
    ) -> GroupPool {
        GroupPool {
            incarnation: Arc::new(RwLock::new(Incarnation {
                base: keys::base(&options.key_prefix, tag),
                expect: String::new(),
            })),
            mark: keys::mark(&options.key_prefix, tag),
            tag: tag.into(),
            conn,
            scripts,
            fence: String::new(),
            options,
        }
    }

    /// A connection and the script set for the groups of a pool on `client`.
    pub(crate) fn shared(
        client: impl Into<RedisClient>,
        options: &RedisPoolOptions,
    ) -> (Arc<Connector>, Arc<Scripts>) {
        (
            Arc::new(Connector::new(client.into(), options.call_timeout)),
            Arc::new(Scripts::load()),
        )
    }

    fn incarnation(&self) -> Incarnation {
        self.incarnation
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Points every handle of this pool at `expectation`'s incarnation (or, with `None`,
    /// at the unchecked base).
    pub(crate) fn set_expectation(&self, expectation: Option<&Expectation>) {
        let prefix = &self.options.key_prefix;
        let next = match expectation {
            Some(e) => Incarnation {
                base: keys::incarnation_base(prefix, &self.tag, &e.identity),
                expect: format!("{}\t{}", e.identity, e.generation),
            },
            None => Incarnation {
                base: keys::base(prefix, &self.tag),
                expect: String::new(),
            },
        };
        *self.incarnation.write().unwrap_or_else(|e| e.into_inner()) = next;
    }

    pub(crate) fn conn(&self) -> &Connector {
        &self.conn
    }

    /// The key prefix every key of this pool's current incarnation starts with
    /// (`{prefix}:{activity}:v3:` and the identity it expects, if any), for operators and
    /// tests that inspect the keyspace.
    pub(crate) fn keyspace(&self) -> String {
        self.incarnation().base
    }

    /// One trivial script round trip (`EVALSHA` of `return 1`) through the same connection,
    /// timeout and error mapping as every port call: a readiness probe, and the ceiling the
    /// benchmark compares extraction with.
    pub(crate) async fn probe(&self) -> PoolResult<()> {
        self.conn
            .eval(&self.scripts.probe, &self.incarnation().base, &[])
            .await
            .map(|_| ())
    }

    /// Calls a library function with the common leading arguments (now, cleanup count, TTL
    /// slack, the handle's fence, the store it expects). A call the script refused because
    /// the store is not the expected one is `Unavailable::StoreLost`, and a fenced call it
    /// refused `Conflict::StaleTerm`, whatever the script, so no reply parser needs to know
    /// about either.
    pub(crate) async fn eval(
        &self,
        function: &Function,
        now: UnixMillis,
        side: Side,
        args: Vec<String>,
    ) -> PoolResult<Value> {
        self.eval_expecting(function, now, side, args, None).await
    }

    /// [`eval`](Self::eval) with the expectation given (`Some("")`: none) instead of the
    /// pool's own: the identity port's unchecked calls.
    pub(crate) async fn eval_expecting(
        &self,
        function: &Function,
        now: UnixMillis,
        side: Side,
        args: Vec<String>,
        expect: Option<&str>,
    ) -> PoolResult<Value> {
        let cleanup = match side {
            Side::Write => self.options.opportunistic_cleanup,
            Side::Read => 0,
        };
        let incarnation = self.incarnation();
        let mut all = Vec::with_capacity(args.len() + 5);
        all.push(clamp_ms(now).to_string());
        all.push(cleanup.to_string());
        all.push(self.options.key_ttl_slack_ms.to_string());
        all.push(self.fence.clone());
        all.push(expect.unwrap_or(&incarnation.expect).to_owned());
        all.extend(args);
        let value = self
            .conn
            .fcall(function, [&incarnation.base, &self.mark], &all)
            .await?;
        if let Some(reason) = store_lost(&value) {
            return Err(PoolError::Unavailable(Unavailable::StoreLost(reason)));
        }
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
        self.conn
            .get(&format!("{}{name}", self.incarnation().base))
            .await
    }
}

/// The reason of the reply `lib/runner.lua`'s `P.run` gives when the store is not the one
/// the call expects (`lib/mark.lua`).
fn store_lost(value: &Value) -> Option<LossReason> {
    let Value::Array(items) = value else {
        return None;
    };
    match (items.first(), items.get(1)) {
        (Some(Value::BulkString(word)), Some(Value::BulkString(reason)))
            if word == b"store_lost" =>
        {
            std::str::from_utf8(reason).ok().and_then(LossReason::parse)
        }
        _ => None,
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

impl GroupPool {
    /// A handle on the same group whose every call is fenced by `fence`.
    pub(crate) fn with_fence(&self, fence: &Fence) -> GroupPool {
        GroupPool {
            options: self.options.clone(),
            tag: self.tag.clone(),
            incarnation: self.incarnation.clone(),
            mark: self.mark.clone(),
            conn: self.conn.clone(),
            scripts: self.scripts.clone(),
            fence: format!("{}\t{}\t{}", fence.lease, fence.holder, fence.token),
        }
    }
}

impl Fencing for GroupPool {
    fn fenced(&self, fence: Fence) -> Arc<dyn ActivityPool> {
        Arc::new(self.with_fence(&fence))
    }
}
