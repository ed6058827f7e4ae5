//! The destination policy end to end, with real sockets: curl (absolute-form and CONNECT)
//! and a hand-written SOCKS5 client against a running gateway whose upstream proxies sit
//! behind a relay that counts every connection the gateway opens to them. A refused target
//! must leave that count where it was: nothing is dialed for it.

use crate::common::control::TestController;
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use proxypool_core::control::GatewayClient;
use proxypool_core::{PortSet, Protocol};
use proxypool_gateway::{DestinationPolicy, Destinations, GatewayConfig};
use proxypool_sim::UpstreamProxy;
use proxypool_sim::{Origin, ProxyKind};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// The targets every default policy must refuse, as curl and SOCKS5 write them.
const INTERNAL: [&str; 3] = ["127.0.0.1:6379", "169.254.169.254:80", "[::1]:22"];

/// A TCP relay in front of an upstream proxy that counts the connections it accepts.
struct CountingRelay {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl CountingRelay {
    async fn start(upstream: SocketAddr, accepted: Arc<AtomicUsize>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, accepted }
    }

    fn count(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A gateway with `config`'s destination policy over an HTTP and a SOCKS5 sim upstream,
/// both behind one counting relay.
struct Setup {
    controller: Arc<TestController>,
    gateway: Running,
    relay: CountingRelay,
    _relay_socks: CountingRelay,
    _upstreams: Vec<UpstreamProxy>,
}

async fn setup(
    destinations: DestinationPolicy,
    clients: Vec<GatewayClient>,
    only: Option<Protocol>,
) -> Setup {
    let accepted = Arc::new(AtomicUsize::new(0));
    let http_up = sim_upstream(ProxyKind::Http, Ipv4Addr::new(127, 0, 0, 2)).await;
    let socks_up = sim_upstream(ProxyKind::Socks5, Ipv4Addr::new(127, 0, 0, 3)).await;
    let relay = CountingRelay::start(http_up.addr(), Arc::clone(&accepted)).await;
    let relay_socks = CountingRelay::start(socks_up.addr(), Arc::clone(&accepted)).await;
    let mut proxies = vec![
        proxy(1, Protocol::Http, relay.addr, CREDS, "acme", "us"),
        proxy(2, Protocol::Socks5, relay_socks.addr, CREDS, "sox", "de"),
    ];
    if let Some(protocol) = only {
        proxies.retain(|p| p.protocol == protocol);
    }
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(proxies, clients);
    let mut settings: GatewayConfig = strict_config(&controller);
    settings.destinations = destinations;
    let gateway = Running::start(settings).await;
    acked(&controller, 1).await;
    Setup {
        controller,
        gateway,
        relay,
        _relay_socks: relay_socks,
        _upstreams: vec![http_up, socks_up],
    }
}

fn policy(allow: &[String], ports: PortSet) -> DestinationPolicy {
    DestinationPolicy::new(&Destinations {
        allow_cidrs: allow.to_vec(),
        deny_cidrs: Vec::new(),
        ports,
    })
}

/// `http://TARGET/` (curl wants IPv6 in brackets, as [`INTERNAL`] has them).
fn url(target: &str) -> String {
    format!("http://{target}/")
}

/// A plain absolute-form request through the gateway.
async fn absolute(gateway: &Running, user: &str, target: &str) -> Curl {
    curl(&[
        "-g",
        "-x",
        &http_proxy_url(user, gateway.http),
        &url(target),
    ])
    .await
}

/// A request through a CONNECT tunnel (`-p`): the status is the CONNECT answer's when
/// the tunnel is refused, the origin's when it is not.
async fn connect(gateway: &Running, user: &str, target: &str) -> Curl {
    curl(&[
        "-g",
        "-p",
        "-x",
        &http_proxy_url(user, gateway.http),
        &url(target),
    ])
    .await
}

/// A SOCKS5 CONNECT by hand (RFC 1928/1929) to `address` (its type byte and bytes, as the
/// request carries them) and `port`; returns the reply code.
async fn socks5_request_reply(gateway: SocketAddr, user: &str, address: &[u8], port: u16) -> u8 {
    let mut stream = TcpStream::connect(gateway).await.unwrap();
    stream.write_all(&[5, 1, 2]).await.unwrap();
    let mut method = [0u8; 2];
    stream.read_exact(&mut method).await.unwrap();
    assert_eq!(method, [5, 2], "username/password method");
    let mut auth = vec![1, user.len() as u8];
    auth.extend_from_slice(user.as_bytes());
    auth.push(PASSWORD.len() as u8);
    auth.extend_from_slice(PASSWORD.as_bytes());
    stream.write_all(&auth).await.unwrap();
    let mut status = [0u8; 2];
    stream.read_exact(&mut status).await.unwrap();
    assert_eq!(status, [1, 0], "credentials accepted");
    let mut request = vec![5, 1, 0];
    request.extend_from_slice(address);
    request.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 2];
    stream.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[0], 5, "a SOCKS5 reply");
    reply[1]
}

/// A SOCKS5 CONNECT to an IP address; returns the reply code.
async fn socks5_reply(gateway: SocketAddr, user: &str, target: SocketAddr) -> u8 {
    let address = match target {
        SocketAddr::V4(v4) => [&[1u8][..], &v4.ip().octets()].concat(),
        SocketAddr::V6(v6) => [&[4u8][..], &v6.ip().octets()].concat(),
    };
    socks5_request_reply(gateway, user, &address, target.port()).await
}

fn socket(target: &str) -> SocketAddr {
    target.parse().unwrap()
}

fn assert_denied(response: &Curl, what: &str) {
    assert_eq!(response.status, 403, "{what}: {response:?}");
    assert_eq!(
        response.header("x-proxypool-error"),
        Some("destination_denied"),
        "{what}: {response:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_targets_are_refused_on_every_listener_and_nothing_is_dialed() {
    let _alone = alone().await;
    let s = setup(DestinationPolicy::default(), vec![client("alice")], None).await;
    let counted = ["port", "link_local", "loopback"]
        .map(|reason| format!("proxypool_gateway_destination_denials_total{{reason=\"{reason}\"}}"))
        .into_iter()
        .chain(["proxypool_gateway_refusals_total{code=\"destination_denied\"}".to_owned()])
        .collect::<Vec<_>>();
    let mut counted_before = Vec::new();
    for series in &counted {
        counted_before.push(metric(&s.gateway, series).await.unwrap_or(0.0));
    }
    for target in INTERNAL {
        assert_denied(
            &absolute(&s.gateway, "alice", target).await,
            &format!("absolute-form {target}"),
        );
        assert_denied(
            &connect(&s.gateway, "alice", target).await,
            &format!("CONNECT {target}"),
        );
        assert_eq!(
            socks5_reply(s.gateway.socks5, "alice", socket(target)).await,
            0x02,
            "SOCKS5 {target}: connection not allowed by ruleset"
        );
        // The IPv4-mapped IPv6 form of the same address is the same address.
        if let SocketAddr::V4(v4) = socket(target) {
            let mapped = SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port());
            assert_eq!(
                socks5_reply(s.gateway.socks5, "alice", mapped).await,
                0x02,
                "SOCKS5 {mapped}"
            );
            assert_denied(
                &absolute(&s.gateway, "alice", &mapped.to_string()).await,
                &format!("absolute-form {mapped}"),
            );
        }
    }
    // An internal address on an allowed port is refused for its range, not its port.
    assert_denied(
        &absolute(&s.gateway, "alice", "127.0.0.1:80").await,
        "loopback on port 80",
    );
    assert_eq!(
        s.relay.count(),
        0,
        "no upstream connection for a refused target"
    );
    for (series, before) in counted.iter().zip(counted_before) {
        let after = metric(&s.gateway, series).await.unwrap_or(0.0);
        assert!(after > before, "{series}: {after}, {before} before");
    }
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_block_lets_an_origin_through_and_other_ports_stay_refused() {
    let origin = Origin::start().await.unwrap();
    let port = origin.addr().port();
    let s = setup(
        policy(&["127.0.0.1/32".into()], PortSet::only([port])),
        vec![client("alice")],
        None,
    )
    .await;
    let target = origin.addr().to_string();
    let plain = absolute(&s.gateway, "alice", &target).await;
    assert_eq!(plain.status, 200, "{plain:?}");
    let tunnelled = connect(&s.gateway, "alice", &target).await;
    assert_eq!(tunnelled.status, 200, "{tunnelled:?}");
    assert_eq!(
        socks5_reply(s.gateway.socks5, "alice", origin.addr()).await,
        0x00,
        "SOCKS5 to the allowed origin succeeds"
    );
    let dialed = s.relay.count();
    assert!(
        dialed >= 3,
        "allowed requests went through the upstreams ({dialed})"
    );
    // The same address on a port outside the list, and the next loopback address on the
    // allowed port, are refused without a dial.
    let other_port = format!("127.0.0.1:{}", if port == 1 { 2 } else { port - 1 });
    assert_denied(
        &absolute(&s.gateway, "alice", &other_port).await,
        "a port outside the list",
    );
    assert_denied(
        &connect(&s.gateway, "alice", &other_port).await,
        "CONNECT to a port outside the list",
    );
    assert_eq!(
        socks5_reply(s.gateway.socks5, "alice", socket(&other_port)).await,
        0x02
    );
    let neighbour = format!("127.0.0.2:{port}");
    assert_denied(
        &absolute(&s.gateway, "alice", &neighbour).await,
        "127.0.0.2 is not in the allowed block",
    );
    assert_eq!(s.relay.count(), dialed, "refusals dialed nothing");
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_s_port_override_replaces_the_gateway_s_list() {
    let origin = Origin::start().await.unwrap();
    let port = origin.addr().port();
    let bob = GatewayClient {
        allowed_ports: Some(PortSet::only([port])),
        ..client("bob")
    };
    let s = setup(
        // The origin's address is allowed, its port only for bob.
        policy(&["127.0.0.1/32".into()], PortSet::default()),
        vec![client("alice"), bob],
        Some(Protocol::Http),
    )
    .await;
    let target = origin.addr().to_string();
    assert_denied(
        &absolute(&s.gateway, "alice", &target).await,
        "alice has the gateway's ports",
    );
    assert_eq!(
        socks5_reply(s.gateway.socks5, "alice", origin.addr()).await,
        0x02
    );
    assert_eq!(s.relay.count(), 0);
    let plain = absolute(&s.gateway, "bob", &target).await;
    assert_eq!(plain.status, 200, "{plain:?}");
    let tunnelled = connect(&s.gateway, "bob", &target).await;
    assert_eq!(tunnelled.status, 200, "{tunnelled:?}");
    assert_eq!(
        socks5_reply(s.gateway.socks5, "bob", origin.addr()).await,
        0
    );
    let dialed = s.relay.count();
    assert!(dialed >= 1);
    // The override replaces the list: port 80, allowed for everyone else, is not bob's.
    assert_denied(
        &absolute(&s.gateway, "bob", "127.0.0.1:80").await,
        "bob's override has no port 80",
    );
    assert_eq!(s.relay.count(), dialed);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_a_new_destination_policy_to_the_next_request() {
    let origin = Origin::start().await.unwrap();
    let s = setup(
        DestinationPolicy::default(),
        vec![client("alice")],
        Some(Protocol::Http),
    )
    .await;
    let target = origin.addr().to_string();
    assert_denied(&absolute(&s.gateway, "alice", &target).await, "by default");
    let mut reloaded = strict_config(&s.controller);
    reloaded.destinations.allow_origin(origin.addr());
    s.gateway.reload.apply(&reloaded).unwrap();
    let plain = absolute(&s.gateway, "alice", &target).await;
    assert_eq!(plain.status, 200, "{plain:?}");
    // A policy that does not parse is refused and the running one stays.
    reloaded.destinations = policy(&["127.0.0.1/33".into()], PortSet::Any);
    assert!(s.gateway.reload.apply(&reloaded).is_err());
    let plain = absolute(&s.gateway, "alice", &target).await;
    assert_eq!(plain.status, 200, "{plain:?}");
    s.gateway.shutdown().await;
}

/// Numeric IPv4 forms a resolver dials as the address they denote (`inet_aton`): 127.0.0.2
/// four ways, then 169.254.169.254 and 10.0.0.1 as one decimal number each.
const NUMERIC_INTERNAL: [&str; 6] = [
    "2130706434",
    "0x7f000002",
    "0177.0.0.2",
    "127.2",
    "2852039166",
    "167772161",
];

/// What a raw HTTP exchange got: the status, `X-Proxypool-Error` and the body.
#[derive(Debug)]
struct Raw {
    status: u16,
    error: Option<String>,
    body: String,
}

fn proxy_authorization(user: &str) -> String {
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{PASSWORD}"));
    format!("Proxy-Authorization: Basic {basic}\r\n")
}

/// Reads one response head from `stream` (byte by byte: a tunnel's data must stay unread).
async fn read_head(stream: &mut TcpStream) -> (u16, Option<String>) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if stream.read_exact(&mut byte).await.is_err() {
            break;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let error = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("x-proxypool-error")
            .then(|| value.trim().to_owned())
    });
    (status, error)
}

/// What arrives until the gateway closes the connection (at most 10 s), as text.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut body = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut body),
    )
    .await;
    String::from_utf8_lossy(&body).into_owned()
}

/// Sends `request` (a head without the credentials line) as `user`, then reads the
/// response; the body is what arrives until the gateway closes (`Connection: close`).
async fn raw_http(gateway: &Running, user: &str, request_line: &str, host: &str) -> Raw {
    let mut stream = TcpStream::connect(gateway.http).await.unwrap();
    let request = format!(
        "{request_line}\r\nHost: {host}\r\n{}Connection: close\r\n\r\n",
        proxy_authorization(user)
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, error) = read_head(&mut stream).await;
    Raw {
        status,
        error,
        body: read_to_close(&mut stream).await,
    }
}

/// `GET http://HOST:PORT/` exactly as written (curl would rewrite a numeric host).
async fn raw_absolute(gateway: &Running, user: &str, authority: &str) -> Raw {
    raw_http(
        gateway,
        user,
        &format!("GET http://{authority}/ HTTP/1.1"),
        authority,
    )
    .await
}

/// `CONNECT HOST:PORT` exactly as written; on a 200, one GET through the tunnel.
async fn raw_connect(gateway: &Running, user: &str, authority: &str) -> Raw {
    let mut stream = TcpStream::connect(gateway.http).await.unwrap();
    let request = format!(
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{}\r\n",
        proxy_authorization(user)
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, error) = read_head(&mut stream).await;
    if status != 200 {
        return Raw {
            status,
            error,
            body: String::new(),
        };
    }
    let get = format!("GET / HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(get.as_bytes()).await.unwrap();
    let (inner, _) = read_head(&mut stream).await;
    Raw {
        status: inner,
        error,
        body: read_to_close(&mut stream).await,
    }
}

/// A SOCKS5 CONNECT with the domain address type; returns the reply code.
async fn socks5_domain_reply(gateway: SocketAddr, user: &str, host: &str, port: u16) -> u8 {
    let address = [&[3u8, host.len() as u8][..], host.as_bytes()].concat();
    socks5_request_reply(gateway, user, &address, port).await
}

fn assert_raw_denied(response: &Raw, what: &str) {
    assert_eq!(response.status, 403, "{what}: {response:?}");
    assert_eq!(
        response.error.as_deref(),
        Some("destination_denied"),
        "{what}: {response:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_forms_of_internal_addresses_are_refused_and_nothing_is_dialed() {
    let s = setup(DestinationPolicy::default(), vec![client("alice")], None).await;
    for host in NUMERIC_INTERNAL {
        // Port 80 is allowed: only the address can refuse these.
        let authority = format!("{host}:80");
        assert_raw_denied(
            &raw_absolute(&s.gateway, "alice", &authority).await,
            &format!("absolute-form {authority}"),
        );
        assert_raw_denied(
            &raw_connect(&s.gateway, "alice", &authority).await,
            &format!("CONNECT {authority}"),
        );
        assert_eq!(
            socks5_domain_reply(s.gateway.socks5, "alice", host, 80).await,
            0x02,
            "SOCKS5 domain {host}: connection not allowed by ruleset"
        );
    }
    assert_eq!(
        s.relay.count(),
        0,
        "no upstream connection for a numeric form of an internal address"
    );
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_numeric_form_reaches_the_origin_as_its_dotted_address() {
    let origin = Origin::start_on(Ipv4Addr::new(127, 0, 0, 2)).await.unwrap();
    let port = origin.addr().port();
    let s = setup(
        policy(&["127.0.0.0/8".into()], PortSet::only([port])),
        vec![client("alice")],
        Some(Protocol::Http),
    )
    .await;
    let dotted = format!("127.0.0.2:{port}");
    for host in ["2130706434", "0x7f000002", "0177.0.0.2", "127.2"] {
        let authority = format!("{host}:{port}");
        let plain = raw_absolute(&s.gateway, "alice", &authority).await;
        assert_eq!(plain.status, 200, "absolute-form {authority}: {plain:?}");
        // The upstream got the dotted address, in the URL and in `Host`.
        assert!(
            plain.body.contains(&format!("\"host\":\"{dotted}\"")),
            "absolute-form {authority}: {plain:?}"
        );
        let tunnelled = raw_connect(&s.gateway, "alice", &authority).await;
        assert_eq!(tunnelled.status, 200, "CONNECT {authority}: {tunnelled:?}");
        assert_eq!(
            socks5_domain_reply(s.gateway.socks5, "alice", host, port).await,
            0x00,
            "SOCKS5 domain {host}"
        );
    }
    // A port outside the list stays refused whatever the form.
    assert_raw_denied(
        &raw_absolute(&s.gateway, "alice", "2130706434:80").await,
        "a port outside the list",
    );
    s.gateway.shutdown().await;
}
