//! TLS inspection end to end on real sockets: curl (or a rustls client) → the gateway,
//! which ends the client's CONNECT with a leaf minted from its CA → proxypool-sim upstream
//! proxies (each leaving from its own 127.0.0.x exit) → an https sim origin whose
//! certificate a test CA issued for the `.test` hosts, which bans chosen exits.

use crate::common::control::TestController;
use crate::common::inspection::{GatewayCa, InnerClient, served_leaf, tls_origin};
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use http::StatusCode;
use proxypool_core::control::{GatewayClient, Inspection};
use proxypool_core::ticket::TicketSubject;
use proxypool_core::{ClientId, PortSet, Protocol, ProxyId, TicketKey};
use proxypool_gateway::{DestinationPolicy, Destinations, GatewayConfig};
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use proxypool_testkit::tls::TestCa;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// The exit of the `n`th upstream (1-based).
fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 40 + n)
}

fn proxy_id(n: u8) -> ProxyId {
    ProxyId::new(format!("{n:032x}")).unwrap()
}

fn inspected(id: &str, inspection: Inspection) -> GatewayClient {
    GatewayClient {
        inspection,
        ..client(id)
    }
}

struct Setup {
    controller: Arc<TestController>,
    records: Vec<proxypool_core::control::SnapshotProxy>,
    gateway: Running,
    ca: GatewayCa,
    origin_ca: TestCa,
    origin: Origin,
    ticket_key: TicketKey,
    settings: GatewayConfig,
    _upstreams: Vec<UpstreamProxy>,
}

impl Setup {
    /// `https://HOST:PORT/path` of the origin.
    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.origin.addr().port())
    }

    fn authority(&self, host: &str) -> String {
        format!("{host}:{}", self.origin.addr().port())
    }

    /// curl through the gateway as `user`, trusting `cacert` only.
    async fn curl(&self, user: &str, cacert: &str, url: &str, extra: &[&str]) -> Curl {
        let proxy = http_proxy_url(user, self.gateway.http);
        let mut args = vec!["--proxy", &proxy, "--cacert", cacert];
        args.extend_from_slice(extra);
        args.push(url);
        curl(&args).await
    }
}

/// A gateway over `n` sim HTTP upstreams with inspection on (`bank.test` bypassed, at
/// most `leaf_cache` leaves), for alice (`on`), bob (`allowed`) and carol (`off`).
async fn setup(n: u8, leaf_cache: usize) -> Setup {
    setup_with(n, leaf_cache, |_| {}).await
}

/// [`setup`] with the gateway's settings changed by `tweak` first.
async fn setup_with(n: u8, leaf_cache: usize, tweak: impl FnOnce(&mut GatewayConfig)) -> Setup {
    let origin_ca = TestCa::new("origin-ca").unwrap();
    let origin = tls_origin(&origin_ca).await;
    let mut running = Vec::new();
    let mut records = Vec::new();
    for i in 1..=n {
        let up = sim_upstream(ProxyKind::Http, exit(i)).await;
        records.push(proxy(i, Protocol::Http, up.addr(), CREDS, "acme", "us"));
        running.push(up);
    }
    let ticket_key = TicketKey::generate().unwrap();
    let controller = TestController::start(WORKER, 600_000).await;
    controller.state.lock().unwrap().ticket_key = Some(ticket_key.clone());
    let saved = records.clone();
    controller.publish(
        records,
        vec![
            inspected("alice", Inspection::On),
            inspected("bob", Inspection::Allowed),
            inspected("carol", Inspection::Off),
        ],
    );
    let ca = GatewayCa::new("gateway inspection CA");
    let mut settings = config(&controller);
    with_operator_token(&mut settings);
    settings.inspection = Some(ca.config(origin_ca.ca_path(), &["bank.test"], leaf_cache));
    tweak(&mut settings);
    let gateway = Running::start(settings.clone()).await;
    acked(&controller, 1).await;
    Setup {
        controller,
        records: saved,
        gateway,
        ca,
        origin_ca,
        origin,
        ticket_key,
        settings,
        _upstreams: running,
    }
}

fn exit_of_body(body: &str) -> IpAddr {
    let echo: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    echo["exit"].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspected_request_banned_on_one_exit_is_retried_and_the_exit_cools_down() {
    let s = setup(2, 64).await;
    s.origin
        .ban(exit(1).into(), "shop-a.test", StatusCode::FORBIDDEN);
    // The first pick may be either exit: ask until exit 1 was tried and banned once.
    let url = s.url("shop-a.test", "/item");
    let mut retried = None;
    for _ in 0..10 {
        let got = s.curl("alice", s.ca.cert_path(), &url, &[]).await;
        assert_eq!(got.status, 200, "{got:?}");
        assert_eq!(exit_of_body(&got.body), IpAddr::from(exit(2)), "{got:?}");
        if got.header("x-proxypool-attempts") == Some("2") {
            retried = Some(got);
            break;
        }
    }
    let got = retried.expect("a request first routed through the banning exit");
    assert_eq!(
        s.origin.host_counts(exit(1).into(), "shop-a.test").banned,
        1
    );
    // The answer names the proxy that carried it, with a ticket the feedback API accepts.
    let carried = proxy_id(2);
    assert_eq!(got.header("x-proxypool-proxy"), Some(carried.as_str()));
    let ticket = got.header("x-proxypool-ticket").expect("a ticket");
    let alice = ClientId::new("alice").unwrap();
    let subject = TicketSubject {
        client: &alice,
        proxy: &carried,
        lease_epoch: 1,
    };
    let now = proxypool_core::SystemClock::shared().now();
    assert_eq!(
        proxypool_core::verify_ticket(&s.ticket_key, ticket, subject, now),
        Ok(())
    );
    // Exit 1 cools down for the domain: neither an inspected nor a bob's inspected
    // request goes through it again.
    for user in ["alice", "bob-inspect", "alice-rotate-request"] {
        let got = s.curl(user, s.ca.cert_path(), &url, &[]).await;
        assert_eq!(got.status, 200, "{user}: {got:?}");
        assert_eq!(got.header("x-proxypool-attempts"), Some("1"), "{user}");
    }
    assert_eq!(
        s.origin.host_counts(exit(1).into(), "shop-a.test").requests,
        1
    );
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_is_not_inspected_sees_the_origin_s_own_certificate() {
    let s = setup(1, 64).await;
    let origin_ca = s.origin_ca.ca_path().to_str().unwrap().to_owned();
    let url = s.url("shop-a.test", "/");
    // carol is off, bob did not ask: their tunnels end at the origin, whose certificate
    // chains to the origin's CA and not to the gateway's.
    for user in ["carol", "bob"] {
        let passed = s.curl(user, &origin_ca, &url, &[]).await;
        assert_eq!(passed.status, 200, "{user}: {passed:?}");
        assert_eq!(passed.header("x-proxypool-proxy"), None, "{user}");
        let refused = s.curl(user, s.ca.cert_path(), &url, &[]).await;
        assert_ne!(refused.exit, 0, "{user}: {refused:?}");
    }
    // bob asking is inspected: the gateway's CA, the gateway's headers inside.
    let inspected = s.curl("bob-inspect", s.ca.cert_path(), &url, &[]).await;
    assert_eq!(inspected.status, 200, "{inspected:?}");
    assert!(
        inspected.header("x-proxypool-proxy").is_some(),
        "{inspected:?}"
    );
    // A bypassed domain passes through even for alice, whose every tunnel is inspected.
    let bank = s.url("bank.test", "/");
    let passed = s.curl("alice", &origin_ca, &bank, &[]).await;
    assert_eq!(passed.status, 200, "{passed:?}");
    assert_eq!(passed.header("x-proxypool-proxy"), None);
    assert_ne!(s.curl("alice", s.ca.cert_path(), &bank, &[]).await.exit, 0);
    // Bypassed by its canonical name too.
    let shouted = s.url("BANK.test.", "/");
    assert_eq!(s.curl("alice", &origin_ca, &shouted, &[]).await.status, 200);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_inspection_off_asking_for_it_is_refused() {
    let s = setup(1, 64).await;
    let proxy = http_proxy_url("carol-inspect", s.gateway.http);
    let (exit, headers) = curl_all_headers(&[
        "--proxy",
        &proxy,
        "--cacert",
        s.ca.cert_path(),
        &s.url("shop-a.test", "/"),
    ])
    .await;
    assert_ne!(exit, 0);
    assert!(
        headers.contains("x-proxypool-error: bad_selector"),
        "{headers}"
    );
    assert_eq!(s.origin.requests(), 0);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inner_request_for_another_host_is_refused_and_the_destination_policy_holds() {
    let s = setup(1, 64).await;
    let url = s.url("shop-a.test", "/");
    let other_host = format!("Host: shop-b.test:{}", s.origin.addr().port());
    let refused = s
        .curl("alice", s.ca.cert_path(), &url, &["-H", &other_host])
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(refused.header("x-proxypool-error"), Some("forbidden"));
    assert_eq!(s.origin.requests(), 0);
    // On one kept-alive tunnel: allowed, then the policy changes, then refused inside.
    let authority = s.authority("shop-a.test");
    let mut inner = InnerClient::open(s.gateway.http, "alice", &authority, &s.ca)
        .await
        .unwrap();
    let first = inner.get(&authority, "/before").await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    let mut reloaded = s.settings.clone();
    reloaded.destinations = DestinationPolicy::new(&Destinations {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        deny_cidrs: Vec::new(),
        ports: PortSet::only([80]),
    });
    s.gateway.reload.apply(&reloaded).unwrap();
    let denied = inner.get(&authority, "/after").await.unwrap();
    assert_eq!(denied.status, 403, "{denied:?}");
    assert_eq!(
        denied.header("x-proxypool-error"),
        Some("destination_denied")
    );
    assert_eq!(s.origin.requests(), 1);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_on_one_inspected_connect_are_each_routed() {
    let s = setup(3, 64).await;
    let authority = s.authority("shop-a.test");
    let mut inner = InnerClient::open(s.gateway.http, "alice-rotate-request", &authority, &s.ca)
        .await
        .unwrap();
    let mut exits = std::collections::BTreeSet::new();
    for i in 0..9 {
        let got = inner.get(&authority, &format!("/n/{i}")).await.unwrap();
        assert_eq!(got.status, 200, "{got:?}");
        assert!(got.header("x-proxypool-proxy").is_some());
        exits.insert(exit_of_body(&got.body));
    }
    // Rotation per request works inside one tunnel: more than one exit carried them.
    assert!(exits.len() > 1, "{exits:?}");
    assert_eq!(s.origin.requests(), 9);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_connects_to_one_host_are_served_one_leaf() {
    let s = setup(1, 64).await;
    let authority = s.authority("fresh.test");
    let gateway = s.gateway.http;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let authority = authority.clone();
        let ca_der = s.ca.der.clone();
        tasks.push(tokio::spawn(async move {
            let tls = crate::common::inspection::tunnel(gateway, "alice", &authority, &ca_der)
                .await
                .unwrap();
            tls.get_ref().1.peer_certificates().unwrap()[0]
                .clone()
                .into_owned()
        }));
    }
    let mut leaves = Vec::new();
    for task in tasks {
        leaves.push(task.await.unwrap());
    }
    assert!(leaves.iter().all(|leaf| *leaf == leaves[0]));
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaf_cache_keeps_at_most_its_bound_the_least_recently_used_going() {
    let s = setup(1, 2).await;
    let leaf = async |host: &str| {
        served_leaf(s.gateway.http, "alice", &s.authority(host), &s.ca)
            .await
            .unwrap()
    };
    let a = leaf("shop-a.test").await;
    assert_eq!(leaf("shop-a.test").await, a, "cached");
    let b = leaf("shop-b.test").await;
    let _fresh = leaf("fresh.test").await;
    // shop-a was the least recently used of three: gone, minted anew, which pushes
    // shop-b (now the least recently used) out in turn.
    assert_ne!(leaf("shop-a.test").await, a);
    assert_ne!(leaf("shop-b.test").await, b);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_inspected_request_has_its_own_access_log_line_with_its_https_url() {
    let log = std::env::temp_dir().join(format!("gw-inspection-access-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let path = log.clone();
    let s = setup_with(1, 64, move |settings| {
        settings.access_log.enabled = true;
        settings.access_log.file = Some(path);
        settings.access_log.format = proxypool_gateway::AccessLogFormat::Squid;
    })
    .await;
    let url = s.url("shop-a.test", "/item");
    let got = s.curl("alice", s.ca.cert_path(), &url, &[]).await;
    assert_eq!(got.status, 200, "{got:?}");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    // The CONNECT's line comes when its tunnel ends, a moment after curl closed it.
    eventually(std::time::Duration::from_secs(5), "both lines", || {
        text().lines().count() >= 2
    })
    .await;
    let text = text();
    let inner = text
        .lines()
        .find(|line| line.contains(&format!(" GET {url} ")))
        .unwrap_or_else(|| panic!("no line for the inner request: {text}"));
    assert!(inner.contains("/200 "), "{inner}");
    assert!(inner.contains(" alice "), "{inner}");
    let authority = s.authority("shop-a.test");
    assert!(
        text.lines()
            .any(|line| line.contains(&format!(" CONNECT {authority} "))),
        "{text}"
    );
    s.gateway.shutdown().await;
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspected_request_s_json_line_has_its_method_path_and_status_never_the_query() {
    let log = std::env::temp_dir().join(format!("gw-inspection-json-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let path = log.clone();
    let s = setup_with(1, 64, move |settings| {
        settings.access_log.enabled = true;
        settings.access_log.file = Some(path);
        settings.access_log.format = proxypool_gateway::AccessLogFormat::Json;
    })
    .await;
    let url = s.url("shop-a.test", "/item?token=secret");
    let got = s.curl("alice", s.ca.cert_path(), &url, &[]).await;
    assert_eq!(got.status, 200, "{got:?}");
    let lines = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    eventually(std::time::Duration::from_secs(5), "both lines", || {
        lines().len() >= 2
    })
    .await;
    let lines = lines();
    let inner = lines
        .iter()
        .find(|line| line["kind"] == "https")
        .unwrap_or_else(|| panic!("no line for the inner request: {lines:#?}"));
    assert_eq!(inner["method"], "GET", "{inner}");
    assert_eq!(inner["path"], "/item", "{inner}");
    assert_eq!(inner["status"], 200, "{inner}");
    assert_eq!(inner["client"], "alice", "{inner}");
    assert_eq!(
        inner["target"],
        s.authority("shop-a.test").as_str(),
        "{inner}"
    );
    assert!(!inner.to_string().contains("secret"), "{inner}");
    let connect = lines
        .iter()
        .find(|line| line["kind"] == "connect")
        .unwrap_or_else(|| panic!("no line for the CONNECT: {lines:#?}"));
    assert_eq!(connect["path"], serde_json::Value::Null, "{connect}");
    s.gateway.shutdown().await;
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_refuses_the_leaf_or_never_shakes_hands_loses_the_tunnel() {
    use tokio::io::AsyncReadExt;
    let s = setup_with(1, 64, |settings| {
        settings.limits.header_read_timeout = Millis(500);
    })
    .await;
    // Trusting only the origin's CA, alice's inspected tunnel is refused by curl itself.
    let origin_ca = s.origin_ca.ca_path().to_str().unwrap().to_owned();
    let refused = s
        .curl("alice", &origin_ca, &s.url("shop-a.test", "/"), &[])
        .await;
    assert_ne!(refused.exit, 0, "{refused:?}");
    assert_eq!(s.origin.requests(), 0);
    // A CONNECT answered, then silence: closed by the header timeout.
    let mut stream = tokio::net::TcpStream::connect(s.gateway.http)
        .await
        .unwrap();
    proxypool_proto::http_connect::connect(
        &mut stream,
        &s.authority("shop-a.test"),
        Some(("alice", PASSWORD)),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut byte))
        .await
        .expect("the gateway closes a tunnel whose handshake never comes");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(400));
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_the_bypass_list_and_a_new_ca_and_refuses_a_broken_one() {
    let s = setup(1, 64).await;
    let authority = s.authority("shop-a.test");
    let origin_ca = s.origin_ca.ca_path().to_str().unwrap().to_owned();
    let url = s.url("shop-a.test", "/");
    let before = served_leaf(s.gateway.http, "alice", &authority, &s.ca)
        .await
        .unwrap();
    // shop-a bypassed from now on: its tunnel ends at the origin.
    let mut reloaded = s.settings.clone();
    reloaded.inspection = Some(s.ca.config(s.origin_ca.ca_path(), &["shop-a.test"], 64));
    s.gateway.reload.apply(&reloaded).unwrap();
    let passed = s.curl("alice", &origin_ca, &url, &[]).await;
    assert_eq!(passed.status, 200, "{passed:?}");
    assert_eq!(passed.header("x-proxypool-proxy"), None);
    // Back, with the same CA: the cache is kept (the same leaf).
    s.gateway.reload.apply(&s.settings).unwrap();
    let same = served_leaf(s.gateway.http, "alice", &authority, &s.ca)
        .await
        .unwrap();
    assert_eq!(same, before);
    // A CA whose key is another's: the reload is refused whole, the running CA stays.
    let other = GatewayCa::new("another CA");
    let mut broken = s.settings.clone();
    let mut mixed = s.ca.config(s.origin_ca.ca_path(), &[], 64);
    mixed.ca_key = other.key.clone();
    broken.inspection = Some(mixed);
    let error = s.gateway.reload.apply(&broken).unwrap_err();
    assert!(error.0.contains("does not issue leaves"), "{error:?}");
    assert_eq!(
        served_leaf(s.gateway.http, "alice", &authority, &s.ca)
            .await
            .unwrap(),
        before
    );
    // A new CA: new leaves that chain to it, and not to the old one.
    let mut renewed = s.settings.clone();
    renewed.inspection = Some(other.config(s.origin_ca.ca_path(), &[], 64));
    s.gateway.reload.apply(&renewed).unwrap();
    served_leaf(s.gateway.http, "alice", &authority, &other)
        .await
        .unwrap();
    assert!(
        served_leaf(s.gateway.http, "alice", &authority, &s.ca)
            .await
            .is_err()
    );
    // Without the table: no tunnel is inspected any more.
    let mut off = s.settings.clone();
    off.inspection = None;
    s.gateway.reload.apply(&off).unwrap();
    let passed = s.curl("alice", &origin_ca, &url, &[]).await;
    assert_eq!(passed.status, 200, "{passed:?}");
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_a_reload_removes_is_refused_inside_and_its_tunnel_closes() {
    let s = setup_with(1, 64, |settings| {
        settings.shutdown_grace = std::time::Duration::from_millis(300);
    })
    .await;
    let authority = s.authority("shop-a.test");
    let mut inner = InnerClient::open(s.gateway.http, "alice", &authority, &s.ca)
        .await
        .unwrap();
    assert_eq!(inner.get(&authority, "/").await.unwrap().status, 200);
    s.controller.publish(
        s.records.clone(),
        vec![inspected("bob", Inspection::Allowed)],
    );
    acked(&s.controller, 2).await;
    let refused = inner.get(&authority, "/").await.unwrap();
    assert_eq!(refused.status, 407, "{refused:?}");
    // A shutdown grace later the tunnel is closed.
    eventually_async(
        "the removed client's tunnel closed",
        std::time::Duration::from_secs(5),
        async || inner.get(&authority, "/").await.is_err().then_some(()),
    )
    .await;
    assert_eq!(s.origin.requests(), 1);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_inner_request_keeps_the_tunnel_s_slots_until_it_ends() {
    let s = setup(1, 64).await;
    let ws = crate::common::inspection::websocket_origin(&s.origin_ca);
    let authority = format!("shop-a.test:{}", ws.port());
    let mut inner = InnerClient::open(s.gateway.http, "alice", &authority, &s.ca)
        .await
        .unwrap();
    let upgraded = inner.websocket(&authority, "/echo").await.unwrap();
    // The inner HTTP connection is over; the tunnel (now a relay) still holds its place.
    holds_connections(&s.gateway, 1).await;
    drop(upgraded);
    drop(inner);
    holds_connections(&s.gateway, 0).await;
    s.gateway.shutdown().await;
}
