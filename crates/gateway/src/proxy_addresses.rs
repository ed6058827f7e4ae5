//! [`ProxyAddresses`]: the addresses each upstream proxy is dialed at, so the gateway
//! connects only to an address it judged.
//!
//! A proxy's host name is resolved off the hot path ([`keep_fresh`]: when a snapshot
//! brings a name, then every `refresh_every`), and the answer is kept; a dial reads the
//! kept answer (one lock-free load) and connects only to those addresses. For a proxy
//! whose upstream the snapshot marks `refuse_internal` (a fetched list without
//! `allow_private_hosts`, as the checker is told), any address the one internal-address
//! rule refuses (`proxypool_core::is_internal_address`: loopback, private, link-local,
//! CGNAT, unspecified, IPv4-mapped and NAT64 forms judged as the IPv4 address they reach)
//! means the proxy is not dialed at all, as the checker would not dial it: the dial fails
//! as the proxy's fault (`proxy_internal_address`), so the request goes to another proxy
//! or gets the usual refusal, and it is logged once per (proxy, address). A name whose
//! answer changes after the check to `169.254.169.254` is therefore never connected to
//! there, whatever the resolver says between two lookups: the address judged is the
//! address dialed, in the canonical form both see (`proxypool_core::dial_ip`).
//!
//! Only a name no answer is kept for yet (a proxy dialed before the refresher reached it,
//! or whose name stopped resolving) is resolved inline, under the dial's connect timeout,
//! as every dial of a name was before; a kept-alive upstream connection dials nothing and
//! resolves nothing. An answer a later lookup cannot renew is kept for [`MAX_STALE`], then
//! dropped. Resolution is behind [`ProxyResolver`] so tests answer with what they choose.

use crate::snapshot::{SnapshotStore, SnapshotView, ViewProxy};
use arc_swap::ArcSwap;
use proxypool_core::{IpNet, LockExt, ProxyId, block_contains, dial_ip, is_internal_address};
use proxypool_proto::TargetAddr;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

/// How often every listed name is resolved again, by default.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);

/// How long an answer that later lookups cannot renew is still dialed.
pub const MAX_STALE: Duration = Duration::from_secs(300);

/// One lookup in the background, at most.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Background lookups at once.
const CONCURRENT_LOOKUPS: usize = 16;

/// (proxy, address) refusals remembered so each is logged once; past this the memory
/// starts over, so a flood of names cannot grow it.
const MAX_LOGGED_REFUSALS: usize = 4_096;

/// A lookup in progress.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Resolves proxy host names to addresses.
pub trait ProxyResolver: Send + Sync + fmt::Debug {
    /// The addresses `host` resolves to now, in the order to try them.
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a>;
}

/// The operating system's resolver (`getaddrinfo`, on tokio's blocking pool).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl ProxyResolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let found = tokio::net::lookup_host((host, 0)).await?;
            Ok(found.map(|addr| addr.ip()).collect())
        })
    }
}

/// How a gateway resolves its proxies' host names.
#[derive(Debug, Clone)]
pub struct ProxyResolution {
    pub resolver: Arc<dyn ProxyResolver>,
    /// How often every listed name is resolved again ([`DEFAULT_REFRESH`]).
    pub refresh_every: Duration,
    /// Blocks the internal-address rule lets through for this gateway alone, so a test
    /// can stand a public proxy in on a loopback address. Configuration never sets it:
    /// an operator's exception is the upstream's `allow_private_hosts`.
    pub treated_as_public: Vec<IpNet>,
}

impl Default for ProxyResolution {
    fn default() -> Self {
        ProxyResolution {
            resolver: Arc::new(SystemResolver),
            refresh_every: DEFAULT_REFRESH,
            treated_as_public: Vec::new(),
        }
    }
}

/// Why a proxy is not dialed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotDialed {
    /// Its name resolves to no address.
    Unresolved,
    /// An address of it is internal and its upstream refuses those.
    Internal,
}

impl NotDialed {
    /// The failure reason (`proxypool_gateway_upstream_failures_total{reason}`).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            NotDialed::Unresolved => "proxy_dns_error",
            NotDialed::Internal => "proxy_internal_address",
        }
    }
}

/// The addresses one dial may connect to, in order, with the port.
#[derive(Debug, Clone)]
pub(crate) struct DialTargets {
    ips: Ips,
    port: u16,
}

#[derive(Debug, Clone)]
enum Ips {
    /// An address literal: nothing to resolve, nothing to allocate.
    One(IpAddr),
    Resolved(Arc<[IpAddr]>),
}

impl DialTargets {
    fn ips(&self) -> &[IpAddr] {
        match &self.ips {
            Ips::One(ip) => std::slice::from_ref(ip),
            Ips::Resolved(ips) => ips,
        }
    }

    /// The socket addresses to try, in order.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.ips().iter().map(|ip| SocketAddr::new(*ip, self.port))
    }
}

/// A kept answer.
#[derive(Debug, Clone)]
struct Answer {
    /// Canonical, distinct, never empty.
    ips: Arc<[IpAddr]>,
    resolved_at: Instant,
}

/// The kept answers of the listed names, and the refusals already logged.
#[derive(Debug)]
pub(crate) struct ProxyAddresses {
    resolution: ProxyResolution,
    /// Replaced whole by each refresh; read without a lock by every dial of a name.
    answers: ArcSwap<HashMap<Box<str>, Answer>>,
    logged: Mutex<HashSet<(ProxyId, IpAddr)>>,
}

impl ProxyAddresses {
    pub(crate) fn new(resolution: ProxyResolution) -> Self {
        ProxyAddresses {
            resolution,
            answers: ArcSwap::default(),
            logged: Mutex::default(),
        }
    }

    /// Where `proxy` may be dialed: its address literal or its name's kept answer (looked
    /// up now when none is kept), unless its upstream refuses internal addresses and one
    /// of them is internal. The caller bounds the time (the dial's connect timeout).
    pub(crate) async fn to_dial(&self, proxy: &ViewProxy) -> Result<DialTargets, NotDialed> {
        let targets = match &proxy.address {
            TargetAddr::Ip(addr) => DialTargets {
                ips: Ips::One(dial_ip(addr.ip())),
                port: addr.port(),
            },
            TargetAddr::Domain(host, port) => DialTargets {
                ips: Ips::Resolved(self.answer(host).await?),
                port: *port,
            },
        };
        if proxy.refuse_internal
            && let Some(inside) = targets.ips().iter().find(|ip| self.refuses(**ip))
        {
            self.log_refusal(proxy, *inside);
            return Err(NotDialed::Internal);
        }
        Ok(targets)
    }

    /// The internal-address rule, less the blocks a test treats as public.
    fn refuses(&self, ip: IpAddr) -> bool {
        is_internal_address(ip)
            && !self
                .resolution
                .treated_as_public
                .iter()
                .any(|block| block_contains(*block, ip))
    }

    /// The kept answer for `host`, else a lookup now (kept for the next dials).
    async fn answer(&self, host: &str) -> Result<Arc<[IpAddr]>, NotDialed> {
        if let Some(answer) = self.answers.load().get(host) {
            return Ok(Arc::clone(&answer.ips));
        }
        let ips = lookup(&*self.resolution.resolver, host)
            .await
            .map_err(|_| NotDialed::Unresolved)?;
        let answer = Answer {
            ips: Arc::clone(&ips),
            resolved_at: Instant::now(),
        };
        self.answers.rcu(|current| {
            let mut next = HashMap::clone(current);
            next.insert(host.into(), answer.clone());
            next
        });
        Ok(ips)
    }

    fn log_refusal(&self, proxy: &ViewProxy, address: IpAddr) {
        let first = {
            let mut logged = self.logged.lock_or_recover();
            if logged.len() >= MAX_LOGGED_REFUSALS {
                logged.clear();
            }
            logged.insert((proxy.id.clone(), address))
        };
        if first {
            tracing::warn!(
                proxy = %proxy.id,
                upstream = %proxy.upstream,
                host = %proxy.address.host(),
                %address,
                "the proxy's host resolves to an internal address; the proxy is not dialed \
                 (its upstream is a fetched list without allow_private_hosts)"
            );
        }
    }

    /// Resolves the `listed` names: every one when `all`, else only those without a kept
    /// answer. Names no longer listed are forgotten; an answer a lookup cannot renew is
    /// kept until it is [`MAX_STALE`].
    pub(crate) async fn refresh(&self, listed: HashSet<Box<str>>, all: bool) {
        let due: Vec<Box<str>> = {
            let current = self.answers.load();
            listed
                .iter()
                .filter(|name| all || !current.contains_key(&***name))
                .cloned()
                .collect()
        };
        let fresh = lookup_all(&self.resolution.resolver, due).await;
        let now = Instant::now();
        self.answers.rcu(|current| {
            listed
                .iter()
                .filter_map(|name| {
                    let kept = match fresh.get(name) {
                        Some(ips) => Some(Answer {
                            ips: Arc::clone(ips),
                            resolved_at: now,
                        }),
                        None => current
                            .get(name)
                            .filter(|old| now.duration_since(old.resolved_at) < MAX_STALE)
                            .cloned(),
                    };
                    kept.map(|answer| (name.clone(), answer))
                })
                .collect::<HashMap<_, _>>()
        });
    }

    #[cfg(test)]
    fn kept(&self, host: &str) -> Option<Arc<[IpAddr]>> {
        self.answers.load().get(host).map(|a| Arc::clone(&a.ips))
    }
}

/// `host`'s addresses, canonical and distinct; no address is an error.
async fn lookup(resolver: &dyn ProxyResolver, host: &str) -> io::Result<Arc<[IpAddr]>> {
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in resolver.lookup(host).await? {
        let ip = dial_ip(ip);
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if ips.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the name resolves to no address",
        ));
    }
    Ok(ips.into())
}

/// The names among `names` that resolved, with their addresses; each lookup bounded.
async fn lookup_all(
    resolver: &Arc<dyn ProxyResolver>,
    names: Vec<Box<str>>,
) -> HashMap<Box<str>, Arc<[IpAddr]>> {
    let mut resolved = HashMap::new();
    let mut lookups = JoinSet::new();
    let mut names = names.into_iter();
    loop {
        while lookups.len() < CONCURRENT_LOOKUPS {
            let Some(name) = names.next() else { break };
            let resolver = Arc::clone(resolver);
            lookups.spawn(async move {
                let found = tokio::time::timeout(LOOKUP_TIMEOUT, lookup(&*resolver, &name)).await;
                (name, found)
            });
        }
        let Some(done) = lookups.join_next().await else {
            break;
        };
        match done {
            Ok((name, Ok(Ok(ips)))) => {
                resolved.insert(name, ips);
            }
            // The kept answer (if any) stays until it is too old; a dial then looks again.
            Ok((name, Ok(Err(error)))) => {
                tracing::debug!(host = %name, %error, "a proxy's host did not resolve");
            }
            Ok((name, Err(_))) => {
                tracing::debug!(host = %name, "a proxy's host did not resolve in time");
            }
            Err(_) => {}
        }
    }
    resolved
}

/// The host names of `view`'s proxies (address literals need no lookup).
fn names_of(view: &SnapshotView) -> HashSet<Box<str>> {
    view.proxies
        .iter()
        .filter_map(|proxy| match &proxy.address {
            TargetAddr::Domain(host, _) => Some(host.as_str().into()),
            TargetAddr::Ip(_) => None,
        })
        .collect()
}

/// Keeps `addresses` current for the snapshot in `store`: every listed name at start and
/// each `refresh_every`, the names a new snapshot brings at once. Runs until the store
/// goes away.
pub(crate) async fn keep_fresh(addresses: Arc<ProxyAddresses>, store: Arc<SnapshotStore>) {
    let mut swaps = store.swaps();
    let mut every = tokio::time::interval(addresses.resolution.refresh_every);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    every.tick().await;
    // A snapshot applied before this task subscribed is resolved now.
    let mut all = true;
    loop {
        let listed = store.view().map(|view| names_of(&view)).unwrap_or_default();
        addresses.refresh(listed, all).await;
        all = tokio::select! {
            _ = every.tick() => true,
            changed = swaps.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers from a table the test changes, counting lookups.
    #[derive(Debug, Default)]
    struct Table {
        answers: Mutex<HashMap<String, Vec<IpAddr>>>,
        lookups: AtomicU32,
    }

    impl Table {
        fn set(&self, host: &str, ips: &[&str]) {
            let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
            self.answers.lock_or_recover().insert(host.to_owned(), ips);
        }
    }

    impl ProxyResolver for Table {
        fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            let found = self.answers.lock_or_recover().get(host).cloned();
            Box::pin(async move {
                found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))
            })
        }
    }

    fn addresses(table: &Arc<Table>, public: &[&str]) -> ProxyAddresses {
        ProxyAddresses::new(ProxyResolution {
            resolver: Arc::clone(table) as Arc<dyn ProxyResolver>,
            refresh_every: DEFAULT_REFRESH,
            treated_as_public: public.iter().map(|b| b.parse().unwrap()).collect(),
        })
    }

    fn names(list: &[&str]) -> HashSet<Box<str>> {
        list.iter().map(|n| (*n).into()).collect()
    }

    fn ips(list: &[&str]) -> Arc<[IpAddr]> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[tokio::test]
    async fn answers_are_canonical_distinct_and_never_empty() {
        let table = Arc::new(Table::default());
        table.set(
            "mapped.test",
            &["::ffff:10.0.0.1", "10.0.0.1", "2001:db8::1"],
        );
        table.set("empty.test", &[]);
        let resolver: &dyn ProxyResolver = &*table;
        assert_eq!(
            lookup(resolver, "mapped.test").await.unwrap(),
            ips(&["10.0.0.1", "2001:db8::1"])
        );
        assert!(lookup(resolver, "empty.test").await.is_err());
        assert!(lookup(resolver, "missing.test").await.is_err());
    }

    #[tokio::test]
    async fn a_refresh_renews_listed_names_keeps_failed_ones_and_forgets_the_rest() {
        let table = Arc::new(Table::default());
        let book = addresses(&table, &[]);
        table.set("a.test", &["198.51.100.1"]);
        table.set("b.test", &["198.51.100.2"]);
        book.refresh(names(&["a.test", "b.test"]), false).await;
        assert_eq!(book.kept("a.test").unwrap(), ips(&["198.51.100.1"]));
        assert_eq!(table.lookups.load(Ordering::SeqCst), 2);

        // A new snapshot: only the names without an answer are looked up.
        book.refresh(names(&["a.test", "b.test"]), false).await;
        assert_eq!(table.lookups.load(Ordering::SeqCst), 2);

        // The periodic round looks up everything; a name that fails keeps its answer.
        table.set("a.test", &["127.0.0.1"]);
        table.answers.lock_or_recover().remove("b.test");
        book.refresh(names(&["a.test", "b.test"]), true).await;
        assert_eq!(book.kept("a.test").unwrap(), ips(&["127.0.0.1"]));
        assert_eq!(book.kept("b.test").unwrap(), ips(&["198.51.100.2"]));

        // A name no longer listed is forgotten.
        book.refresh(names(&["a.test"]), false).await;
        assert!(book.kept("b.test").is_none());
    }

    #[test]
    fn the_rule_is_cores_less_the_blocks_a_test_treats_as_public() {
        let table = Arc::new(Table::default());
        let strict = addresses(&table, &[]);
        let test = addresses(&table, &["127.0.0.1/32"]);
        for ip in ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1"] {
            assert!(strict.refuses(ip.parse().unwrap()), "{ip}");
        }
        assert!(!strict.refuses("198.51.100.1".parse().unwrap()));
        assert!(!test.refuses("127.0.0.1".parse().unwrap()));
        assert!(test.refuses("127.0.0.2".parse().unwrap()));
        assert!(test.refuses("::ffff:127.0.0.2".parse().unwrap()));
    }
}
