//! A proxy's host name whose answer changes between the check and the dial: the gateway
//! dials only addresses it resolved and judged, off the hot path, with a test resolver
//! whose answers the tests set. The upstream proxy is a real sim proxy on 127.0.0.1
//! (treated as public for these gateways alone, as a vendor's public proxy would be); the
//! "inside" is a listener on another loopback address, on the proxy's port, that counts
//! every connection it is offered.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::control::{SnapshotProxy, UpstreamTls};
use proxypool_core::{LockExt, Protocol, UpstreamId};
use proxypool_gateway::{Lookup, ProxyResolution, ProxyResolver};
use proxypool_proto::socks5::Reply;
use proxypool_sim::{ProxyKind, UpstreamProxy};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// The vendor's proxy, by name.
const NAME: &str = "proxy.vendor.test";

/// Where the name points once it "moves inside": loopback, which the rule refuses (only
/// 127.0.0.1 is treated as public here).
const INSIDE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 9);

/// The longest a wait on the gateway's background lookups takes.
const WAIT: Duration = Duration::from_secs(10);

const FAILED_INTERNAL: &str =
    "proxypool_gateway_upstream_failures_total{reason=\"proxy_internal_address\"}";

/// A resolver answering from a table the test changes; counts its lookups.
#[derive(Debug, Default)]
struct TestResolver {
    answers: Mutex<HashMap<String, Vec<IpAddr>>>,
    lookups: AtomicU32,
}

impl TestResolver {
    fn answer(&self, host: &str, ips: &[&str]) {
        let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
        self.answers.lock_or_recover().insert(host.to_owned(), ips);
    }

    fn lookups(&self) -> u32 {
        self.lookups.load(Ordering::SeqCst)
    }

    /// Waits until a whole lookup round has run since now: the one in flight (which may
    /// have read the old answer) and the next, which reads the current one.
    async fn passed_two_lookups(&self) {
        let seen = self.lookups();
        eventually(WAIT, "two more lookups", || self.lookups() >= seen + 2).await;
    }
}

impl ProxyResolver for TestResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let found = self.answers.lock_or_recover().get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))
        })
    }
}

/// A listener that counts the connections it accepts (and closes them).
struct Inside {
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Inside {
    async fn start(addr: SocketAddr) -> Self {
        let listener = TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| panic!("the inside listener binds {addr}: {e}"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Inside { accepted, task }
    }

    fn count(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The vendor proxy `n` of `upstream`, named [`NAME`] on `port`.
fn named(n: u8, port: u16, upstream: &str) -> SnapshotProxy {
    let mut proxy = proxy(
        n,
        Protocol::Http,
        SocketAddr::from(([127, 0, 0, 1], port)),
        CREDS,
        upstream,
        "us",
    );
    proxy.host = NAME.to_owned();
    proxy
}

/// The snapshot entry of a fetched list without `allow_private_hosts`.
fn fetched(upstream: &str) -> UpstreamTls {
    UpstreamTls {
        upstream: UpstreamId::new(upstream).unwrap(),
        ca_pem: None,
        server_name: None,
        refuse_internal: true,
    }
}

struct Setup {
    controller: Arc<TestController>,
    gateway: Running,
    resolver: Arc<TestResolver>,
    upstream: UpstreamProxy,
    origin: EchoOrigin,
}

/// A gateway over the sim proxy, published as [`NAME`] of the fetched list `vendor`,
/// whose name resolves to 127.0.0.1 (treated as public) until a test says otherwise.
async fn setup(refresh_every: Duration) -> Setup {
    let upstream = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
    let resolver = Arc::new(TestResolver::default());
    resolver.answer(NAME, &["127.0.0.1"]);
    let controller = TestController::start(WORKER, 60_000).await;
    controller.state.lock().unwrap().upstream_tls = vec![fetched("vendor")];
    controller.publish(
        vec![named(1, upstream.addr().port(), "vendor")],
        vec![client("alice")],
    );
    let settings = config(&controller);
    let resolution = ProxyResolution {
        resolver: Arc::clone(&resolver) as Arc<dyn ProxyResolver>,
        refresh_every,
        treated_as_public: vec!["127.0.0.1/32".parse().unwrap()],
    };
    let gateway =
        Running::start_with(settings, proxypool_core::SystemClock::shared(), resolution).await;
    acked(&controller, 1).await;
    Setup {
        controller,
        gateway,
        resolver,
        upstream,
        origin: EchoOrigin::start().await,
    }
}

/// A request through a CONNECT tunnel (which always dials): the CONNECT's status when the
/// tunnel is refused, the origin's when it is not.
async fn through_tunnel(setup: &Setup) -> Curl {
    curl(&[
        "-p",
        "-x",
        &http_proxy_url("alice", setup.gateway.http),
        &setup.origin.url(),
    ])
    .await
}

async fn refused_internal(gateway: &Running) -> f64 {
    metric(gateway, FAILED_INTERNAL).await.unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_moves_inside_after_the_check_is_never_dialed_there() {
    let _alone = alone().await;
    let setup = setup(Duration::from_millis(100)).await;
    let inside = Inside::start(SocketAddr::from((INSIDE, setup.upstream.addr().port()))).await;

    // At check time the name is public: served through the proxy.
    let served = through_tunnel(&setup).await;
    assert_eq!(served.status, 200, "{served:?}");
    let before = refused_internal(&setup.gateway).await;

    // Later it resolves inside, in each form that reaches 127.0.0.9: plain, IPv4-mapped,
    // and beside a public address (the checker refuses such a name whole, and so does the
    // dial).
    let inside_ip = INSIDE.to_string();
    let mapped = format!("::ffff:{INSIDE}");
    for answer in [
        vec![inside_ip.as_str()],
        vec![mapped.as_str()],
        vec!["127.0.0.1", inside_ip.as_str()],
    ] {
        setup.resolver.answer(NAME, &answer);
        setup.resolver.passed_two_lookups().await;
        let refused = through_tunnel(&setup).await;
        assert_eq!(
            inside.count(),
            0,
            "{answer:?}: the gateway connected inside"
        );
        assert!(
            matches!(refused.status, 502 | 503),
            "{answer:?}: refused, not served or hung: {refused:?}"
        );
        assert!(
            refused.header("x-proxypool-error").is_some(),
            "{answer:?}: {refused:?}"
        );
        let socks = socks_reply(&setup.gateway, "alice", setup.origin.addr).await;
        assert_ne!(socks, Reply::Succeeded, "{answer:?}: SOCKS5 is refused too");
        assert_eq!(
            inside.count(),
            0,
            "{answer:?}: the gateway connected inside"
        );
    }
    let after = refused_internal(&setup.gateway).await;
    assert!(
        after > before,
        "the refusals are counted: {before} -> {after}"
    );

    // Another proxy takes the requests: a proxy of a list the operator wrote (it may sit on
    // loopback) at an address literal.
    let mut listed = vec![named(1, setup.upstream.addr().port(), "vendor")];
    listed.push(proxy(
        2,
        Protocol::Http,
        setup.upstream.addr(),
        CREDS,
        "own",
        "us",
    ));
    setup.controller.publish(listed, vec![client("alice")]);
    acked(&setup.controller, 2).await;
    for _ in 0..4 {
        let served = through_tunnel(&setup).await;
        assert_eq!(served.status, 200, "failed over: {served:?}");
    }
    assert_eq!(inside.count(), 0, "still nothing inside");
    setup.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_answer_is_dialed_without_a_lookup_per_request() {
    // An hour between refreshes: only the snapshot's arrival looks the name up.
    let setup = setup(Duration::from_secs(3_600)).await;
    eventually(WAIT, "the name resolved once", || {
        setup.resolver.lookups() == 1
    })
    .await;
    // The name moves inside after that lookup: the gateway goes on dialing the address it
    // judged, never the one the resolver would give now.
    let inside = Inside::start(SocketAddr::from((INSIDE, setup.upstream.addr().port()))).await;
    setup.resolver.answer(NAME, &[&INSIDE.to_string()]);
    for _ in 0..5 {
        let served = through_tunnel(&setup).await;
        assert_eq!(served.status, 200, "{served:?}");
        let plain = curl(&[
            "-x",
            &http_proxy_url("alice", setup.gateway.http),
            &setup.origin.url(),
        ])
        .await;
        assert_eq!(plain.status, 200, "{plain:?}");
    }
    assert_eq!(setup.resolver.lookups(), 1, "no lookup per request");
    assert_eq!(inside.count(), 0);
    setup.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_does_not_resolve_is_refused_at_once_and_changes_nothing() {
    let setup = setup(Duration::from_millis(100)).await;
    for answer in [None, Some(&[][..])] {
        match answer {
            None => {
                setup.resolver.answers.lock_or_recover().remove(NAME);
            }
            Some(ips) => setup.resolver.answer(NAME, ips),
        }
        setup.resolver.passed_two_lookups().await;
        // The kept answer is still dialed: a resolver that fails for a while does not take
        // a proxy out, nor send it anywhere new.
        let served = through_tunnel(&setup).await;
        assert_eq!(served.status, 200, "{answer:?}: {served:?}");
    }

    // A name never resolved is refused quickly (the dial's connect timeout at most), and
    // the proxies that do resolve still serve.
    let unresolved = {
        let mut proxy = named(3, setup.upstream.addr().port(), "vendor");
        proxy.host = "never.vendor.test".to_owned();
        proxy
    };
    setup
        .controller
        .publish(vec![unresolved.clone()], vec![client("alice")]);
    acked(&setup.controller, 2).await;
    let started = std::time::Instant::now();
    let refused = through_tunnel(&setup).await;
    assert!(matches!(refused.status, 502 | 503), "{refused:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    setup.resolver.answer(NAME, &["127.0.0.1"]);
    setup.controller.publish(
        vec![unresolved, named(1, setup.upstream.addr().port(), "vendor")],
        vec![client("alice")],
    );
    acked(&setup.controller, 3).await;
    for _ in 0..3 {
        let served = through_tunnel(&setup).await;
        assert_eq!(served.status, 200, "{served:?}");
    }
    setup.gateway.shutdown().await;
}
