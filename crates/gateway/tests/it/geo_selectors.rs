//! The geo selectors users already type, at the gateway: `-country-` (region's other
//! name), `-city-`, `-state-` and `-asn-` over plain HTTP, CONNECT and SOCKS5, matched in
//! any case and spelling the store's canonical form allows, refused clearly when a value
//! names no place, and each set of geo selectors its own sticky session. Real curl, real
//! sim upstreams, each leaving from its own 127.0.0.x exit, so the exit a sim origin
//! echoes says which proxy carried the request.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, exit_of, sim_upstream};
use crate::common::*;
use proxypool_core::GeoValues;
use proxypool_core::control::SnapshotProxy;
use proxypool_core::{
    ClientId, CooldownChange, Domain, Protocol, ProxyId, SessionFeedback, Verdict, now_millis,
};
use proxypool_proto::ProtoError;
use proxypool_proto::socks5::Reply;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// Proxy `n` leaving from exit `90 + n`.
const NEW_YORK: u8 = 1;
const BOSTON: u8 = 2;
const AUSTIN: u8 = 3;
const BERLIN: u8 = 4;

fn exit_name(n: u8) -> String {
    exit(90 + n).to_string()
}

fn located(mut proxy: SnapshotProxy, city: &str, state: Option<&str>, asn: &str) -> SnapshotProxy {
    proxy.geo = GeoValues {
        city: Some(city.to_owned()),
        state: state.map(str::to_owned),
        asn: Some(asn.to_owned()),
    };
    proxy
}

/// Four proxies as the store lists them: New York (NY, AS7922, HTTP), Boston (MA, AS7922,
/// HTTP), Austin (TX, AS3356, a SOCKS5 upstream) in the US, Berlin (no state, AS3320) in
/// Germany.
struct Pool {
    origin: Origin,
    controller: Arc<TestController>,
    gateway: Running,
    _upstreams: Vec<UpstreamProxy>,
}

impl Pool {
    async fn start() -> Self {
        let origin = Origin::start().await.unwrap();
        let mut upstreams = Vec::new();
        for (n, kind) in [
            (NEW_YORK, ProxyKind::Http),
            (BOSTON, ProxyKind::Http),
            (AUSTIN, ProxyKind::Socks5),
            (BERLIN, ProxyKind::Http),
        ] {
            upstreams.push(sim_upstream(kind, exit(90 + n)).await);
        }
        let listed = |n: u8, protocol: Protocol, region: &str| {
            proxy(
                n,
                protocol,
                upstreams[n as usize - 1].addr(),
                CREDS,
                "acme",
                region,
            )
        };
        let proxies = vec![
            located(
                listed(NEW_YORK, Protocol::Http, "us"),
                "new_york",
                Some("ny"),
                "7922",
            ),
            located(
                listed(BOSTON, Protocol::Http, "us"),
                "boston",
                Some("ma"),
                "7922",
            ),
            located(
                listed(AUSTIN, Protocol::Socks5, "us"),
                "austin",
                Some("tx"),
                "3356",
            ),
            located(listed(BERLIN, Protocol::Http, "de"), "berlin", None, "3320"),
        ];
        let controller = TestController::start(WORKER, 60_000).await;
        controller.publish(proxies, vec![client("alice")]);
        let gateway = Running::start(config(&controller)).await;
        acked(&controller, 1).await;
        Self {
            origin,
            controller,
            gateway,
            _upstreams: upstreams,
        }
    }

    /// A plain HTTP GET through the gateway as `user`.
    async fn get(&self, user: &str) -> Curl {
        curl(&[
            "-x",
            &http_proxy_url(user, self.gateway.http),
            &self.origin.url("/"),
        ])
        .await
    }

    /// The same GET through a CONNECT tunnel.
    async fn connect(&self, user: &str) -> Curl {
        curl(&[
            "-p",
            "-x",
            &http_proxy_url(user, self.gateway.http),
            &self.origin.url("/"),
        ])
        .await
    }

    /// The same GET through the SOCKS5 listener.
    async fn socks(&self, user: &str) -> Curl {
        curl(&[
            "-x",
            &socks_proxy_url(user, self.gateway.socks5),
            &self.origin.url("/"),
        ])
        .await
    }

    /// The exits `requests` GETs as `user` left from, by way of `how`; each must succeed.
    async fn exits<'a, F, Fut>(&'a self, user: &'a str, requests: usize, how: F) -> BTreeSet<String>
    where
        F: Fn(&'a Pool, &'a str) -> Fut,
        Fut: std::future::Future<Output = Curl>,
    {
        let mut seen = BTreeSet::new();
        for _ in 0..requests {
            let response = how(self, user).await;
            assert_eq!(response.status, 200, "{user}: {response:?}");
            seen.insert(exit_of(&response.body));
        }
        seen
    }
}

fn exits(proxies: &[u8]) -> BTreeSet<String> {
    proxies.iter().map(|n| exit_name(*n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_geo_selector_picks_only_its_proxies_over_plain_http() {
    let pool = Pool::start().await;
    // Round-robin over the matches: enough requests to see every one of them, and a
    // single stray pick would show.
    let cases: [(&str, &[u8]); 11] = [
        ("alice-city-new_york", &[NEW_YORK]),
        ("alice-city-New_York", &[NEW_YORK]),
        ("alice-city-new+york", &[NEW_YORK]),
        ("alice-state-MA", &[BOSTON]),
        ("alice-state-tx", &[AUSTIN]),
        ("alice-asn-AS7922", &[NEW_YORK, BOSTON]),
        ("alice-asn-3320", &[BERLIN]),
        ("alice-asn-7922-city-boston", &[BOSTON]),
        ("alice-country-DE", &[BERLIN]),
        ("alice-country-us-asn-as7922", &[NEW_YORK, BOSTON]),
        ("alice-country-US", &[NEW_YORK, BOSTON, AUSTIN]),
    ];
    for (user, expected) in cases {
        let seen = pool.exits(user, 6, Pool::get).await;
        assert_eq!(seen, exits(expected), "{user}");
    }
    // `country` is `region`: the same proxies either way.
    assert_eq!(
        pool.exits("alice-region-de", 2, Pool::get).await,
        exits(&[BERLIN])
    );

    // Nothing matches: the answer region gives today, never a wrong proxy.
    for user in [
        "alice-city-paris",
        "alice-country-de-city-boston",
        "alice-state-ny-asn-3356",
        "alice-country-fr",
    ] {
        let none = pool.get(user).await;
        assert_eq!(none.status, 503, "{user}: {none:?}");
        assert_eq!(
            none.header("x-proxypool-error"),
            Some("no_eligible_proxy"),
            "{user}"
        );
    }
    pool.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geo_selectors_pick_over_connect_and_socks5() {
    let pool = Pool::start().await;
    for (user, expected) in [
        ("alice-city-BOSTON", &[BOSTON][..]),
        ("alice-state-tx", &[AUSTIN]),
        ("alice-asn-as3320", &[BERLIN]),
        ("alice-country-us-asn-7922", &[NEW_YORK, BOSTON]),
    ] {
        let connect = pool.exits(user, 4, Pool::connect).await;
        let socks = pool.exits(user, 4, Pool::socks).await;
        assert_eq!(
            (connect, socks),
            (exits(expected), exits(expected)),
            "(CONNECT, SOCKS5) {user}"
        );
    }
    // No match over CONNECT is the same refusal; over SOCKS5 the request is refused
    // after authentication.
    let none = pool.connect("alice-city-paris").await;
    assert_eq!(none.status, 503, "{none:?}");
    let target = pool.origin.addr();
    assert_ne!(
        socks_reply(&pool.gateway, "alice-city-paris", target).await,
        Reply::Succeeded
    );
    // A bad value is refused at SOCKS5 authentication, before any request.
    let mut stream = tokio::net::TcpStream::connect(pool.gateway.socks5)
        .await
        .unwrap();
    let refused = proxypool_proto::socks5::connect(
        &mut stream,
        &proxypool_proto::TargetAddr::from(target),
        Some(("alice-asn-ASx", PASSWORD)),
    )
    .await;
    assert!(
        matches!(refused, Err(ProtoError::AuthRejected)),
        "{refused:?}"
    );
    assert_eq!(
        socks_reply(&pool.gateway, "alice-asn-AS7922", target).await,
        Reply::Succeeded
    );
    pool.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_geo_selector_is_refused_clearly_and_changes_nothing() {
    let pool = Pool::start().await;
    let cases = [
        (
            "alice-city-new.york",
            "city 'new.york' must be letters and digits",
        ),
        ("alice-state-a.b", "state 'a.b' must be letters and digits"),
        ("alice-asn-ASx", "asn 'ASx' must be a number"),
        ("alice-asn-99999999999", "must be a number"),
        (
            "alice-country-us-region-us",
            "'region' (or 'country', its other name) given twice",
        ),
        ("alice-country-de-country-de", "given twice"),
        (
            "alice-city-boston-city-austin",
            "selector 'city' given twice",
        ),
        ("alice-city", "selector 'city' has no value"),
        (
            "alice-zip-10001",
            "known: region (or country), city, state, asn, carrier",
        ),
    ];
    for (user, expected) in cases {
        for response in [pool.get(user).await, pool.connect(user).await] {
            assert_eq!(response.status, 400, "{user}: {response:?}");
            assert_eq!(
                response.header("x-proxypool-error"),
                Some("bad_selector"),
                "{user}"
            );
            if !response.body.is_empty() {
                assert!(
                    response.body.contains(expected),
                    "{user}: {}",
                    response.body
                );
            }
        }
    }
    // The refusals left the gateway as it was: the same selectors, well formed, route.
    assert_eq!(
        pool.exits("alice-city-new_york", 2, Pool::get).await,
        exits(&[NEW_YORK])
    );
    pool.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_set_of_geo_selectors_is_a_session_of_its_own() {
    let pool = Pool::start().await;
    // One session id in two cities: two sessions, each pinned in its own city, neither
    // moved by the other's requests.
    let in_ny = "alice-city-new_york-session-s1";
    let in_boston = "alice-city-boston-session-s1";
    let first_ny = pool.get(in_ny).await;
    assert_eq!(first_ny.header("x-proxypool-session"), Some("new"));
    let first_boston = pool.get(in_boston).await;
    assert_eq!(
        first_boston.header("x-proxypool-session"),
        Some("new"),
        "another session, not the New York one moved: {first_boston:?}"
    );
    for _ in 0..3 {
        let ny = pool.get(in_ny).await;
        assert_eq!(ny.header("x-proxypool-session"), Some("pinned"), "{ny:?}");
        assert_eq!(exit_of(&ny.body), exit_name(NEW_YORK));
        let boston = pool.connect(in_boston).await;
        assert_eq!(exit_of(&boston.body), exit_name(BOSTON));
        let boston = pool.get(in_boston).await;
        assert_eq!(
            boston.header("x-proxypool-session"),
            Some("pinned"),
            "{boston:?}"
        );
    }
    // The same place written another way is the same session.
    let same = pool.get("alice-session-s1-city-New+York").await;
    assert_eq!(same.header("x-proxypool-session"), Some("pinned"));
    // asn and state sessions are apart from the city ones too.
    let by_asn = pool.get("alice-asn-7922-session-s1").await;
    assert_eq!(by_asn.header("x-proxypool-session"), Some("new"));
    let by_state = pool.get("alice-state-tx-session-s1").await;
    assert_eq!(by_state.header("x-proxypool-session"), Some("new"));
    assert_eq!(exit_of(&by_state.body), exit_name(AUSTIN));

    // Client feedback names the session by its id: it reaches the proxy of every geo
    // session under that id.
    {
        let mut state = pool.controller.state.lock().unwrap();
        state.advisories.session_feedback = vec![SessionFeedback {
            project: None,
            id: "fb-geo".into(),
            client: ClientId::new("alice").unwrap(),
            session: "s1".into(),
            domain: Domain::new("127.0.0.1").unwrap(),
            verdict: Verdict::Banned,
            ttl_ms: None,
            expires_at_ms: now_millis() + 60_000,
        }];
    }
    pool.controller.bump();
    acked(&pool.controller, 2).await;
    let controller = Arc::clone(&pool.controller);
    let banned = move || -> BTreeSet<String> {
        let state = controller.state.lock().unwrap();
        state
            .reports
            .iter()
            .flat_map(|r| r.cooldowns.iter())
            .filter_map(|c| match c {
                CooldownChange::Set(entry) => Some(entry.proxy_id.as_str().to_owned()),
                _ => None,
            })
            .collect()
    };
    // The city sessions sit on New York and Boston, the state one on Austin, the asn one
    // on either of the first two.
    let expected: BTreeSet<String> = [NEW_YORK, BOSTON, AUSTIN]
        .iter()
        .map(|n| {
            ProxyId::new(format!("{n:032x}"))
                .unwrap()
                .as_str()
                .to_owned()
        })
        .collect();
    eventually(
        Duration::from_secs(10),
        "feedback on every geo session",
        || banned() == expected,
    )
    .await;
    pool.gateway.shutdown().await;
}
