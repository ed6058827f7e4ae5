//! The one way the adapter talks to Redis: a shared connection (a connection manager for
//! one server or a Sentinel's master, a cluster connection for a Redis Cluster), every call
//! under the configured timeout, every failure mapped to `Unavailable(Store)`.
//!
//! The connection manager reconnects by itself after a restart; port calls are `FCALL`s of
//! the adapter's function library, loaded with `FUNCTION LOAD` when the server answers that
//! the function is missing (first use, `FUNCTION FLUSH`, a restart without persistence, a
//! failover), and the probe's `EVALSHA` does the same with `SCRIPT LOAD` on NOSCRIPT, so
//! the process never needs restarting. A Sentinel target is re-resolved after I/O or
//! READONLY errors (a failover). Error texts name the kind of failure only: never a key's
//! content, a URL or a credential.
//!
//! On a Cluster every command is routed by the key it names (a port call's first key), never
//! to an assumed node: `FCALL` and `EVALSHA` go to the primary that owns that key's slot,
//! and so does the `FUNCTION LOAD` / `SCRIPT LOAD` after that node said it lacks them (a
//! load sent to every node would fail whenever any node is down). `CONFIG GET` goes to
//! every primary. The cluster client follows MOVED and ASK and re-reads the slot map after
//! a failover by itself, but it cannot tell a hung primary (a stopped process, a frozen
//! host) from a slow one: the connection stays open and every call to it times out. So
//! after a timeout or a lost connection the connector forgets the cluster connection, and
//! the next call builds a new one from the seeds, which reads the slot map as the cluster
//! sees it now. Within one call the cluster client re-sends a command after a redirection
//! or a dropped connection, as a caller retrying `Unavailable` would (a node that died
//! after running it but before replying is the lost-reply case of one server), but never
//! after the call timed out (see `client::reply_timeout`).

use crate::client::{RedisClient, Target, connect_timeout, reply_timeout};
use crate::scripts::{Function, PlainScript};
use proxypool_core::{LockExt, PoolError, PoolResult};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterConfig;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A connection to the pool's Redis, cheap to clone (every clone shares it).
#[derive(Clone)]
enum Link {
    /// One server, or the master a Sentinel named.
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Link {
    /// `cmd` on the server, or on the primary that owns `key`'s slot.
    async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd, key: &str) -> redis::RedisResult<T> {
        match self {
            Link::Single(manager) => cmd.query_async(manager).await,
            Link::Cluster(cluster) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                // As `query_async` does: a server error in the reply is the call's error.
                let value = cluster
                    .route_command(cmd.clone(), route)
                    .await?
                    .extract_error()?;
                Ok(redis::from_redis_value(value)?)
            }
        }
    }
}

/// The current link and the number of links made so far: an error on one link forgets it
/// only if no later one replaced it yet.
struct Held {
    link: Option<Link>,
    generation: u64,
}

/// A shared, lazily connected link plus the per-call timeout.
pub(crate) struct Connector {
    client: RedisClient,
    timeout: Duration,
    /// `link` is `None` until the first call, after a Sentinel failover and after a
    /// cluster connection was given up. The lock is only held to clone or swap the handle,
    /// never across an await.
    held: Mutex<Held>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("client", &self.client)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn describe(error: &RedisError) -> String {
    // Category and code only: a server error's detail could quote arguments.
    match error.code() {
        Some(code) => format!("redis {} ({code})", error.category()),
        None => format!("redis {}", error.category()),
    }
}

fn store_down(error: &RedisError) -> PoolError {
    PoolError::store_down(describe(error))
}

/// No link was taken yet (generations start at 1).
const NO_LINK: u64 = 0;

impl Connector {
    pub(crate) fn new(client: RedisClient, timeout: Duration) -> Connector {
        Connector {
            client,
            timeout,
            held: Mutex::new(Held {
                link: None,
                generation: NO_LINK,
            }),
        }
    }

    fn config(&self) -> ConnectionManagerConfig {
        // Reconnect quickly and give up soon: the caller's timeout is the real bound, and a
        // later call starts a fresh attempt.
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100))
    }

    fn cached(&self) -> Option<(u64, Link)> {
        let held = self.held.lock_or_recover();
        held.link.clone().map(|link| (held.generation, link))
    }

    async fn link(&self) -> PoolResult<(u64, Link)> {
        if let Some(cached) = self.cached() {
            return Ok(cached);
        }
        let fresh = match &self.client.target {
            Target::Direct(client) => Link::Single(
                ConnectionManager::new_lazy_with_config(client.clone(), self.config())
                    .map_err(|e| store_down(&e))?,
            ),
            Target::Sentinel(target) => {
                let client = target.resolve().await.map_err(|e| store_down(&e))?;
                Link::Single(
                    ConnectionManager::new_lazy_with_config(client, self.config())
                        .map_err(|e| store_down(&e))?,
                )
            }
            // Pending: the seeds are connected in the background and the call waits for
            // them within its own timeout, as the lazy manager does.
            Target::Cluster(target) => Link::Cluster(
                target
                    .client(self.timeout)
                    .map_err(|e| store_down(&e))?
                    .get_pending_async_connection_with_config(
                        ClusterConfig::new()
                            .set_connection_timeout(connect_timeout(self.timeout))
                            .set_response_timeout(reply_timeout(self.timeout)),
                    ),
            ),
        };
        let mut held = self.held.lock_or_recover();
        // Two first calls may race; keep whichever link was stored first.
        if held.link.is_none() {
            held.generation += 1;
            held.link = Some(fresh);
        }
        let link = held.link.clone().expect("a link was just stored");
        Ok((held.generation, link))
    }

    /// Drops the link of `generation`, unless a later one replaced it already.
    fn forget(&self, generation: u64) -> bool {
        let mut held = self.held.lock_or_recover();
        if generation == NO_LINK || held.generation != generation || held.link.is_none() {
            return false;
        }
        held.link = None;
        true
    }

    /// After a failover the old master refuses writes (READONLY) or vanishes (I/O): forget
    /// a Sentinel's master so the next call asks the Sentinels again, and a cluster
    /// connection so the next one reads the slot map afresh.
    fn on_error(&self, generation: u64, error: &RedisError) {
        let lost = error.is_io_error()
            || error.is_unrecoverable_error()
            || matches!(
                error.kind(),
                ErrorKind::Server(ServerErrorKind::ReadOnly) | ErrorKind::ClusterConnectionNotFound
            );
        if !lost {
            return;
        }
        match self.client.target {
            Target::Direct(_) => {}
            Target::Sentinel(_) => {
                if self.forget(generation) {
                    tracing::warn!(
                        error = %describe(error),
                        "redis master lost; asking the sentinels again on the next call"
                    );
                }
            }
            Target::Cluster(_) => {
                if self.forget(generation) {
                    tracing::warn!(
                        error = %describe(error),
                        "redis cluster node lost; reading the slots from the seeds on the next call"
                    );
                }
            }
        }
    }

    /// A call that timed out on a cluster may be stuck on a hung primary the cluster has
    /// failed over already: only a new connection finds out.
    fn on_timeout(&self, generation: u64) {
        if matches!(self.client.target, Target::Cluster(_)) && self.forget(generation) {
            tracing::warn!(
                timeout_ms = self.timeout.as_millis() as u64,
                "redis cluster call timed out; reading the slots from the seeds on the next call"
            );
        }
    }

    /// Runs `work` on the link under the call timeout, mapping every failure to
    /// `Unavailable(Store)`.
    async fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut Link) -> redis::RedisResult<T>,
    ) -> PoolResult<T> {
        let used = AtomicU64::new(NO_LINK);
        let attempt = async {
            let (generation, mut link) = self.link().await?;
            used.store(generation, Ordering::Relaxed);
            work(&mut link).await.map_err(|e| {
                self.on_error(generation, &e);
                store_down(&e)
            })
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => {
                self.on_timeout(used.load(Ordering::Relaxed));
                Err(PoolError::store_down(format!(
                    "redis call timed out after {} ms",
                    self.timeout.as_millis()
                )))
            }
        }
    }

    /// Runs `script` with KEYS[1] = `base` and the given ARGV, loading it on the node that
    /// answers NOSCRIPT, then calling once more.
    pub(crate) async fn eval(
        &self,
        script: &PlainScript,
        base: &str,
        args: &[String],
    ) -> PoolResult<Value> {
        self.run(async |link: &mut Link| {
            let mut call = redis::cmd("EVALSHA");
            call.arg(&script.sha).arg(1).arg(base);
            for arg in args {
                call.arg(arg.as_str());
            }
            match link.query::<Value>(&call, base).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {}
                other => return other,
            }
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(script.source);
            link.query::<Value>(&load, base).await?;
            link.query::<Value>(&call, base).await
        })
        .await
    }

    /// `FCALL function 2 base mark args...`, loading the function's library first when the
    /// server (on a cluster: the primary of `base`'s slot) does not know the function, then
    /// calling once more.
    pub(crate) async fn fcall(
        &self,
        function: &Function,
        keys: [&str; 2],
        args: &[String],
    ) -> PoolResult<Value> {
        self.run(async |link: &mut Link| {
            let mut call = redis::cmd("FCALL");
            call.arg(&function.name).arg(2).arg(keys[0]).arg(keys[1]);
            for arg in args {
                call.arg(arg.as_str());
            }
            match link.query::<Value>(&call, keys[0]).await {
                Err(e) if is_function_missing(&e) => {}
                other => return other,
            }
            let mut load = redis::cmd("FUNCTION");
            load.arg("LOAD").arg(&function.library.source);
            match link.query::<Value>(&load, keys[0]).await {
                Ok(_) => {}
                // A concurrent call loaded it first: the same name is the same source.
                Err(e) if is_library_present(&e) => {}
                Err(e) => return Err(e),
            }
            link.query::<Value>(&call, keys[0]).await
        })
        .await
    }

    /// `CONFIG GET name` on the server, or on every primary of a cluster: per server its
    /// address (`None` for the one server) and the value, or `None` when it has no such
    /// setting or refuses the command (managed services often rename `CONFIG` away).
    pub(crate) async fn config_get(&self, name: &str) -> PoolResult<Vec<ServerValue>> {
        self.run(async |link: &mut Link| {
            let mut get = redis::cmd("CONFIG");
            get.arg("GET").arg(name);
            match link {
                Link::Single(manager) => match get.query_async::<Vec<String>>(manager).await {
                    Ok(pairs) => Ok(vec![(None, pairs.into_iter().nth(1))]),
                    Err(e) if matches!(e.kind(), ErrorKind::Server(_)) => Ok(vec![(None, None)]),
                    Err(e) => Err(e),
                },
                Link::Cluster(cluster) => {
                    // No response policy: one reply per primary, keyed by its address, a
                    // refusal as that primary's server error.
                    let every = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                    match cluster.route_command(get, every).await? {
                        Value::Map(replies) => Ok(replies
                            .into_iter()
                            .map(|(node, reply)| {
                                let node = redis::from_redis_value::<String>(node).ok();
                                let value = redis::from_redis_value::<Vec<String>>(reply)
                                    .ok()
                                    .and_then(|pairs| pairs.into_iter().nth(1));
                                (node, value)
                            })
                            .collect()),
                        _ => Err(RedisError::from((
                            ErrorKind::UnexpectedReturnType,
                            "CONFIG GET on every primary",
                        ))),
                    }
                }
            }
        })
        .await
    }

    /// `GET key` (for reads that need no script).
    pub(crate) async fn get(&self, key: &str) -> PoolResult<Option<Vec<u8>>> {
        self.run(async |link: &mut Link| {
            let mut get = redis::cmd("GET");
            get.arg(key);
            link.query::<Option<Vec<u8>>>(&get, key).await
        })
        .await
    }
}

/// One server's answer: its address (`None`: the one server) and the value it gave.
pub(crate) type ServerValue = (Option<String>, Option<String>);

/// `ERR Function not found`: the library is not loaded on this server (yet, or any more).
fn is_function_missing(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// `ERR Library '<name>' already exists`.
fn is_library_present(error: &RedisError) -> bool {
    error
        .detail()
        .is_some_and(|d| d.starts_with("Library") && d.ends_with("already exists"))
}
