//! The vendor's rotating set of upstream proxies.
//!
//! Like a residential vendor, each proxy lives a TTL and is then replaced by a new one on
//! the next free exit address. Initial lifetimes are staggered (proxy `i` of `n` lives
//! `ttl * (i + 1) / n`) so the list churns steadily instead of all at once. Rotation
//! starts replacements before it removes the old entries, so the list never runs short,
//! and no lock is held while a proxy starts.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::config::FleetConfig;
use super::listing::Listing;
use crate::exit::ExitAllocator;
use crate::upstream::{UpstreamProxy, UpstreamProxyConfig};

#[derive(Debug)]
struct Entry {
    proxy: Arc<UpstreamProxy>,
    expires_at: Option<Instant>,
    expires_at_ms: Option<u64>,
    /// When it was issued (ms since the Unix epoch): what the list says.
    issued_at_ms: u64,
    /// Chosen by a rotation in progress: not chosen again by another one.
    retiring: bool,
}

#[derive(Debug)]
struct State {
    entries: Vec<Entry>,
    exits: ExitAllocator,
    /// How many proxies were ever created: cycles kinds/regions/carriers, offsets seeds.
    created: u64,
    /// Every address a proxy of this fleet ever listened on (see [`Fleet::start_proxy`]).
    used: HashSet<SocketAddr>,
}

#[derive(Debug)]
pub(super) struct Fleet {
    config: FleetConfig,
    ttl: Option<Duration>,
    state: Mutex<State>,
    /// Proxies replaced so far: lets tests wait for a rotation instead of sleeping.
    replaced: watch::Sender<u64>,
}

/// What a rotation decided under the lock, to carry out without it.
struct Plan {
    retiring: Vec<SocketAddr>,
    configs: Vec<UpstreamProxyConfig>,
}

impl Fleet {
    pub(super) async fn start(config: FleetConfig, ttl: Option<Duration>) -> io::Result<Self> {
        let fleet = Self {
            state: Mutex::new(State {
                entries: Vec::new(),
                exits: ExitAllocator::new(config.first_exit),
                created: 0,
                used: HashSet::new(),
            }),
            config,
            ttl,
            replaced: watch::channel(0).0,
        };
        let size = fleet.config.size;
        let configs = {
            let mut state = fleet.lock();
            (0..size)
                .map(|_| fleet.next_config(&mut state))
                .collect::<Vec<_>>()
        };
        let start = Instant::now();
        let mut entries = Vec::with_capacity(size);
        for (i, config) in configs.into_iter().enumerate() {
            let proxy = fleet.start_proxy(config).await?;
            let life = fleet.ttl.map(|ttl| stagger(ttl, i, size));
            entries.push(entry(proxy, start, life));
        }
        fleet.lock().entries = entries;
        Ok(fleet)
    }

    /// Starts a proxy at an address no earlier proxy of the fleet had. The system may hand
    /// a retired proxy's port to a new listener, and with the fleet's one set of
    /// credentials that would be the same proxy again (protocol, host, port and username
    /// name a proxy), re-issued under a new issue time: a vendor that issues a proxy anew
    /// issues a new one.
    async fn start_proxy(&self, config: UpstreamProxyConfig) -> io::Result<Arc<UpstreamProxy>> {
        let mut refused = Vec::new();
        let started = loop {
            let proxy = UpstreamProxy::start(config.clone()).await?;
            if self.lock().used.insert(proxy.addr()) {
                break Ok(Arc::new(proxy));
            }
            refused.push(proxy);
            if refused.len() == 64 {
                break Err(io::Error::other("no unused port for a new proxy"));
            }
        };
        for proxy in refused {
            proxy.shutdown();
        }
        started
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The config of the next proxy to create, with a fresh exit.
    fn next_config(&self, state: &mut State) -> UpstreamProxyConfig {
        let in_use: HashSet<Ipv4Addr> = state.entries.iter().map(|e| e.proxy.exit_ip()).collect();
        let exit_ip = state.exits.allocate(&in_use);
        let n = state.created;
        state.created += 1;
        let pick = |labels: &[String]| -> Option<String> {
            let len = u64::try_from(labels.len()).ok().filter(|len| *len > 0)?;
            labels
                .get(usize::try_from(n % len).unwrap_or_default())
                .cloned()
        };
        let c = &self.config;
        let kind = match u64::try_from(c.kinds.len()) {
            Ok(len) if len > 0 => c.kinds[usize::try_from(n % len).unwrap_or_default()],
            _ => crate::ProxyKind::Http,
        };
        UpstreamProxyConfig {
            kind,
            listen_ip: c.listen_ip,
            exit_ip,
            credentials: c.credentials.clone(),
            latency: c.latency,
            failure_rate: c.failure_rate,
            seed: c.seed.wrapping_add(n),
            dead: false,
            region: pick(&c.regions),
            carrier: pick(&c.carriers),
            tls: None,
            backconnect: None,
        }
    }

    pub(super) fn proxies(&self) -> Vec<Arc<UpstreamProxy>> {
        self.lock()
            .entries
            .iter()
            .map(|e| Arc::clone(&e.proxy))
            .collect()
    }

    pub(super) fn listings(&self) -> Vec<Listing> {
        self.lock()
            .entries
            .iter()
            .map(|e| Listing::of(&e.proxy, e.expires_at_ms, e.issued_at_ms))
            .collect()
    }

    /// The earliest expiry among proxies not already being replaced.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.lock()
            .entries
            .iter()
            .filter(|e| !e.retiring)
            .filter_map(|e| e.expires_at)
            .min()
    }

    /// Replaces every proxy whose TTL ran out by `now`.
    pub(super) async fn rotate_expired(&self, now: Instant) -> io::Result<Vec<Arc<UpstreamProxy>>> {
        self.rotate(|entries| {
            entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.retiring && e.expires_at.is_some_and(|at| at <= now))
                .map(|(i, _)| i)
                .collect()
        })
        .await
    }

    /// Replaces the `count` proxies closest to expiry (oldest first without a TTL).
    pub(super) async fn rotate_oldest(&self, count: usize) -> io::Result<Vec<Arc<UpstreamProxy>>> {
        self.rotate(|entries| {
            let mut candidates: Vec<usize> = (0..entries.len())
                .filter(|&i| !entries[i].retiring)
                .collect();
            // Stable sort: without TTLs, list order (= creation order) decides.
            candidates.sort_by_key(|&i| entries[i].expires_at);
            candidates.truncate(count);
            candidates
        })
        .await
    }

    async fn rotate<F>(&self, choose: F) -> io::Result<Vec<Arc<UpstreamProxy>>>
    where
        F: FnOnce(&[Entry]) -> Vec<usize>,
    {
        let plan = {
            let mut state = self.lock();
            let chosen = choose(&state.entries);
            let mut retiring = Vec::with_capacity(chosen.len());
            for &i in &chosen {
                state.entries[i].retiring = true;
                retiring.push(state.entries[i].proxy.addr());
            }
            let configs = chosen
                .iter()
                .map(|_| self.next_config(&mut state))
                .collect();
            Plan { retiring, configs }
        };
        let mut fresh = Vec::with_capacity(plan.configs.len());
        for config in plan.configs {
            match self.start_proxy(config).await {
                Ok(proxy) => fresh.push(proxy),
                Err(err) => {
                    self.unmark(&plan.retiring);
                    return Err(err);
                }
            }
        }
        let now = Instant::now();
        let removed = {
            let mut state = self.lock();
            let (removed, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut state.entries)
                .into_iter()
                .partition(|e| plan.retiring.contains(&e.proxy.addr()));
            state.entries = kept;
            state
                .entries
                .extend(fresh.iter().map(|p| entry(Arc::clone(p), now, self.ttl)));
            removed
        };
        // The vendor retires them: they stop working even if a test still holds a handle.
        let count = u64::try_from(removed.len()).unwrap_or(u64::MAX);
        for old in removed {
            old.proxy.shutdown();
        }
        if count > 0 {
            self.replaced.send_modify(|n| *n += count);
        }
        Ok(fresh)
    }

    fn unmark(&self, addrs: &[SocketAddr]) {
        for e in self.lock().entries.iter_mut() {
            if addrs.contains(&e.proxy.addr()) {
                e.retiring = false;
            }
        }
    }

    /// Proxies replaced so far.
    pub(super) fn replaced(&self) -> u64 {
        *self.replaced.borrow()
    }

    /// Waits until at least `count` proxies were replaced in all.
    pub(super) async fn wait_replaced(&self, count: u64) {
        let mut rx = self.replaced.subscribe();
        // The sender lives as long as `self`, so this only ends by reaching the count.
        let _ = rx.wait_for(|n| *n >= count).await;
    }

    /// Stops every proxy (the vendor endpoint is going away).
    pub(super) fn shutdown_all(&self) {
        for e in &self.lock().entries {
            e.proxy.shutdown();
        }
    }
}

fn entry(proxy: Arc<UpstreamProxy>, start: Instant, life: Option<Duration>) -> Entry {
    Entry {
        proxy,
        expires_at: life.map(|life| start + life),
        expires_at_ms: life.map(unix_ms_after),
        issued_at_ms: unix_ms_after(Duration::ZERO),
        retiring: false,
    }
}

/// Lifetime of initial proxy `i` of `n`: evenly spread over `(0, ttl]`.
fn stagger(ttl: Duration, i: usize, n: usize) -> Duration {
    let n = u32::try_from(n).unwrap_or(u32::MAX).max(1);
    let i = u32::try_from(i).unwrap_or(u32::MAX - 1);
    ttl * (i + 1) / n
}

fn unix_ms_after(life: Duration) -> u64 {
    let at = SystemTime::now() + life;
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staggers_lifetimes_over_the_ttl() {
        let ttl = Duration::from_secs(30);
        let lives: Vec<Duration> = (0..3).map(|i| stagger(ttl, i, 3)).collect();
        assert_eq!(
            lives,
            [Duration::from_secs(10), Duration::from_secs(20), ttl]
        );
        assert_eq!(stagger(ttl, 0, 1), ttl);
    }
}
