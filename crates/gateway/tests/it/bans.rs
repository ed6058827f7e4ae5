//! Ban-aware routing, end to end on real sockets: curl → gateway → proxypool-sim upstream
//! proxies (each leaving from its own 127.0.0.x exit) → echo origins that answer chosen
//! exits with a ban status. Each origin listens on its own loopback address, and each IP
//! literal is a registrable domain of its own, so two origins are two sites.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::control::{GatewayClient, SnapshotProxy};
use proxypool_core::{
    Clock, CooldownChange, CooldownPolicy, Domain, DomainCooldown, ManualClock, PortSet, Protocol,
    ProxyId, SessionFeedback, Verdict, now_millis,
};
use proxypool_gateway::{DestinationPolicy, Destinations};
use proxypool_sim::{ProxyKind, UpstreamProxy};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// The exit of the `n`th upstream (1-based).
fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 20 + n)
}

fn proxy_id(n: u8) -> ProxyId {
    ProxyId::new(format!("{n:032x}")).unwrap()
}

/// `n` sim HTTP upstreams and their snapshot records (proxy `i` leaves from `exit(i)`).
async fn upstreams(n: u8) -> (Vec<UpstreamProxy>, Vec<SnapshotProxy>) {
    let mut running = Vec::new();
    let mut records = Vec::new();
    for i in 1..=n {
        let up = sim_upstream(ProxyKind::Http, exit(i)).await;
        records.push(proxy(i, Protocol::Http, up.addr(), CREDS, "acme", "us"));
        running.push(up);
    }
    (running, records)
}

struct Setup {
    controller: Arc<TestController>,
    gateway: Running,
    clock: Arc<ManualClock>,
    site_a: EchoOrigin,
    site_b: EchoOrigin,
    _upstreams: Vec<UpstreamProxy>,
}

/// A gateway over `n` upstreams on a manual clock, with site A on 127.0.0.1 and site B
/// on 127.0.0.3, both allowed by the destination policy.
async fn setup(n: u8, clients: Vec<GatewayClient>) -> Setup {
    let site_a = EchoOrigin::start_on(Ipv4Addr::new(127, 0, 0, 1)).await;
    let site_b = EchoOrigin::start_on(Ipv4Addr::new(127, 0, 0, 3)).await;
    let (running, records) = upstreams(n).await;
    let controller = TestController::start(WORKER, 600_000).await;
    let clock = ManualClock::new(now_millis());
    {
        let mut state = controller.state.lock().unwrap();
        state.session_clock = Some(Arc::clone(&clock));
        state.report_interval_ms = 100;
    }
    controller.publish(records, clients);
    let mut config = config(&controller);
    with_operator_token(&mut config);
    config.destinations = DestinationPolicy::new(&Destinations {
        allow_cidrs: vec!["127.0.0.1/32".into(), "127.0.0.3/32".into()],
        deny_cidrs: Vec::new(),
        ports: PortSet::Any,
    });
    let gateway = Running::start_with_clock(config, clock.clone()).await;
    acked(&controller, 1).await;
    Setup {
        controller,
        gateway,
        clock,
        site_a,
        site_b,
        _upstreams: running,
    }
}

impl Setup {
    async fn get(&self, user: &str, site: &EchoOrigin) -> Curl {
        curl(&["-x", &http_proxy_url(user, self.gateway.http), &site.url()]).await
    }

    /// Moves the clock on, then waits for a report to renew the session on the new time
    /// (the session's end bounds every lease).
    async fn advance(&self, ms: u64) {
        let reports = self.controller.state.lock().unwrap().reports.len();
        self.clock.advance(ms);
        eventually(Duration::from_secs(5), "a report after the jump", || {
            self.controller.state.lock().unwrap().reports.len() >= reports + 2
        })
        .await;
    }

    /// The cooldown changes the gateway's reports carried so far.
    fn reported(&self) -> Vec<CooldownChange> {
        let state = self.controller.state.lock().unwrap();
        state
            .reports
            .iter()
            .flat_map(|r| r.cooldowns.iter().cloned())
            .collect()
    }
}

fn domain(text: &str) -> Domain {
    Domain::new(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banned_exits_are_retried_elsewhere_and_kept_off_that_site_only() {
    let s = setup(8, vec![client("alice")]).await;
    // Round robin takes the proxies in turn and a retry takes the next one, so banned
    // exits that are not neighbours make every first ban cost exactly one retry.
    let banned = [2u8, 5, 8];
    for n in banned {
        s.site_a.ban(exit(n), 403);
    }

    let mut carried_by: HashMap<String, u32> = HashMap::new();
    for round in 0..24 {
        let response = s.get("alice", &s.site_a).await;
        assert_eq!(response.status, 200, "request {round} to A: {response:?}");
        let attempts: u32 = response
            .header("x-proxypool-attempts")
            .unwrap()
            .parse()
            .unwrap();
        assert!(attempts <= 2, "at most one retry: {response:?}");
        let proxy = response.header("x-proxypool-proxy").unwrap().to_owned();
        assert!(
            banned.iter().all(|n| proxy_id(*n).as_str() != proxy),
            "a banned proxy carried a success"
        );
        *carried_by.entry(proxy).or_default() += 1;
    }
    // Each banned exit was tried once (its ban), and never again while it cools down.
    for n in banned {
        assert_eq!(s.site_a.hits_from(exit(n)), 1, "exit {n} reached A again");
    }
    assert_eq!(
        carried_by.len(),
        5,
        "the five good proxies share A: {carried_by:?}"
    );

    // Site B still gets all eight.
    for _ in 0..16 {
        let response = s.get("alice", &s.site_b).await;
        assert_eq!(response.status, 200, "{response:?}");
        assert_eq!(response.header("x-proxypool-attempts"), Some("1"));
    }
    for n in 1..=8 {
        assert_eq!(s.site_b.hits_from(exit(n)), 2, "exit {n} on B");
    }

    // The bans leave with the next report, one entry per banned proxy, for A only.
    eventually(Duration::from_secs(5), "bans reported", || {
        s.reported().len() >= 3
    })
    .await;
    let mut reported: Vec<(ProxyId, String, u32)> = s
        .reported()
        .into_iter()
        .map(|change| match change {
            CooldownChange::Set(e) => (e.proxy_id, e.domain.to_string(), e.strikes),
            other => panic!("only bans were seen: {other:?}"),
        })
        .collect();
    reported.sort();
    reported.dedup();
    let expected: Vec<_> = banned
        .iter()
        .map(|n| (proxy_id(*n), "127.0.0.1".to_owned(), 1))
        .collect();
    assert_eq!(reported, expected);

    // Past the first cooldown (default 60 s) a banned proxy is tried again, banned again,
    // and now stays off twice as long.
    s.advance(61_000).await;
    for _ in 0..8 {
        let response = s.get("alice", &s.site_a).await;
        assert_eq!(response.status, 200, "{response:?}");
    }
    for n in banned {
        assert_eq!(
            s.site_a.hits_from(exit(n)),
            2,
            "exit {n} after its cooldown"
        );
    }
    s.advance(61_000).await;
    for _ in 0..8 {
        s.get("alice", &s.site_a).await;
    }
    for n in banned {
        assert_eq!(
            s.site_a.hits_from(exit(n)),
            2,
            "exit {n} in its second cooldown"
        );
    }
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_retried_and_when_everything_is_banned() {
    let quiet = GatewayClient {
        ban_statuses: Some(Vec::new()),
        ..client("quiet")
    };
    let s = setup(2, vec![client("alice"), quiet]).await;
    s.site_a.ban(exit(1), 429);

    // A client with bans switched off gets the origin's answer as it is, and bans nothing.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(s.get("quiet", &s.site_a).await.status);
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 429, 429]);

    // A request with a body is never sent twice: the 429 comes back, the ban still counts.
    let mut post = None;
    for _ in 0..2 {
        let response = curl(&[
            "-x",
            &http_proxy_url("alice", s.gateway.http),
            "-d",
            "x=1",
            &s.site_a.url(),
        ])
        .await;
        if response.status == 429 {
            post = Some(response);
            break;
        }
    }
    let post = post.expect("one of two POSTs went through the banned proxy");
    assert_eq!(post.header("x-proxypool-attempts"), Some("1"));
    assert_eq!(post.header("x-proxypool-proxy"), Some(proxy_id(1).as_str()));
    let before = s.site_a.hits_from(exit(1));
    for _ in 0..4 {
        assert_eq!(s.get("alice", &s.site_a).await.status, 200);
    }
    assert_eq!(
        s.site_a.hits_from(exit(1)),
        before,
        "cooling down after the POST's ban"
    );

    // Both proxies banned: the second is found by the retry, then nothing is left for A.
    s.site_a.ban(exit(2), 403);
    let last = s.get("alice", &s.site_a).await;
    assert_eq!(last.status, 403, "{last:?}");
    let refused = s.get("alice", &s.site_a).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(
        refused.header("x-proxypool-error"),
        Some("domain_cooling_down")
    );
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // Site B is not affected.
    assert_eq!(s.get("alice", &s.site_b).await.status, 200);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldowns_from_the_snapshot_and_session_feedback_steer_picks() {
    let s = setup(3, vec![client("alice")]).await;
    let now = s.clock.now();
    let shipped = |n: u8, site: &str| DomainCooldown {
        project: None,
        proxy_id: proxy_id(n),
        domain: domain(site),
        until_ms: now + 30_000,
        strikes: 1,
        forget_at_ms: now + 90_000,
    };
    {
        let mut state = s.controller.state.lock().unwrap();
        state.advisories.policy = Some(CooldownPolicy {
            base_ms: 10_000,
            cap_ms: 40_000,
            memory_ms: 60_000,
        });
        state.advisories.cooldowns = vec![shipped(1, "127.0.0.1"), shipped(2, "127.0.0.1")];
    }
    s.controller.bump();
    acked(&s.controller, 2).await;

    // Only proxy 3 serves A; B still gets all three.
    for _ in 0..6 {
        let response = s.get("alice", &s.site_a).await;
        assert_eq!(
            response.header("x-proxypool-proxy"),
            Some(proxy_id(3).as_str()),
            "{response:?}"
        );
    }
    for _ in 0..6 {
        s.get("alice", &s.site_b).await;
    }
    for n in 1..=3 {
        assert_eq!(s.site_b.hits_from(exit(n)), 2, "exit {n} on B");
    }

    // A CONNECT tunnel names its proxy, and avoids the cooling ones too.
    let connect = curl(&[
        "-p",
        "-x",
        &http_proxy_url("alice", s.gateway.http),
        &s.site_a.url(),
    ])
    .await;
    assert_eq!(connect.status, 200, "{connect:?}");
    assert_eq!(exit_of_echo(&connect.body), exit(3).to_string());

    // A sticky session on proxy 3: client feedback on the session bans it for A.
    let pinned = s.get("alice-session-s1", &s.site_a).await;
    assert_eq!(
        pinned.header("x-proxypool-proxy"),
        Some(proxy_id(3).as_str())
    );
    {
        let mut state = s.controller.state.lock().unwrap();
        state.advisories.session_feedback = vec![SessionFeedback {
            project: None,
            id: "fb-1".into(),
            client: proxypool_core::ClientId::new("alice").unwrap(),
            session: "s1".into(),
            domain: domain("127.0.0.1"),
            verdict: Verdict::Banned,
            ttl_ms: None,
            expires_at_ms: now + 60_000,
        }];
    }
    s.controller.bump();
    acked(&s.controller, 3).await;
    eventually(Duration::from_secs(5), "feedback reported", || {
        s.reported()
            .iter()
            .any(|c| matches!(c, CooldownChange::Set(e) if e.proxy_id == proxy_id(3)))
    })
    .await;
    let change = s
        .reported()
        .into_iter()
        .find(|c| c.proxy_id() == &proxy_id(3))
        .unwrap();
    let CooldownChange::Set(entry) = change else {
        panic!("a ban: {change:?}")
    };
    // The snapshot's policy: the first strike lasts its base.
    assert_eq!((entry.strikes, entry.until_ms), (1, s.clock.now() + 10_000));
    // Every proxy now cools down for A; B keeps the session on its proxy.
    let refused = s.get("alice-session-s1", &s.site_a).await;
    assert_eq!(
        refused.header("x-proxypool-error"),
        Some("domain_cooling_down")
    );
    let on_b = s.get("alice-session-s1", &s.site_b).await;
    assert_eq!(on_b.header("x-proxypool-session"), Some("pinned"));
    assert_eq!(on_b.header("x-proxypool-proxy"), Some(proxy_id(3).as_str()));
    // The same feedback in the next snapshot is not applied twice.
    s.controller.bump();
    acked(&s.controller, 4).await;
    let applied = s
        .reported()
        .iter()
        .filter(|c| c.proxy_id() == &proxy_id(3))
        .count();
    assert_eq!(applied, 1);
    s.gateway.shutdown().await;
}

/// The exit in an echo origin's answer.
fn exit_of_echo(body: &str) -> String {
    body.trim().to_owned()
}

/// The cooldown entries `/status` lists, as (proxy, domain).
async fn status_cooling(s: &Setup) -> Vec<(String, String)> {
    let (code, body) = admin_json(&s.gateway, "/status").await;
    assert_eq!(code, 200, "{body}");
    let mut entries: Vec<(String, String)> = body["cooldowns"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["proxy_id"].as_str().unwrap().to_owned(),
                e["domain"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    entries.sort();
    entries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooldown_the_store_cleared_or_shortened_leaves_with_the_next_snapshot() {
    let s = setup(3, vec![client("alice")]).await;
    let now = s.clock.now();
    let shipped = |n: u8, until_ms: u64| DomainCooldown {
        project: None,
        proxy_id: proxy_id(n),
        domain: domain("127.0.0.1"),
        until_ms,
        strikes: 1,
        forget_at_ms: now + 90_000,
    };
    // A poisoned cooldown: proxies 1 and 2 are kept off A by the cluster.
    s.controller.state.lock().unwrap().advisories.cooldowns =
        vec![shipped(1, now + 30_000), shipped(2, now + 30_000)];
    s.controller.bump();
    acked(&s.controller, 2).await;
    for _ in 0..3 {
        let response = s.get("alice", &s.site_a).await;
        assert_eq!(
            response.header("x-proxypool-proxy"),
            Some(proxy_id(3).as_str())
        );
    }
    let a = "127.0.0.1".to_owned();
    assert_eq!(
        status_cooling(&s).await,
        vec![
            (proxy_id(1).to_string(), a.clone()),
            (proxy_id(2).to_string(), a.clone())
        ]
    );
    // Meanwhile this gateway sees site B ban proxy 3 itself; its report is taken.
    s.site_b.ban(exit(3), 403);
    for _ in 0..3 {
        let response = s.get("alice", &s.site_b).await;
        assert_eq!(response.status, 200, "{response:?}");
    }
    eventually(Duration::from_secs(5), "the ban reported", || {
        !s.reported().is_empty()
    })
    .await;
    eventually_async(
        "no cooldown change pending",
        Duration::from_secs(5),
        async || {
            let (_, status) = admin_json(&s.gateway, "/status").await;
            (status["cooldowns"]["pending_report"] == 0).then_some(())
        },
    )
    .await;

    // The store cleared proxy 1's cooldown (a client said `ok`) and shortened proxy 2's to
    // an end already past; the next snapshot shows that (and not yet the ban of proxy 3).
    s.controller.state.lock().unwrap().advisories.cooldowns = vec![shipped(2, now)];
    s.controller.bump();
    acked(&s.controller, 3).await;
    assert_eq!(
        status_cooling(&s).await,
        vec![(proxy_id(3).to_string(), "127.0.0.3".to_owned())],
        "the cleared and the shortened are gone; the ban this gateway saw is kept"
    );
    for _ in 0..6 {
        let response = s.get("alice", &s.site_a).await;
        assert_eq!(response.status, 200, "{response:?}");
    }
    for n in 1..=2 {
        assert!(s.site_a.hits_from(exit(n)) >= 1, "exit {n} serves A again");
    }
    // Proxy 3 stays off B: the snapshot may have been built before the report landed.
    for _ in 0..4 {
        let response = s.get("alice", &s.site_b).await;
        assert_ne!(
            response.header("x-proxypool-proxy"),
            Some(proxy_id(3).as_str())
        );
    }
    s.gateway.shutdown().await;
}
