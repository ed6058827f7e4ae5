//! A backconnect upstream against the simulated vendor's backconnect gateway, over real
//! sockets: the reconciler keeps each group's sessions in the pool as proxies of their
//! own, the checker proves each one through the gateway, an extraction hands sessions out
//! exclusively and the next round starts as many new ones, each session keeps its exit
//! while it lives, and at the end of their lifetime every session is replaced by a new one.
//! A group's place reaches the vendor as the template's transforms write it and stays on
//! each session as its canonical geo labels.

use crate::common::*;
use proxypool_controller::ManualClock;

use proxypool_controller::checker::Checker;
use proxypool_controller::provider::{Reconciler, SessionHealth, StatusBoard, VendorClient};
use proxypool_core::{
    ClientId, DueQuery, ExtractMode, ExtractRequest, Extractor, HealthStore, ProxyFilter,
    ProxyRecord, ProxyStatus,
};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_sim::client::get_via_http_proxy;
use proxypool_sim::{BackconnectConfig, Origin, ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const LIFETIME_MS: u64 = 120_000;

async fn records(pool: &MemoryPool, now: u64) -> Vec<ProxyRecord> {
    pool.due_for_check(
        now,
        DueQuery {
            limit: 10_000,
            recheck_after_ms: 0,
        },
    )
    .await
    .unwrap()
}

/// Live records by group label (`region`), with their usernames.
fn by_region(records: &[ProxyRecord]) -> BTreeMap<String, BTreeSet<String>> {
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for record in records {
        let region = record
            .region
            .as_ref()
            .map_or("-", |r| r.as_str())
            .to_owned();
        let user = record.credentials.as_ref().unwrap().username.clone();
        groups.entry(region).or_default().insert(user);
    }
    groups
}

fn extraction(count: u32, region: &str) -> ExtractRequest {
    ExtractRequest {
        project: None,
        for_domain: None,
        client: ClientId::new("scraper").unwrap(),
        idempotency_key: None,
        request_id: format!("req-{}", proxypool_core::random::u64().unwrap()),
        count,
        mode: ExtractMode::AllOrNothing,
        filter: ProxyFilter {
            region: Some(proxypool_core::Label::new(region).unwrap()),
            ..ProxyFilter::default()
        },
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 60_000,
        key_held_ms: 0,
    }
}

/// The exit the origin saw for a request through the gateway as `username`.
async fn exit_as(gateway: &UpstreamProxy, origin: &Origin, username: &str) -> IpAddr {
    let fetched = get_via_http_proxy(
        gateway.addr(),
        Some((username, "bc-pass")),
        origin.addr(),
        "/",
    )
    .await
    .unwrap();
    assert_eq!(fetched.status, 200, "{username}: {}", fetched.text());
    fetched.echo().unwrap().exit
}

/// The username template of most tests: the simulated gateway's syntax.
const TEMPLATE: &str = "{account}[-country-{country}]-session-{session}-sesstime-{minutes}";

/// A controller configuration with one backconnect upstream on the gateway at `port`,
/// whose `username` template renders the sessions of `groups` (TOML lines of
/// `[[upstreams.provider.backconnect.sessions]]` tables).
fn upstream_text(
    port: u16,
    lifetime_ms: u64,
    margin: &str,
    target: &str,
    username: &str,
    groups: &str,
) -> String {
    config_text(&format!(
        r#"
[checker]
timeout = "2s"
[[upstreams]]
id = "resi"
ttl = "10m"
safety_margin = "{margin}"
max_size = 100
[upstreams.credentials]
username = "bc-acct"
password = {{ env = "BC_PASSWORD" }}
[upstreams.provider]
kind = "backconnect"
interval = "1s"
[upstreams.provider.backconnect]
host = "127.0.0.1"
port = {port}
username = "{username}"
session_lifetime = "{lifetime_ms}ms"
[[upstreams.health.targets]]
url = "{target}"
{groups}"#
    ))
}

/// `[[upstreams.provider.backconnect.sessions]]` tables of one country each.
fn country_groups(groups: &[(&str, u32)]) -> String {
    groups
        .iter()
        .map(|(country, count)| {
            format!(
                "[[upstreams.provider.backconnect.sessions]]\ncountry = \"{country}\"\ncount = {count}\n"
            )
        })
        .collect()
}

/// The simulated gateway and origin, a memory pool on a manual clock at `T0`, and the
/// upstream's reconciler and checker.
struct Rig {
    origin: Origin,
    gateway: UpstreamProxy,
    pool: Arc<MemoryPool>,
    clock: Arc<ManualClock>,
    reconciler: Reconciler,
    checker: Checker,
}

async fn rig(lifetime_ms: u64, groups: &[(&str, u32)]) -> Rig {
    rig_with(lifetime_ms, TEMPLATE, &country_groups(groups)).await
}

/// [`rig`] with a username template and session groups of its own.
async fn rig_with(lifetime_ms: u64, username: &str, groups: &str) -> Rig {
    let origin = Origin::start().await.unwrap();
    let gateway = backconnect_gateway().await;
    let text = upstream_text(
        gateway.addr().port(),
        lifetime_ms,
        "10s",
        &origin.url("/health"),
        username,
        groups,
    );
    let config = parse_config_env(&text, &[("BC_PASSWORD", "bc-pass")]);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let clock = ManualClock::new(T0);
    // As the controller wires them: the checker tells the keeper about failing sessions.
    let health = Arc::new(SessionHealth::default());
    let reconciler = Reconciler::new(
        Arc::new(config.upstreams[0].clone()),
        pool.clone(),
        clock.clone(),
        VendorClient::new(),
        Arc::new(StatusBoard::default()),
    )
    .with_session_health(health.clone());
    let checker = Checker::new(
        pool.clone(),
        clock.clone(),
        config.checker.clone(),
        &config.upstreams,
    )
    .with_session_health(health);
    Rig {
        origin,
        gateway,
        pool,
        clock,
        reconciler,
        checker,
    }
}

#[tokio::test]
async fn sessions_fill_the_pool_rotate_on_expiry_keep_their_exit_and_are_extracted_exclusively() {
    let Rig {
        origin,
        gateway,
        pool,
        clock,
        reconciler,
        checker,
    } = rig(LIFETIME_MS, &[("us", 3), ("de", 2)]).await;

    // The first round starts every group's sessions, each its own proxy.
    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (5, 5));
    let first = records(&pool, T0).await;
    let groups = by_region(&first);
    assert_eq!(groups["us"].len(), 3, "{groups:?}");
    assert_eq!(groups["de"].len(), 2, "{groups:?}");
    for record in &first {
        let user = &record.credentials.as_ref().unwrap().username;
        let region = record.region.as_ref().unwrap().as_str();
        assert!(
            user.starts_with(&format!("bc-acct-country-{region}-session-"))
                && user.ends_with("-sesstime-2"),
            "{user}"
        );
        let session = user
            .split("-session-")
            .nth(1)
            .and_then(|rest| rest.split('-').next())
            .unwrap();
        assert!(
            session.len() == 16 && session.chars().all(|c| c.is_ascii_hexdigit()),
            "a session id of 16 hex digits: {user}"
        );
        assert_eq!(
            record.hard_expiry_ms,
            T0 + LIFETIME_MS,
            "the session's end is its expiry"
        );
    }

    // The checker proves every session through the gateway, under its own username.
    checker.check_round().await.unwrap();
    assert!(
        records(&pool, T0)
            .await
            .iter()
            .all(|r| r.status == ProxyStatus::Available),
        "{:?}",
        records(&pool, T0).await
    );
    assert_eq!(gateway.live_sessions(), 5);

    // A session keeps its exit while it lives; the sessions do not all share one.
    let mut exits = BTreeSet::new();
    for record in &first {
        let user = &record.credentials.as_ref().unwrap().username;
        let exit = exit_as(&gateway, &origin, user).await;
        assert_eq!(exit_as(&gateway, &origin, user).await, exit, "{user}");
        exits.insert(exit);
    }
    assert!(exits.len() >= 4, "{exits:?}");

    // Two us sessions go to one client, exclusively: a second all-or-nothing request for
    // two more finds only the one left.
    let taken = pool.extract(T0 + 1_000, extraction(2, "us")).await.unwrap();
    assert_eq!(taken.response.returned, 2);
    let refused = pool.extract(T0 + 1_000, extraction(2, "us")).await;
    assert!(
        matches!(
            refused,
            Err(proxypool_core::PoolError::InsufficientInventory { matching: 1, .. })
        ),
        "all or nothing: one us session is left: {refused:?}"
    );

    // The next round keeps three us sessions nobody holds: two new ones join.
    clock.advance(1_000);
    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.extracted_ignored, 2);
    assert_eq!(outcome.report.inserted, 2);
    let second = by_region(&records(&pool, T0 + 1_000).await);
    assert_eq!(second["us"].len(), 3, "the unheld us sessions: {second:?}");
    assert_eq!(second["de"], groups["de"], "de keeps its sessions");
    let extracted: BTreeSet<String> = taken
        .response
        .proxies
        .iter()
        .map(|p| p.username.clone().unwrap())
        .collect();
    assert!(second["us"].is_disjoint(&extracted));

    // At the end of their lifetime every session is replaced (the ones started in the
    // second round end now too), and the ended ones leave the pool.
    clock.advance(LIFETIME_MS);
    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 5, "{outcome:?}");
    let now = proxypool_core::Clock::now(clock.as_ref());
    let third = records(&pool, now).await;
    let renewed = by_region(&third);
    assert_eq!((renewed["us"].len(), renewed["de"].len()), (3, 2));
    let before: BTreeSet<&String> = groups.values().chain(second.values()).flatten().collect();
    assert!(
        renewed
            .values()
            .flatten()
            .all(|user| !before.contains(user)),
        "new session ids: {renewed:?}"
    );
    assert!(third.iter().all(|r| r.hard_expiry_ms == now + LIFETIME_MS));
}

/// The simulated vendor's backconnect gateway for account `bc-acct`.
async fn backconnect_gateway() -> UpstreamProxy {
    UpstreamProxy::start(UpstreamProxyConfig {
        kind: ProxyKind::Http,
        backconnect: Some(BackconnectConfig {
            account: "bc-acct".into(),
            password: "bc-pass".into(),
            exits: (1..=8).map(|n| Ipv4Addr::new(127, 0, 2, n)).collect(),
            default_minutes: 10,
        }),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_session_retires_at_the_safety_margin_and_held_sessions_are_replaced_only_so_far() {
    // The origin and the gateway serve the checks until the end.
    let Rig {
        origin: _origin,
        gateway: _gateway,
        pool,
        clock,
        reconciler,
        checker,
    } = rig(60_000, &[("us", 1)]).await;
    // A round, then a check of what it started (so it can be handed out).
    let round = |expected_inserted: u32, what: &'static str| {
        let (reconciler, checker) = (&reconciler, &checker);
        async move {
            let outcome = reconciler.reconcile_once().await.unwrap();
            assert_eq!(
                outcome.report.inserted, expected_inserted,
                "{what}: {outcome:?}"
            );
            checker.check_round().await.unwrap();
        }
    };
    round(1, "the first session").await;
    clock.advance(49_999);
    round(0, "refreshed just before the margin").await;
    clock.advance(1);
    round(1, "retired at the margin (its end less 10s) and replaced").await;
    // Every session handed out is replaced, up to four live sessions per counted one.
    let mut handed_out = 0;
    for n in 0..6 {
        let now = proxypool_core::Clock::now(clock.as_ref());
        if pool.extract(now, extraction(1, "us")).await.is_ok() {
            handed_out += 1;
        }
        round(
            u32::from(n < 3),
            "a held session is replaced while the group has room",
        )
        .await;
    }
    assert_eq!(handed_out, 4, "four sessions live at most, all handed out");
}

#[tokio::test]
async fn a_session_whose_exit_fails_its_checks_is_replaced_before_its_end() {
    let Rig {
        origin,
        gateway: _gateway,
        pool,
        clock,
        reconciler,
        checker,
    } = rig(600_000, &[("us", 1)]).await;
    // The site refuses the gateway's first exit, which the first session gets.
    origin.ban(
        IpAddr::V4(Ipv4Addr::new(127, 0, 2, 1)),
        "127.0.0.1",
        proxypool_sim::StatusCode::FORBIDDEN,
    );
    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 1);
    let first = records(&pool, T0).await.remove(0).id;
    // Three failed checks in a row (`unhealthy_after`, by default): then the next round
    // starts a new session in its place, long before the first one would end.
    for n in 0..3 {
        clock.advance(1_000);
        checker.check_round().await.unwrap();
        let now = proxypool_core::Clock::now(clock.as_ref());
        let record = records(&pool, now).await;
        let status = record.iter().find(|r| r.id == first).unwrap().status;
        assert_ne!(status, ProxyStatus::Available, "check {n}");
        if n < 2 {
            let outcome = reconciler.reconcile_once().await.unwrap();
            assert_eq!(outcome.report.inserted, 0, "kept after {} failures", n + 1);
        }
    }
    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 1, "{outcome:?}");
    checker.check_round().await.unwrap();
    let now = proxypool_core::Clock::now(clock.as_ref());
    let available: Vec<ProxyRecord> = records(&pool, now)
        .await
        .into_iter()
        .filter(|r| r.status == ProxyStatus::Available)
        .collect();
    assert_eq!(available.len(), 1, "the new session passes its check");
    assert_ne!(available[0].id, first);
}

#[tokio::test]
async fn sessions_carry_their_groups_place_as_labels_and_the_vendor_gets_it_as_it_writes_it() {
    // The vendor's syntax through transforms: the state and city lower-case, the city's
    // words joined by `+`; the group writes the place as it is called.
    let template = "{account}[-country-{country|lower}][-state-{state|lower}][-city-{city|lower|plus}][-asn-{asn}]-session-{session}-sesstime-{minutes}";
    let groups = "[[upstreams.provider.backconnect.sessions]]\ncountry = \"US\"\nstate = \"NY\"\ncity = \"New York\"\nasn = \"701\"\ncount = 2\n\
                  [[upstreams.provider.backconnect.sessions]]\ncountry = \"de\"\ncity = \"Frankfurt am Main\"\ncount = 1\n";
    let Rig {
        origin: _origin,
        gateway,
        pool,
        clock: _clock,
        reconciler,
        checker,
    } = rig_with(LIFETIME_MS, template, groups).await;

    let outcome = reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 3, "{outcome:?}");
    // The gateway accepts every rendered username: each session passes its check.
    checker.check_round().await.unwrap();
    let sessions = records(&pool, T0).await;
    assert!(
        sessions.iter().all(|r| r.status == ProxyStatus::Available),
        "{sessions:?}"
    );
    let places = gateway.places();
    assert!(
        places.get("city-new+york").copied().unwrap_or(0) >= 2
            && places.get("state-ny").copied().unwrap_or(0) >= 2
            && places.get("asn-701").copied().unwrap_or(0) >= 2
            && places.get("city-frankfurt+am+main").copied().unwrap_or(0) >= 1,
        "{places:?}"
    );

    // Each session carries its group's place, stored in the one canonical form the
    // gateway's selectors and the extraction filters compare with.
    let mut by_city: BTreeMap<String, Vec<&ProxyRecord>> = BTreeMap::new();
    for record in &sessions {
        by_city
            .entry(record.labels.get("city").cloned().unwrap_or_default())
            .or_default()
            .push(record);
    }
    let new_york = &by_city["new_york"];
    assert_eq!(new_york.len(), 2, "{by_city:?}");
    for record in new_york {
        let user = &record.credentials.as_ref().unwrap().username;
        assert!(
            user.starts_with("bc-acct-country-us-state-ny-city-new+york-asn-701-session-"),
            "{user}"
        );
        assert_eq!(record.region.as_ref().unwrap().as_str(), "us");
        assert_eq!(record.labels.get("state").map(String::as_str), Some("ny"));
        assert_eq!(record.labels.get("asn").map(String::as_str), Some("701"));
        assert_eq!(
            Some(record.labels["city"].clone()),
            proxypool_core::GeoLabel::City.canonical("new+york"),
            "a client's selector, canonicalised, meets the stored label"
        );
    }
    let frankfurt = &by_city["frankfurt_am_main"];
    assert_eq!(frankfurt.len(), 1, "{by_city:?}");
    assert_eq!(frankfurt[0].region.as_ref().unwrap().as_str(), "de");
    assert_eq!(frankfurt[0].labels.get("state"), None);
}
