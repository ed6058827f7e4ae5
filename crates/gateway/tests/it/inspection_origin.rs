//! The origin side of TLS inspection, end to end on real sockets: a client's inspected
//! tunnel → the gateway, which speaks TLS to the origin itself through a tunnel via the
//! routed proxy-pool upstream (HTTP `CONNECT` or SOCKS5, each leaving from its own
//! 127.0.0.x exit) → an https sim origin whose certificate a test CA issued for the `.test`
//! hosts: the origin verified against `origin_ca` (a clear refusal otherwise, never the
//! proxy's fault), its connection kept alive per exit, ban retries, and WebSockets.

use crate::common::control::TestController;
use crate::common::inspection::{GatewayCa, InnerClient, tls_origin, tunnel};
use crate::common::upstreams::{UPSTREAM_PASS, UPSTREAM_USER, sim_upstream};
use crate::common::*;
use http::StatusCode;
use proxypool_core::control::{GatewayClient, Inspection};
use proxypool_core::{Clock, ManualClock, Protocol, TicketKey, now_millis};
use proxypool_gateway::GatewayConfig;
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy};
use proxypool_testkit::tls::TestCa;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CREDS: Option<(&str, &str)> = Some((UPSTREAM_USER, UPSTREAM_PASS));

/// The exit of the `n`th upstream (1-based).
fn exit(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 60 + n)
}

/// alice: every CONNECT inspected.
fn alice() -> GatewayClient {
    GatewayClient {
        inspection: Inspection::On,
        ..client("alice")
    }
}

struct Setup {
    _controller: Arc<TestController>,
    gateway: Running,
    ca: GatewayCa,
    origin_ca: TestCa,
    origin: Origin,
    settings: GatewayConfig,
    upstreams: Vec<UpstreamProxy>,
}

impl Setup {
    fn authority(&self, host: &str) -> String {
        format!("{host}:{}", self.origin.addr().port())
    }

    /// A new inspected tunnel to `host` as alice, with an HTTP/1.1 client on it.
    async fn inner(&self, host: &str) -> InnerClient {
        InnerClient::open(self.gateway.http, "alice", &self.authority(host), &self.ca)
            .await
            .unwrap()
    }

    /// Tunnels the upstreams opened so far, all of them together.
    fn tunnels(&self) -> u64 {
        self.upstreams.iter().map(|up| up.stats().tunnels).sum()
    }
}

/// A gateway over one sim upstream of each of `kinds`, inspecting alice's tunnels, with
/// origins verified against the bundle at `trusted` (`None`: the origin's own CA).
async fn setup(kinds: &[ProxyKind], trusted: Option<&Path>) -> Setup {
    setup_with(kinds, trusted, |_| {}).await
}

/// [`setup`] with `tune` applied to the gateway's settings.
async fn setup_with(
    kinds: &[ProxyKind],
    trusted: Option<&Path>,
    tune: impl FnOnce(&mut GatewayConfig),
) -> Setup {
    let origin_ca = TestCa::new("origin-ca").unwrap();
    let origin = tls_origin(&origin_ca).await;
    let mut upstreams = Vec::new();
    let mut records = Vec::new();
    for (i, kind) in (1..).zip(kinds) {
        let up = sim_upstream(*kind, exit(i)).await;
        let protocol = match kind {
            ProxyKind::Socks5 => Protocol::Socks5,
            _ => Protocol::Http,
        };
        records.push(proxy(i, protocol, up.addr(), CREDS, "acme", "us"));
        upstreams.push(up);
    }
    let controller = TestController::start(WORKER, 600_000).await;
    controller.state.lock().unwrap().ticket_key = Some(TicketKey::generate().unwrap());
    controller.publish(records, vec![alice()]);
    let ca = GatewayCa::new("gateway inspection CA");
    let mut settings = config(&controller);
    with_operator_token(&mut settings);
    let trusted = trusted.unwrap_or(origin_ca.ca_path());
    settings.inspection = Some(ca.config(trusted, &[], 64));
    tune(&mut settings);
    let gateway = Running::start(settings.clone()).await;
    acked(&controller, 1).await;
    Setup {
        _controller: controller,
        gateway,
        ca,
        origin_ca,
        origin,
        settings,
        upstreams,
    }
}

fn exit_of_body(body: &str) -> IpAddr {
    let echo: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    echo["exit"].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_another_ca_vouches_for_is_refused_clearly_and_the_proxy_is_not_blamed() {
    let elsewhere = TestCa::new("a CA the origin does not chain to").unwrap();
    let s = setup(
        &[ProxyKind::Http, ProxyKind::Http],
        Some(elsewhere.ca_path()),
    )
    .await;
    for _ in 0..4 {
        let got = s
            .inner("shop-a.test")
            .await
            .get(&s.authority("shop-a.test"), "/x")
            .await;
        let got = got.unwrap();
        assert_eq!(got.status, 502, "{got:?}");
        assert_eq!(
            got.header("x-proxypool-error"),
            Some("origin_certificate_invalid")
        );
        assert!(got.body.contains("unknown issuer"), "{}", got.body);
    }
    // Nothing reached the origin, no request was tried through a second proxy, and no
    // proxy was counted as failed.
    assert_eq!(s.origin.requests(), 0);
    assert_eq!(
        s.tunnels(),
        4,
        "one tunnel per refused request: never retried"
    );
    let refused = "proxypool_gateway_refusals_total{code=\"origin_certificate_invalid\"}";
    assert_eq!(metric(&s.gateway, refused).await, Some(4.0));
    for reason in ["proxy_io_error", "proxy_rejected", "proxy_protocol_error"] {
        let series = format!("proxypool_gateway_upstream_failures_total{{reason=\"{reason}\"}}");
        assert_eq!(metric(&s.gateway, &series).await.unwrap_or(0.0), 0.0);
    }
    // Trusting the origin's CA (a reload reads origin_ca again): the same proxies serve it.
    let mut settings = s.settings.clone();
    settings.inspection = Some(s.ca.config(s.origin_ca.ca_path(), &[], 64));
    s.gateway.reload.apply(&settings).unwrap();
    let got = s
        .inner("shop-a.test")
        .await
        .get(&s.authority("shop-a.test"), "/x")
        .await;
    assert_eq!(got.unwrap().status, 200);
    // A bundle that cannot be read fails the reload and changes nothing.
    let mut broken = s.settings.clone();
    broken.inspection = Some(s.ca.config(Path::new("/nonexistent/origin-ca.pem"), &[], 64));
    let error = s.gateway.reload.apply(&broken).unwrap_err();
    assert!(error.to_string().contains("origin_ca"), "{error}");
    let got = s
        .inner("shop-a.test")
        .await
        .get(&s.authority("shop-a.test"), "/x")
        .await;
    assert_eq!(got.unwrap().status, 200, "the trust in force stays");
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspected_requests_reach_the_origin_through_http_connect_and_socks5_upstreams() {
    for kind in [ProxyKind::Http, ProxyKind::Socks5] {
        let s = setup(&[kind], None).await;
        let mut inner = s.inner("shop-a.test").await;
        // The Host as the client wrote it reaches the origin, in origin form.
        let host = format!("Shop-A.test:{}", s.origin.addr().port());
        let got = inner.get(&host, "/item?id=7").await.unwrap();
        assert_eq!(got.status, 200, "{kind:?}: {got:?}");
        let echo: serde_json::Value = serde_json::from_str(&got.body).unwrap();
        assert_eq!(echo["path"], "/item?id=7", "{kind:?}");
        assert_eq!(echo["host"], host.as_str(), "{kind:?}");
        assert_eq!(exit_of_body(&got.body), IpAddr::from(exit(1)), "{kind:?}");
        assert!(got.header("x-proxypool-proxy").is_some(), "{kind:?}");
        assert!(got.header("x-proxypool-ticket").is_some(), "{kind:?}");
        assert_eq!(s.upstreams[0].stats().tunnels, 1, "{kind:?}");
        s.gateway.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_connection_is_kept_alive_per_exit() {
    // One I/O thread: idle upstream connections are kept per thread (a connection's task
    // runs where it was opened), and the tunnels below are separate client connections.
    let one_thread = |settings: &mut GatewayConfig| settings.io_threads = 1;
    let s = setup_with(&[ProxyKind::Http, ProxyKind::Socks5], None, one_thread).await;
    const N: usize = 12;
    // Requests on one inspected tunnel, and on tunnels opened one after another: each
    // is routed on its own, and each exit reuses its one connection to the origin.
    let mut inner = s.inner("shop-a.test").await;
    for _ in 0..N {
        let got = inner.get(&s.authority("shop-a.test"), "/").await.unwrap();
        assert_eq!(got.status, 200, "{got:?}");
    }
    for _ in 0..N {
        let got = s
            .inner("shop-a.test")
            .await
            .get(&s.authority("shop-a.test"), "/")
            .await;
        assert_eq!(got.unwrap().status, 200);
    }
    let by_exit = s.origin.requests_by_exit();
    assert_eq!(by_exit.values().sum::<u64>(), 2 * N as u64);
    assert_eq!(by_exit.len(), 2, "both exits carried requests: {by_exit:?}");
    for up in &s.upstreams {
        assert_eq!(
            up.stats().tunnels,
            1,
            "{:?}: one connection to the origin for all its requests",
            up.kind()
        );
    }
    // Another origin name is another connection.
    let got = s
        .inner("shop-b.test")
        .await
        .get(&s.authority("shop-b.test"), "/")
        .await;
    assert_eq!(got.unwrap().status, 200);
    assert_eq!(s.tunnels(), 3);
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_status_is_retried_through_another_exit_over_tls() {
    let s = setup(&[ProxyKind::Socks5, ProxyKind::Http], None).await;
    s.origin
        .ban(exit(1).into(), "shop-a.test", StatusCode::TOO_MANY_REQUESTS);
    let mut retried = false;
    for _ in 0..10 {
        let got = s
            .inner("shop-a.test")
            .await
            .get(&s.authority("shop-a.test"), "/")
            .await;
        let got = got.unwrap();
        assert_eq!(got.status, 200, "{got:?}");
        assert_eq!(exit_of_body(&got.body), IpAddr::from(exit(2)));
        if got.header("x-proxypool-attempts") == Some("2") {
            retried = true;
            break;
        }
    }
    assert!(retried, "a request first routed through the banning exit");
    assert_eq!(
        s.origin.host_counts(exit(1).into(), "shop-a.test").banned,
        1
    );
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_inside_an_inspected_tunnel_is_relayed_both_ways() {
    let origin_ca = TestCa::new("websocket origin CA").unwrap();
    let echo = websocket::EchoOrigin::start(&origin_ca);
    let s = setup(&[ProxyKind::Http], Some(origin_ca.ca_path())).await;
    let authority = format!("shop-a.test:{}", echo.port);
    let stream = tunnel(s.gateway.http, "alice", &authority, &s.ca.der)
        .await
        .unwrap();
    let url = format!("wss://{authority}/echo");
    let echoed = tokio::task::spawn_blocking(move || websocket::talk(stream, &url, 3))
        .await
        .unwrap();
    assert_eq!(echoed, ["message 0", "message 1", "message 2"]);
    assert_eq!(echo.accepted(), 1);
    // The relayed bytes are counted as the client's usage.
    let up = "proxypool_gateway_bytes_total{direction=\"client_to_upstream\"}";
    eventually_async(
        "WebSocket bytes counted",
        Duration::from_secs(5),
        async || (metric(&s.gateway, up).await.unwrap_or(0.0) > 0.0).then_some(()),
    )
    .await;
    s.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_closes_when_the_proxy_s_lease_goes_like_a_tunnel() {
    const LEASE_MS: u64 = 10_000;
    let origin_ca = TestCa::new("websocket origin CA").unwrap();
    let echo = websocket::EchoOrigin::start(&origin_ca);
    let up = sim_upstream(ProxyKind::Http, exit(9)).await;
    let clock = ManualClock::new(now_millis());
    let controller = TestController::start(WORKER, 3_600_000).await;
    controller.state.lock().unwrap().session_clock = Some(clock.clone());
    let record = proxy(1, Protocol::Http, up.addr(), CREDS, "acme", "us");
    controller.publish(
        vec![leased_until(record, clock.now() + LEASE_MS)],
        vec![alice()],
    );
    let ca = GatewayCa::new("gateway inspection CA");
    let mut settings = config(&controller);
    settings.inspection = Some(ca.config(origin_ca.ca_path(), &[], 64));
    let gateway = Running::start_with_clock(settings, clock.clone()).await;
    acked(&controller, 1).await;

    let authority = format!("shop-a.test:{}", echo.port);
    let stream = tunnel(gateway.http, "alice", &authority, &ca.der)
        .await
        .unwrap();
    let url = format!("wss://{authority}/echo");
    let (up_and_talking, talking) = std::sync::mpsc::channel();
    let (stop, stopping) = std::sync::mpsc::channel();
    let client = tokio::task::spawn_blocking(move || {
        websocket::talk_until_closed(stream, &url, &up_and_talking, &stopping)
    });
    talking.recv().unwrap();
    // The lease ends unextended: the gateway may no longer relay through the proxy.
    clock.advance(LEASE_MS);
    stop.send(()).unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), client)
        .await
        .expect("the WebSocket closes with the lease")
        .unwrap();
    assert!(closed, "the client saw the connection end");
    gateway.shutdown().await;
}

/// A WebSocket echo origin over TLS, and a client that talks to it through a tunnel.
mod websocket {
    use proxypool_testkit::tls::TestCa;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::net::TcpStream;
    use tungstenite::Message;

    /// Echoes every text message back, on `127.0.0.1`, one thread per connection.
    pub(super) struct EchoOrigin {
        pub(super) port: u16,
        accepted: Arc<AtomicU64>,
    }

    impl EchoOrigin {
        pub(super) fn start(ca: &TestCa) -> Self {
            let files = ca.server_for("ws-origin", &["shop-a.test"]).unwrap();
            let chain = CertificateDer::pem_file_iter(&files.cert)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(&files.key).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let config = Arc::new(config);
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let accepted = Arc::new(AtomicU64::new(0));
            let counted = Arc::clone(&accepted);
            std::thread::spawn(move || {
                for tcp in listener.incoming().flatten() {
                    counted.fetch_add(1, Ordering::Relaxed);
                    let config = Arc::clone(&config);
                    std::thread::spawn(move || {
                        let tls = rustls::ServerConnection::new(config).unwrap();
                        let stream = rustls::StreamOwned::new(tls, tcp);
                        let Ok(mut socket) = tungstenite::accept(stream) else {
                            return;
                        };
                        while let Ok(message) = socket.read() {
                            if message.is_text() && socket.send(message).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            EchoOrigin { port, accepted }
        }

        /// TCP connections the origin accepted.
        pub(super) fn accepted(&self) -> u64 {
            self.accepted.load(Ordering::Relaxed)
        }
    }

    /// Opens a WebSocket at `url` over `stream` (TLS inside a tunnel), sends `n` text
    /// messages one at a time and returns what came back.
    pub(super) fn talk(
        stream: tokio_rustls::client::TlsStream<TcpStream>,
        url: &str,
        n: usize,
    ) -> Vec<String> {
        let stream = Blocking(stream, tokio::runtime::Handle::current());
        let (mut socket, response) = tungstenite::client(url, stream).unwrap();
        assert_eq!(response.status(), 101);
        let mut echoed = Vec::new();
        for i in 0..n {
            socket.send(Message::text(format!("message {i}"))).unwrap();
            let message = socket.read().unwrap();
            echoed.push(message.into_text().unwrap().to_string());
        }
        let _ = socket.close(None);
        echoed
    }

    /// Opens a WebSocket at `url` over `stream`, has one message echoed, says so on `up`,
    /// waits for `stop`, then reads until the connection ends: whether it ended (rather
    /// than another message coming).
    pub(super) fn talk_until_closed(
        stream: tokio_rustls::client::TlsStream<TcpStream>,
        url: &str,
        up: &std::sync::mpsc::Sender<()>,
        stop: &std::sync::mpsc::Receiver<()>,
    ) -> bool {
        let stream = Blocking(stream, tokio::runtime::Handle::current());
        let (mut socket, _) = tungstenite::client(url, stream).unwrap();
        socket.send(Message::text("hello")).unwrap();
        assert_eq!(
            socket.read().unwrap().into_text().unwrap().as_str(),
            "hello"
        );
        up.send(()).unwrap();
        stop.recv().unwrap();
        socket.read().is_err()
    }

    /// An async stream read and written from a blocking thread (tungstenite is blocking).
    struct Blocking<S>(S, tokio::runtime::Handle);

    impl<S: tokio::io::AsyncRead + Unpin> std::io::Read for Blocking<S> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            use tokio::io::AsyncReadExt;
            let Blocking(stream, handle) = self;
            handle.block_on(stream.read(buf))
        }
    }

    impl<S: tokio::io::AsyncWrite + Unpin> std::io::Write for Blocking<S> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            use tokio::io::AsyncWriteExt;
            let Blocking(stream, handle) = self;
            handle.block_on(stream.write(buf))
        }

        fn flush(&mut self) -> std::io::Result<()> {
            use tokio::io::AsyncWriteExt;
            let Blocking(stream, handle) = self;
            handle.block_on(stream.flush())
        }
    }
}
