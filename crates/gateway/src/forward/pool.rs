//! Kept-alive upstream connections for plain HTTP, per proxy.
//!
//! Rotation picks a proxy per request, so keep-alive towards the client does not imply
//! keep-alive towards any one upstream; without reuse every request would pay a TCP (and
//! for SOCKS5 upstreams a handshake) round trip. Each proxy's slot keeps a few idle
//! connections: keyed by nothing for HTTP proxies (absolute-form requests to any origin
//! share them) and by target for SOCKS5 proxies (the tunnel leads to one origin).

use super::body::CountingBody;
use hyper::client::conn::http1::SendRequest;
use proxypool_core::LockExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What an idle connection can be reused for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PoolKey {
    /// An HTTP proxy connection: any absolute-form request.
    Proxy,
    /// A tunnel through a SOCKS5 proxy to this `host:port`.
    Target(String),
}

#[derive(Debug)]
struct Idle {
    key: PoolKey,
    sender: SendRequest<CountingBody>,
    since: Instant,
}

/// The idle connections of one proxy.
#[derive(Debug, Default)]
pub(crate) struct IdlePool {
    idle: Mutex<Vec<Idle>>,
}

impl IdlePool {
    /// The most recently returned live connection for `key`, not older than `max_idle`.
    pub(crate) fn take(
        &self,
        key: &PoolKey,
        max_idle: Duration,
    ) -> Option<SendRequest<CountingBody>> {
        let mut idle = self.idle.lock_or_recover();
        // Expired and closed ones go first: they can never be used.
        idle.retain(|conn| conn.since.elapsed() < max_idle && !conn.sender.is_closed());
        let position = idle.iter().rposition(|conn| conn.key == *key)?;
        Some(idle.remove(position).sender)
    }

    /// Drops every idle connection (the proxy's lease is gone).
    pub(crate) fn clear(&self) {
        self.idle.lock_or_recover().clear();
    }

    /// Returns a connection that finished a response; the oldest goes beyond `cap`.
    pub(crate) fn put(&self, key: PoolKey, sender: SendRequest<CountingBody>, cap: usize) {
        if cap == 0 || sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock_or_recover();
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
