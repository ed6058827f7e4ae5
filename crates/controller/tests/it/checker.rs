//! The health checker through real proxies (simulated upstreams) to a real origin:
//! alive, dead, slow, wrong credentials, bad status; HTTP absolute-form, CONNECT and SOCKS5.

use crate::common::*;
use proxypool_controller::ManualClock;
use proxypool_controller::checker::Checker;
use proxypool_core::{
    Candidate, CheckOutcome, Credentials, FetchedBatch, HealthStore, Protocol, ProxyId,
    ProxyStatus, Upserter, UpstreamId,
};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const USER: &str = "checker-user";
const PASS: &str = "checker-pass";

async fn proxy(
    kind: ProxyKind,
    exit: u8,
    configure: impl FnOnce(&mut UpstreamProxyConfig),
) -> UpstreamProxy {
    let mut config = UpstreamProxyConfig {
        kind,
        exit_ip: Ipv4Addr::new(127, 0, 0, exit),
        credentials: Some((USER.into(), PASS.into())),
        ..UpstreamProxyConfig::default()
    };
    configure(&mut config);
    UpstreamProxy::start(config).await.unwrap()
}

fn upstream(id: &str, target: &str, via: &str) -> String {
    format!(
        r#"
[[upstreams]]
id = "{id}"
ttl = "10m"
max_size = 100
[upstreams.provider]
kind = "static"
proxies = ["127.0.0.1:1"]
[upstreams.health]
via = "{via}"
unhealthy_after = 2
max_latency = "400ms"
[[upstreams.health.targets]]
url = "{target}"
expect_status = 200
"#
    )
}

async fn insert(
    pool: &MemoryPool,
    now: u64,
    upstream: &str,
    entries: &[(&UpstreamProxy, Protocol, &str)],
) -> Vec<ProxyId> {
    let candidates = entries
        .iter()
        .map(|(proxy, protocol, password)| {
            let mut c = Candidate::new(*protocol, "127.0.0.1", proxy.addr().port());
            c.credentials = Some(Credentials::new(USER, *password));
            c
        })
        .collect::<Vec<_>>();
    pool.upsert(
        now,
        FetchedBatch {
            upstream: UpstreamId::new(upstream).unwrap(),
            operation_id: None,
            ttl_ms: 600_000,
            safety_margin_ms: 0,
            max_size: 100,
            default_max_sessions: 4,
            candidates,
        },
    )
    .await
    .unwrap();
    entries
        .iter()
        .map(|(proxy, protocol, _)| {
            proxypool_core::proxy_id_for(*protocol, "127.0.0.1", proxy.addr().port(), Some(USER))
        })
        .collect()
}

#[tokio::test]
async fn classifies_alive_dead_slow_and_refused_proxies() {
    let origin = Origin::start().await.unwrap();
    let ok_target = origin.url("/health");
    let teapot_target = origin.url("/status/418");

    let http_ok = proxy(ProxyKind::Http, 11, |_| {}).await;
    let socks_ok = proxy(ProxyKind::Socks5, 12, |_| {}).await;
    let http_dead = proxy(ProxyKind::Http, 13, |c| c.dead = true).await;
    let socks_slow = proxy(ProxyKind::Socks5, 14, |c| {
        c.latency = Duration::from_millis(500)
    })
    .await;
    let http_stuck = proxy(ProxyKind::Http, 15, |c| c.latency = Duration::from_secs(5)).await;
    let http_wrong_pass = proxy(ProxyKind::Http, 16, |_| {}).await;
    let socks_wrong_pass = proxy(ProxyKind::Socks5, 17, |_| {}).await;
    let connect_ok = proxy(ProxyKind::Http, 18, |_| {}).await;
    let bad_status = proxy(ProxyKind::Http, 19, |_| {}).await;

    let text = config_text(&format!(
        "[checker]\ntimeout = \"1500ms\"\nconcurrency = 4\n{}{}{}",
        upstream("absolute", &ok_target, "absolute"),
        upstream("tunnel", &ok_target, "connect"),
        upstream("teapot", &teapot_target, "absolute"),
    ));
    let config = parse_config(&text);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let clock = ManualClock::new(T0);
    let checker = Checker::new(
        pool.clone(),
        clock.clone(),
        config.checker.clone(),
        &config.upstreams,
    );

    let absolute = insert(
        &pool,
        T0,
        "absolute",
        &[
            (&http_ok, Protocol::Http, PASS),
            (&socks_ok, Protocol::Socks5, PASS),
            (&http_dead, Protocol::Http, PASS),
            (&socks_slow, Protocol::Socks5, PASS),
            (&http_stuck, Protocol::Http, PASS),
            (&http_wrong_pass, Protocol::Http, "wrong"),
            (&socks_wrong_pass, Protocol::Socks5, "wrong"),
        ],
    )
    .await;
    let tunnel = insert(&pool, T0, "tunnel", &[(&connect_ok, Protocol::Http, PASS)]).await;
    let teapot = insert(&pool, T0, "teapot", &[(&bad_status, Protocol::Http, PASS)]).await;
    // A port nobody listens on.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut c = Candidate::new(Protocol::Http, "127.0.0.1", port);
        c.credentials = Some(Credentials::new(USER, PASS));
        pool.upsert(
            T0,
            FetchedBatch {
                upstream: UpstreamId::new("absolute").unwrap(),
                operation_id: None,
                ttl_ms: 600_000,
                safety_margin_ms: 0,
                max_size: 100,
                default_max_sessions: 4,
                candidates: vec![c],
            },
        )
        .await
        .unwrap();
        proxypool_core::proxy_id_for(Protocol::Http, "127.0.0.1", port, Some(USER))
    };

    let started = std::time::Instant::now();
    let round = checker.check_round().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "checks ran concurrently under the timeout"
    );
    let seen: Vec<&ProxyId> = round.observations.iter().map(|o| &o.proxy_id).collect();
    for (name, id) in [
        ("closed", &closed),
        ("tunnel", &tunnel[0]),
        ("teapot", &teapot[0]),
    ]
    .into_iter()
    .chain(absolute.iter().map(|id| ("absolute", id)))
    {
        assert!(seen.contains(&id), "{name} {id} was not checked");
    }
    assert_eq!(round.observations.len(), 10);
    assert_eq!(round.applied, 10);
    let outcome: HashMap<ProxyId, CheckOutcome> = round
        .observations
        .iter()
        .map(|o| (o.proxy_id.clone(), o.outcome.clone()))
        .collect();
    let kind = |id: &ProxyId| match &outcome[id] {
        CheckOutcome::Success { .. } => "ok".to_owned(),
        CheckOutcome::Failure { error } => error.clone(),
    };
    assert_eq!(kind(&absolute[0]), "ok", "http absolute-form");
    assert_eq!(kind(&absolute[1]), "ok", "socks5");
    assert_eq!(
        kind(&absolute[2]),
        "protocol",
        "dead: accepts, then hangs up"
    );
    assert_eq!(kind(&absolute[3]), "slow");
    assert_eq!(kind(&absolute[4]), "timeout");
    assert_eq!(kind(&absolute[5]), "auth", "http: 407");
    assert_eq!(kind(&absolute[6]), "auth", "socks5: authentication refused");
    assert_eq!(kind(&tunnel[0]), "ok", "CONNECT tunnel");
    assert_eq!(kind(&teapot[0]), "status");
    assert_eq!(kind(&closed), "connect");
    if let CheckOutcome::Success { latency_ms } = outcome[&absolute[0]] {
        assert!(latency_ms < 400);
    }
    // The requests really went through the proxies' exits.
    assert!(origin.requests() >= 3);
    assert!(http_ok.stats().requests + socks_ok.stats().tunnels >= 2);

    // Statuses: success = AVAILABLE, first failure = SUSPECT, the second = UNHEALTHY.
    let status = |pool: Arc<MemoryPool>, id: ProxyId| async move {
        // recheck_after 0: every live record, whatever its status, is listed.
        pool.due_for_check(
            T0 + 100_000,
            proxypool_core::DueQuery {
                limit: 100,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.id == id)
        .map(|r| r.status)
    };
    assert_eq!(
        status(pool.clone(), absolute[0].clone()).await,
        Some(ProxyStatus::Available)
    );
    assert_eq!(
        status(pool.clone(), absolute[2].clone()).await,
        Some(ProxyStatus::Suspect)
    );

    // Suspects are due again at once; a second failure makes them UNHEALTHY, and healthy
    // proxies are not re-checked before their interval.
    clock.advance(1_000);
    let round = checker.check_round().await.unwrap();
    assert!(round.observations.iter().all(|o| o.proxy_id != absolute[0]));
    assert_eq!(
        status(pool.clone(), absolute[2].clone()).await,
        Some(ProxyStatus::Unhealthy)
    );

    // Revived: after the re-check interval it is AVAILABLE again.
    http_dead.set_dead(false);
    clock.advance(60_000);
    checker.check_round().await.unwrap();
    assert_eq!(
        status(pool.clone(), absolute[2].clone()).await,
        Some(ProxyStatus::Available)
    );
}

#[tokio::test]
async fn a_proxy_whose_name_resolves_inside_is_not_dialed_when_internal_hosts_are_refused() {
    use proxypool_controller::checker::probe::{ProbePlan, probe};
    use proxypool_controller::config::{HttpCheckMode, TargetUrl};
    let Some(name) = internal_hostname().await else {
        return;
    };
    // A canary on every local address: whatever the name resolves to, a dial lands here.
    let canary = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = canary.local_addr().unwrap().port();
    let pool = MemoryPool::new(MemoryPoolOptions::default());
    let mut candidate = Candidate::new(Protocol::Http, name.as_str(), port);
    candidate.credentials = Some(Credentials::new(USER, PASS));
    pool.upsert(
        T0,
        FetchedBatch {
            upstream: UpstreamId::new("fetched").unwrap(),
            operation_id: None,
            ttl_ms: 600_000,
            safety_margin_ms: 0,
            max_size: 100,
            default_max_sessions: 4,
            candidates: vec![candidate],
        },
    )
    .await
    .unwrap();
    let record = pool
        .due_for_check(
            T0,
            proxypool_core::DueQuery {
                limit: 10,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap()
        .remove(0);
    let plan = ProbePlan {
        targets: vec![(TargetUrl::parse("http://203.0.113.9/").unwrap(), 200)],
        via: HttpCheckMode::Absolute,
        max_latency: None,
        refuse_internal: true,
        proxy_tls: proxypool_edge::ProxyTrust::of(None),
        target_tls: Ok(proxypool_edge::ClientTls::public_roots()),
    };
    let outcome = probe(&record, &plan, Duration::from_secs(2)).await;
    assert_eq!(
        outcome,
        CheckOutcome::Failure {
            error: "dns".into()
        }
    );
    let dialed = tokio::time::timeout(Duration::from_millis(300), canary.accept()).await;
    assert!(dialed.is_err(), "the checker connected to {name}");
    // Where internal hosts are allowed (a static list, `allow_private_hosts`), the same
    // record is dialed: the canary sees it.
    let plan = plan.refusing_internal(false);
    let (_, accepted) = tokio::join!(
        probe(&record, &plan, Duration::from_millis(500)),
        tokio::time::timeout(Duration::from_secs(2), canary.accept())
    );
    assert!(accepted.is_ok(), "the canary saw no dial when allowed");
}

/// A rustls server configuration with a certificate of `ca` for 127.0.0.1 and localhost.
fn tls_server(ca: &proxypool_testkit::TestCa, stem: &str) -> Arc<rustls::ServerConfig> {
    let files = ca.server(stem).unwrap();
    proxypool_edge::ServerTls::load(proxypool_edge::ServerTlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap()
    .current()
}

/// An upstream whose proxies are checked against `target`, with optional TLS settings.
fn tls_upstream(
    id: &str,
    target: &str,
    proxy_ca: Option<&Path>,
    target_ca: Option<&Path>,
) -> String {
    let mut text = upstream(id, target, "absolute");
    if let Some(ca) = target_ca {
        text = text.replace(
            "[upstreams.health]\n",
            &format!("[upstreams.health]\nca = \"{}\"\n", ca.display()),
        );
    }
    if let Some(ca) = proxy_ca {
        text.push_str(&format!(
            "[upstreams.proxy_tls]\nca = \"{}\"\n",
            ca.display()
        ));
    }
    text
}

#[tokio::test]
async fn https_proxies_and_https_targets_are_checked_over_verified_tls() {
    let vendor_ca = proxypool_testkit::TestCa::new("vendor ca").unwrap();
    let other_ca = proxypool_testkit::TestCa::new("someone else").unwrap();
    let site_ca = proxypool_testkit::TestCa::new("site ca").unwrap();
    let origin = Origin::start().await.unwrap();
    let site = Origin::start_tls(tls_server(&site_ca, "site"))
        .await
        .unwrap();
    let plain_target = origin.url("/health");
    let https_target = site.url("/health");
    assert!(https_target.starts_with("https://"), "{https_target}");
    // One proxy per upstream: a record belongs to the upstream that listed it.
    let mut https_proxies = Vec::new();
    for exit in [21, 22, 23] {
        https_proxies.push(
            proxy(ProxyKind::Http, exit, |c| {
                c.tls = Some(tls_server(&vendor_ca, &format!("proxy-{exit}")));
            })
            .await,
        );
    }
    let plain_proxies = [
        proxy(ProxyKind::Http, 24, |_| {}).await,
        proxy(ProxyKind::Http, 25, |_| {}).await,
    ];

    let text = config_text(&format!(
        "[checker]\ntimeout = \"1500ms\"\nconcurrency = 4\n{}{}{}{}{}",
        tls_upstream("proxy_ok", &plain_target, Some(vendor_ca.ca_path()), None),
        tls_upstream(
            "proxy_other_ca",
            &plain_target,
            Some(other_ca.ca_path()),
            None
        ),
        tls_upstream("site_ok", &https_target, None, Some(site_ca.ca_path())),
        tls_upstream("site_untrusted", &https_target, None, None),
        tls_upstream(
            "both",
            &https_target,
            Some(vendor_ca.ca_path()),
            Some(site_ca.ca_path())
        ),
    ));
    let config = parse_config(&text);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let checker = Checker::new(
        pool.clone(),
        ManualClock::new(T0),
        config.checker.clone(),
        &config.upstreams,
    );
    let mut ids = Vec::new();
    for (upstream, proxy, protocol) in [
        ("proxy_ok", &https_proxies[0], Protocol::Https),
        ("proxy_other_ca", &https_proxies[1], Protocol::Https),
        ("site_ok", &plain_proxies[0], Protocol::Http),
        ("site_untrusted", &plain_proxies[1], Protocol::Http),
        ("both", &https_proxies[2], Protocol::Https),
    ] {
        let id = insert(&pool, T0, upstream, &[(proxy, protocol, PASS)]).await;
        let round = checker.check_round().await.unwrap();
        let outcome = round
            .observations
            .iter()
            .find(|o| o.proxy_id == id[0])
            .map(|o| o.outcome.clone())
            .unwrap_or_else(|| panic!("{upstream} was checked: {round:?}"));
        ids.push((upstream, outcome));
    }
    let kinds: Vec<(&str, String)> = ids
        .into_iter()
        .map(|(upstream, outcome)| {
            let kind = match outcome {
                CheckOutcome::Success { .. } => "ok".to_owned(),
                CheckOutcome::Failure { error } => error,
            };
            (upstream, kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("proxy_ok", "ok".to_owned()),
            ("proxy_other_ca", "proxy_tls".to_owned()),
            ("site_ok", "ok".to_owned()),
            ("site_untrusted", "target_tls".to_owned()),
            ("both", "ok".to_owned()),
        ]
    );
    // The https target was reached through the proxies' tunnels, from their exits.
    assert!(site.requests() >= 2, "{}", site.requests());
    assert_eq!(
        https_proxies[1].stats().tunnels,
        0,
        "no tunnel without trusted TLS"
    );
    assert!(https_proxies[2].stats().tunnels >= 1);
}

/// A record of `protocol` at `port` with the test credentials (`password`), as the store
/// hands it to the checker.
async fn record_at(protocol: Protocol, port: u16, password: &str) -> proxypool_core::ProxyRecord {
    let pool = MemoryPool::new(MemoryPoolOptions::default());
    let mut candidate = Candidate::new(protocol, "127.0.0.1", port);
    candidate.credentials = Some(Credentials::new(USER, password));
    pool.upsert(
        T0,
        FetchedBatch {
            upstream: UpstreamId::new("causes").unwrap(),
            operation_id: None,
            ttl_ms: 600_000,
            safety_margin_ms: 0,
            max_size: 100,
            default_max_sessions: 4,
            candidates: vec![candidate],
        },
    )
    .await
    .unwrap();
    let query = proxypool_core::DueQuery {
        limit: 1,
        recheck_after_ms: 0,
    };
    pool.due_for_check(T0, query).await.unwrap().remove(0)
}

#[tokio::test]
async fn a_failed_check_has_a_bounded_reason_and_a_cause_without_credentials() {
    use proxypool_controller::checker::probe::{ProbePlan, check};
    use proxypool_controller::config::{HttpCheckMode, TargetUrl};
    use proxypool_core::CheckFailure;
    let secret = "s3cret-pass-do-not-log";
    let origin = Origin::start().await.unwrap();
    let plan = ProbePlan {
        targets: vec![(TargetUrl::parse(&origin.url("/health")).unwrap(), 200)],
        via: HttpCheckMode::Absolute,
        max_latency: None,
        refuse_internal: false,
        proxy_tls: proxypool_edge::ProxyTrust::of(None),
        target_tls: Ok(proxypool_edge::ClientTls::public_roots()),
    };
    let timeout = Duration::from_millis(1500);
    let vendor_ca = proxypool_testkit::TestCa::new("vendor ca").unwrap();
    let untrusted = proxy(ProxyKind::Http, 31, |c| {
        c.credentials = Some((USER.into(), secret.into()));
        c.tls = Some(tls_server(&vendor_ca, "proxy-31"));
    })
    .await;
    let wrong_pass = proxy(ProxyKind::Socks5, 32, |_| {}).await;
    let stuck = proxy(ProxyKind::Http, 33, |c| {
        c.credentials = Some((USER.into(), secret.into()));
        c.latency = Duration::from_secs(5);
    })
    .await;
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };

    let cases = [
        (
            record_at(Protocol::Https, untrusted.addr().port(), secret).await,
            CheckFailure::ProxyTls,
            "certificate",
        ),
        (
            record_at(Protocol::Socks5, wrong_pass.addr().port(), secret).await,
            CheckFailure::Auth,
            "authentication rejected",
        ),
        (
            record_at(Protocol::Http, stuck.addr().port(), secret).await,
            CheckFailure::Timeout,
            "while waiting for the target's answer",
        ),
        (
            record_at(Protocol::Http, closed, secret).await,
            CheckFailure::Connect,
            "refused",
        ),
    ];
    for (record, reason, says) in cases {
        let failed = check(&record, &plan, timeout).await.unwrap_err();
        eprintln!("{}: {}", failed.reason, failed.cause);
        assert_eq!(failed.reason, reason, "{failed:?}");
        assert!(
            failed.cause.to_lowercase().contains(says),
            "{reason}: {}",
            failed.cause
        );
        assert!(
            !failed.cause.contains(secret) && !failed.cause.contains(USER),
            "{reason}: {}",
            failed.cause
        );
    }
    assert_eq!(
        untrusted.stats().tunnels,
        0,
        "nothing past a failed handshake"
    );
}
