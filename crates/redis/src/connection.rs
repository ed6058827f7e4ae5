//! The one way the adapter talks to Redis: a shared connection manager, every call under
//! the configured timeout, every failure mapped to `Unavailable(Store)`.
//!
//! The connection manager reconnects by itself after a restart; port calls are `FCALL`s of
//! the adapter's function library, loaded with `FUNCTION LOAD` when the server answers that
//! the function is missing (first use, `FUNCTION FLUSH`, a restart without persistence, a
//! failover), and the probe's `Script::invoke_async` does the same for EVALSHA on NOSCRIPT,
//! so the process never needs restarting. A Sentinel target is re-resolved after I/O or
//! READONLY errors (a failover). Error texts name the kind of failure only: never a key's
//! content, a URL or a credential.

use crate::client::{RedisClient, Target};
use crate::scripts::Function;
use proxypool_core::{LockExt, PoolError, PoolResult};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// A shared, lazily connected manager plus the per-call timeout.
pub(crate) struct Connector {
    client: RedisClient,
    timeout: Duration,
    /// The current manager; `None` until the first call and after a Sentinel failover. The
    /// lock is only held to clone or swap the handle, never across an await.
    slot: Mutex<Option<ConnectionManager>>,
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

impl Connector {
    pub(crate) fn new(client: RedisClient, timeout: Duration) -> Connector {
        Connector {
            client,
            timeout,
            slot: Mutex::new(None),
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

    fn cached(&self) -> Option<ConnectionManager> {
        self.slot.lock_or_recover().clone()
    }

    async fn manager(&self) -> PoolResult<ConnectionManager> {
        if let Some(manager) = self.cached() {
            return Ok(manager);
        }
        let client = match &self.client.target {
            Target::Direct(client) => client.clone(),
            Target::Sentinel(target) => target.resolve().await.map_err(|e| store_down(&e))?,
        };
        let fresh = ConnectionManager::new_lazy_with_config(client, self.config())
            .map_err(|e| store_down(&e))?;
        let mut slot = self.slot.lock_or_recover();
        // Two first calls may race; keep whichever manager was stored first.
        Ok(slot.get_or_insert(fresh).clone())
    }

    /// After a failover the old master refuses writes (READONLY) or vanishes (I/O): forget
    /// the manager so the next call asks the Sentinels again.
    fn on_error(&self, error: &RedisError) {
        let failover = error.is_io_error()
            || error.is_unrecoverable_error()
            || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if failover
            && matches!(self.client.target, Target::Sentinel(_))
            && self.slot.lock_or_recover().take().is_some()
        {
            tracing::warn!(
                error = %describe(error),
                "redis master lost; asking the sentinels again on the next call"
            );
        }
    }

    async fn bounded<T>(&self, work: impl Future<Output = PoolResult<T>>) -> PoolResult<T> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(PoolError::store_down(format!(
                "redis call timed out after {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Runs `script` with KEYS[1] = `base` and the given ARGV.
    pub(crate) async fn eval(
        &self,
        script: &Script,
        base: &str,
        args: &[String],
    ) -> PoolResult<Value> {
        self.bounded(async {
            let mut manager = self.manager().await?;
            let mut invocation = script.prepare_invoke();
            invocation.key(base);
            for arg in args {
                invocation.arg(arg.as_str());
            }
            invocation
                .invoke_async::<Value>(&mut manager)
                .await
                .map_err(|e| {
                    self.on_error(&e);
                    store_down(&e)
                })
        })
        .await
    }

    /// `FCALL function 2 base mark args...`, loading the function's library first when the
    /// server does not know the function, then calling once more.
    pub(crate) async fn fcall(
        &self,
        function: &Function,
        keys: [&str; 2],
        args: &[String],
    ) -> PoolResult<Value> {
        self.bounded(async {
            let mut manager = self.manager().await?;
            let mut call = redis::cmd("FCALL");
            call.arg(&function.name).arg(2).arg(keys[0]).arg(keys[1]);
            for arg in args {
                call.arg(arg.as_str());
            }
            let first = call.query_async::<Value>(&mut manager).await;
            let missing = match &first {
                Err(e) => is_function_missing(e),
                Ok(_) => false,
            };
            if !missing {
                return first.map_err(|e| {
                    self.on_error(&e);
                    store_down(&e)
                });
            }
            let loaded = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(&function.library.source)
                .query_async::<Value>(&mut manager)
                .await;
            match loaded {
                Ok(_) => {}
                // A concurrent call loaded it first: the same name is the same source.
                Err(e) if is_library_present(&e) => {}
                Err(e) => {
                    self.on_error(&e);
                    return Err(store_down(&e));
                }
            }
            call.query_async::<Value>(&mut manager).await.map_err(|e| {
                self.on_error(&e);
                store_down(&e)
            })
        })
        .await
    }

    /// `CONFIG GET name`: the value, or `None` when the server has no such setting or
    /// refuses the command (managed services often rename `CONFIG` away).
    pub(crate) async fn config_get(&self, name: &str) -> PoolResult<Option<String>> {
        self.bounded(async {
            let mut manager = self.manager().await?;
            let reply = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async::<Vec<String>>(&mut manager)
                .await;
            match reply {
                Ok(pairs) => Ok(pairs.into_iter().nth(1)),
                Err(e) if matches!(e.kind(), ErrorKind::Server(_)) => Ok(None),
                Err(e) => {
                    self.on_error(&e);
                    Err(store_down(&e))
                }
            }
        })
        .await
    }

    /// `GET key` (for reads that need no script).
    pub(crate) async fn get(&self, key: &str) -> PoolResult<Option<Vec<u8>>> {
        self.bounded(async {
            let mut manager = self.manager().await?;
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<Vec<u8>>>(&mut manager)
                .await
                .map_err(|e| {
                    self.on_error(&e);
                    store_down(&e)
                })
        })
        .await
    }
}

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
