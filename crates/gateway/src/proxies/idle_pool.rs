//! Kept-alive upstream connections for plain HTTP, per proxy.
//!
//! Rotation picks a proxy per request, so keep-alive towards the client does not imply
//! keep-alive towards any one upstream; without reuse every request would pay a TCP (and
//! for SOCKS5 upstreams a handshake) round trip. Each proxy's slot keeps a few idle
//! connections: keyed by nothing for HTTP proxies (absolute-form requests to any origin
//! share them) and by target for SOCKS5 proxies (the tunnel leads to one origin), and by
//! `https://host:port` for the TLS connections to an origin of inspected requests, through
//! a proxy of any protocol.
//!
//! The pool is sharded by I/O thread ([`current`], set by each I/O thread of `crate::inbound::io_threads`): a connection's
//! hyper task runs on the thread that opened it, so it is only handed to requests on that
//! thread, and a response on one thread never wakes another. The cap applies per shard.

use crate::proxies::request_body::CountingBody;
use hyper::client::conn::http1::SendRequest;
use proxypool_core::LockExt;
use std::cell::Cell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

thread_local! {
    /// The index of the I/O thread running here; `0` on any other thread.
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The index of the I/O thread the caller runs on (`0` off the I/O threads): selects the
/// upstream pool shard a connection is taken from and returned to.
pub(crate) fn current() -> usize {
    INDEX.with(Cell::get)
}

/// Makes the calling thread count as I/O thread `index` (set once by each I/O thread).
pub(crate) fn set_current(index: usize) {
    INDEX.with(|cell| cell.set(index));
}

/// What an idle connection can be reused for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PoolKey {
    /// An HTTP proxy connection: any absolute-form request.
    Proxy,
    /// A tunnel through a SOCKS5 proxy to this `host:port`, or TLS to an origin through
    /// any proxy's tunnel, as `https://host:port`.
    Target(String),
}

#[derive(Debug)]
struct Idle {
    key: PoolKey,
    sender: SendRequest<CountingBody>,
    since: Instant,
}

/// The idle connections of one proxy, one shard per I/O thread.
#[derive(Debug)]
pub(crate) struct IdlePool {
    shards: Box<[Mutex<Vec<Idle>>]>,
}

impl Default for IdlePool {
    fn default() -> Self {
        Self::with_shards(1)
    }
}

impl IdlePool {
    pub(crate) fn with_shards(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1)).map(|_| Mutex::default()).collect(),
        }
    }

    /// The calling thread's shard.
    fn shard(&self) -> &Mutex<Vec<Idle>> {
        &self.shards[current() % self.shards.len()]
    }

    /// The most recently returned live connection for `key`, not older than `max_idle`.
    pub(crate) fn take(
        &self,
        key: &PoolKey,
        max_idle: Duration,
    ) -> Option<SendRequest<CountingBody>> {
        // One clock read for the whole shard, not one per idle connection.
        let now = Instant::now();
        let mut idle = self.shard().lock_or_recover();
        // Expired and closed ones go first: they can never be used.
        idle.retain(|conn| {
            now.saturating_duration_since(conn.since) < max_idle && !conn.sender.is_closed()
        });
        let position = idle.iter().rposition(|conn| conn.key == *key)?;
        Some(idle.remove(position).sender)
    }

    /// Drops every idle connection (the proxy's lease is gone).
    pub(crate) fn clear(&self) {
        for shard in &self.shards {
            shard.lock_or_recover().clear();
        }
    }

    /// Returns a connection that finished a response; the oldest goes beyond `cap`.
    pub(crate) fn put(&self, key: PoolKey, sender: SendRequest<CountingBody>, cap: usize) {
        if cap == 0 || sender.is_closed() {
            return;
        }
        let mut idle = self.shard().lock_or_recover();
        if idle.len() >= cap {
            idle.remove(0);
        }
        idle.push(Idle {
            key,
            sender,
            since: Instant::now(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::client::conn::http1 as client_http1;
    use hyper_util::rt::TokioIo;

    /// A live client connection over an in-memory pipe (its peer kept open).
    async fn sender() -> (SendRequest<CountingBody>, tokio::io::DuplexStream) {
        let (near, far) = tokio::io::duplex(1024);
        let (sender, connection) = client_http1::handshake::<_, CountingBody>(TokioIo::new(near))
            .await
            .unwrap();
        tokio::spawn(connection);
        (sender, far)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_is_taken_only_on_the_thread_that_returned_it() {
        let pool = IdlePool::with_shards(2);
        let max_idle = Duration::from_secs(60);
        let (first, _first_peer) = sender().await;
        set_current(1);
        pool.put(PoolKey::Proxy, first, 4);
        set_current(0);
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_none());
        set_current(1);
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_some());
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_none());

        // The cap is per thread: a full shard does not push out another thread's.
        let (second, _second_peer) = sender().await;
        let (third, _third_peer) = sender().await;
        set_current(0);
        pool.put(PoolKey::Proxy, second, 1);
        set_current(1);
        pool.put(PoolKey::Proxy, third, 1);
        set_current(0);
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_some());
        set_current(1);
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_some());

        // Clearing (the lease went) empties every shard.
        let (fourth, _fourth_peer) = sender().await;
        pool.put(PoolKey::Proxy, fourth, 4);
        set_current(0);
        pool.clear();
        set_current(1);
        assert!(pool.take(&PoolKey::Proxy, max_idle).is_none());
        set_current(0);
    }
}
