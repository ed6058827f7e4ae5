//! The TLS client listener (`listeners.https`): the HTTP proxy protocol inside TLS, for
//! curl's `--proxy https://` (plain-http targets and CONNECT inside TLS), admission like
//! the plain listener (a stalled handshake is closed at the header timeout and gives its
//! per-IP slot back; plain HTTP on the TLS port is refused), mutual TLS (a certificate
//! named in a client's `tls_names` authenticates as it; none, another CA's, or another
//! client's credentials are refused) and a certificate renewed on disk served to new
//! connections while an open kept-alive connection keeps working.

use crate::common::control::TestController;
use crate::common::upstreams::{
    EchoOrigin, TlsOrigin, UPSTREAM_PASS, UPSTREAM_USER, free_port, sim_upstream,
};
use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use proxypool_config::ServerTlsConfig;
use proxypool_core::Protocol;
use proxypool_edge::{ClientTls, ClientTlsFiles};
use proxypool_gateway::GatewayConfig;
use proxypool_sim::{ProxyKind, UpstreamProxy};
use proxypool_testkit::TestCa;
use proxypool_testkit::tls::CertFiles;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const EXIT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 61);

/// A gateway with the TLS listener, its CA, and what it routes through.
struct TlsGateway {
    running: Running,
    https: SocketAddr,
    ca: TestCa,
    files: CertFiles,
    controller: Arc<TestController>,
    origin: EchoOrigin,
    _upstream: UpstreamProxy,
}

impl TlsGateway {
    /// A gateway whose TLS listener serves a certificate of a fresh CA for 127.0.0.1 and
    /// localhost; `clients` in its snapshot; `adjust` tunes the config.
    async fn start(
        clients: Vec<proxypool_core::control::GatewayClient>,
        adjust: impl FnOnce(&mut GatewayConfig),
    ) -> Self {
        let origin = EchoOrigin::start().await;
        let upstream = sim_upstream(ProxyKind::Http, EXIT).await;
        let controller = TestController::start(WORKER, 3_600_000).await;
        let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
        controller.publish(
            vec![proxy(
                1,
                Protocol::Http,
                upstream.addr(),
                credentials,
                "vendor",
                "us",
            )],
            clients,
        );
        let ca = TestCa::new("gateway listener ca").unwrap();
        let files = ca.server("gateway").unwrap();
        let https = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut config = config(&controller);
        config.listeners.https = Some(https);
        config.tls = Some(ServerTlsConfig {
            cert: files.cert.clone(),
            key: files.key.clone(),
            client_ca: None,
            poll_interval: Millis(100),
        });
        adjust(&mut config);
        let running = Running::start(config).await;
        acked(&controller, 1).await;
        TlsGateway {
            running,
            https,
            ca,
            files,
            controller,
            origin,
            _upstream: upstream,
        }
    }

    /// `https://user:pass@127.0.0.1:port` for curl's `--proxy`.
    fn proxy_url(&self, user: &str) -> String {
        format!("https://{user}:{PASSWORD}@{}", self.https)
    }

    fn proxy_ca(&self) -> String {
        self.ca.ca_path().display().to_string()
    }
}

/// A TLS connection to `addr` trusting `ca` (and presenting `identity`), HTTP/1.1 on it.
async fn tls_connection(
    addr: SocketAddr,
    ca: &std::path::Path,
    identity: Option<&CertFiles>,
) -> std::io::Result<SendRequest<Empty<Bytes>>> {
    let tls = ClientTls::load(&ClientTlsFiles {
        ca: Some(ca.to_owned()),
        cert: identity.map(|files| files.cert.clone()),
        key: identity.map(|files| files.key.clone()),
    })
    .unwrap();
    let tcp = TcpStream::connect(addr).await?;
    let stream = tls.connect("localhost", tcp).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One absolute-form GET of `url` on `sender`, as `user` when given; status and body.
async fn get(
    sender: &mut SendRequest<Empty<Bytes>>,
    url: &str,
    user: Option<&str>,
) -> (u16, String) {
    let host = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap();
    let mut request = http::Request::get(url).header("host", host);
    if let Some(user) = user {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{PASSWORD}"));
        request = request.header("proxy-authorization", format!("Basic {token}"));
    }
    sender.ready().await.unwrap();
    let response = sender
        .send_request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_tls_listener_reaches_http_and_https_targets() {
    let gateway = TlsGateway::start(vec![client("alice")], |_| {}).await;
    let tls_origin = TlsOrigin::start().await;
    let proxy = gateway.proxy_url("alice");
    let ca = gateway.proxy_ca();

    let plain = curl(&[
        "--proxy",
        &proxy,
        "--proxy-cacert",
        &ca,
        &gateway.origin.url(),
    ])
    .await;
    assert_eq!(
        (plain.status, plain.body.as_str()),
        (200, "127.0.0.61"),
        "an http:// target through the TLS listener: {plain:?}"
    );
    // CONNECT inside TLS, then the origin's own TLS inside the tunnel.
    let https = curl(&[
        "-k",
        "--proxy",
        &proxy,
        "--proxy-cacert",
        &ca,
        &format!("https://localhost:{}/", tls_origin.addr.port()),
    ])
    .await;
    assert_eq!(
        https.status, 200,
        "an https:// target (CONNECT in TLS): {https:?}"
    );
    assert!(https.body.contains("s_server"), "{https:?}");

    // Credentials are still checked, and the proxy's certificate is verified by curl.
    let wrong = curl(&[
        "--proxy",
        &format!("https://alice:wrong@{}", gateway.https),
        "--proxy-cacert",
        &ca,
        &gateway.origin.url(),
    ])
    .await;
    assert_eq!(wrong.status, 407, "{wrong:?}");
    let other_ca = TestCa::new("not the gateway's").unwrap();
    let untrusted = curl(&[
        "--proxy",
        &proxy,
        "--proxy-cacert",
        &other_ca.ca_path().display().to_string(),
        &gateway.origin.url(),
    ])
    .await;
    assert_ne!(
        untrusted.exit, 0,
        "a proxy certificate of another CA: {untrusted:?}"
    );
    assert_eq!(untrusted.status, 0, "{untrusted:?}");
    gateway.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_the_tls_port_is_refused_with_a_readable_answer() {
    let gateway = TlsGateway::start(vec![client("alice")], |_| {}).await;
    let refused = curl(&[
        "-x",
        &http_proxy_url("alice", gateway.https),
        &gateway.origin.url(),
    ])
    .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.header("x-proxypool-error"), Some("tls_required"));
    assert!(refused.body.contains("https://"), "{refused:?}");
    assert_eq!(gateway.origin.hits_from(EXIT), 0, "nothing was routed");
    gateway.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_is_closed_at_the_header_timeout_and_frees_its_per_ip_slot() {
    let _alone = alone().await;
    let gateway = TlsGateway::start(vec![client("alice")], |config| {
        config.limits.header_read_timeout = Millis(1_000);
        config.limits.max_connections_per_ip = 2;
    })
    .await;
    let timeouts = "proxypool_gateway_tls_handshake_failures_total{reason=\"timeout\"}";
    let before = metric(&gateway.running, timeouts).await.unwrap_or(0.0);

    // Two connections begin a handshake (the first bytes of a record header) and stall.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(gateway.https).await.unwrap();
        stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
        stalled.push(stream);
    }
    let opened = Instant::now();
    holds_connections(&gateway.running, 2).await;
    // The address is at its cap: a third connection is closed at accept.
    let mut third = TcpStream::connect(gateway.https).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(1), third.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "over the per-IP cap: closed at once, got {read:?}"
    );
    // The stalled handshakes end at the header timeout, not later.
    for mut stream in stalled {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "a stalled handshake is closed: {read:?}"
        );
    }
    let took = opened.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "closed near the 1 s header timeout, took {took:?}"
    );
    holds_connections(&gateway.running, 0).await;
    let after = metric(&gateway.running, timeouts).await.unwrap_or(0.0);
    assert!(after - before >= 2.0, "counted: {before} -> {after}");
    // The slots are back: the address is served again.
    let served = curl(&[
        "--proxy",
        &gateway.proxy_url("alice"),
        "--proxy-cacert",
        &gateway.proxy_ca(),
        &gateway.origin.url(),
    ])
    .await;
    assert_eq!(served.status, 200, "{served:?}");
    gateway.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_authenticates_by_certificate_name_and_refuses_the_rest() {
    let clients_ca = TestCa::new("clients ca").unwrap();
    let outsiders_ca = TestCa::new("outsiders ca").unwrap();
    let alice_cert = clients_ca.client("alice", "Alice.Clients.Test").unwrap();
    let nobody_cert = clients_ca.client("nobody", "nobody.clients.test").unwrap();
    let forged_cert = outsiders_ca.client("forged", "alice.clients.test").unwrap();
    let alice = proxypool_core::control::GatewayClient {
        tls_names: vec!["alice.clients.test".into()],
        ..client("alice")
    };
    let client_ca = clients_ca.ca_path().to_owned();
    let gateway = TlsGateway::start(vec![alice, client("bob")], move |config| {
        config.tls.as_mut().unwrap().client_ca = Some(client_ca);
    })
    .await;
    let ca = gateway.ca.ca_path().to_owned();
    let url = gateway.origin.url();

    // Alice's certificate alone: routed, no Proxy-Authorization; selectors still work
    // with her own credentials on the same connection.
    let mut as_alice = tls_connection(gateway.https, &ca, Some(&alice_cert))
        .await
        .unwrap();
    assert_eq!(
        get(&mut as_alice, &url, None).await,
        (200, "127.0.0.61".into())
    );
    assert_eq!(
        get(&mut as_alice, &url, Some("alice-country-us")).await,
        (200, "127.0.0.61".into())
    );
    assert_ne!(
        get(&mut as_alice, &url, Some("alice-country-de")).await.0,
        200,
        "the username's selectors apply (no proxy in de)"
    );
    // Alice's certificate with Bob's (valid) credentials: refused.
    assert_eq!(get(&mut as_alice, &url, Some("bob")).await.0, 407);

    // A certificate of the clients' CA naming no client: credentials as usual.
    let mut as_nobody = tls_connection(gateway.https, &ca, Some(&nobody_cert))
        .await
        .unwrap();
    assert_eq!(get(&mut as_nobody, &url, None).await.0, 407);
    assert_eq!(get(&mut as_nobody, &url, Some("bob")).await.0, 200);

    // No certificate, or one of another CA naming Alice: the handshake fails.
    for (what, identity) in [("none", None), ("another CA's", Some(&forged_cert))] {
        let refused = match tls_connection(gateway.https, &ca, identity).await {
            Err(_) => true,
            // TLS 1.3: the server's refusal of the certificate arrives after the client
            // thinks the handshake is done, with the first request.
            Ok(mut sender) => {
                sender.ready().await.is_err()
                    || sender
                        .send_request(http::Request::get(&url).body(Empty::new()).unwrap())
                        .await
                        .is_err()
            }
        };
        assert!(refused, "client certificate {what}: refused");
    }
    // curl too: the listener is unusable without a client certificate.
    let curl_no_cert = curl(&[
        "--proxy",
        &gateway.proxy_url("alice"),
        "--proxy-cacert",
        &gateway.proxy_ca(),
        &url,
    ])
    .await;
    assert_eq!(curl_no_cert.status, 0, "{curl_no_cert:?}");
    let curl_cert = curl(&[
        "--proxy",
        &format!("https://{}", gateway.https),
        "--proxy-cacert",
        &gateway.proxy_ca(),
        "--proxy-cert",
        &alice_cert.cert.display().to_string(),
        "--proxy-key",
        &alice_cert.key.display().to_string(),
        &url,
    ])
    .await;
    assert_eq!(curl_cert.status, 200, "{curl_cert:?}");
    drop(gateway.controller);
    gateway.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_reaches_new_connections_and_open_ones_keep_working() {
    let gateway = TlsGateway::start(vec![client("alice")], |_| {}).await;
    let url = gateway.origin.url();
    let old_ca = gateway.ca.ca_path().to_owned();
    let mut kept = tls_connection(gateway.https, &old_ca, None).await.unwrap();
    assert_eq!(get(&mut kept, &url, Some("alice")).await.0, 200);

    // The operator renews: a certificate of another CA written over the same files.
    let new_ca = TestCa::new("renewed ca").unwrap();
    let renewed = new_ca.server("renewed").unwrap();
    std::fs::copy(&renewed.key, &gateway.files.key).unwrap();
    std::fs::copy(&renewed.cert, &gateway.files.cert).unwrap();
    eventually_async(
        "new connections get the renewed certificate",
        Duration::from_secs(10),
        async || {
            tls_connection(gateway.https, new_ca.ca_path(), None)
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
    assert!(
        tls_connection(gateway.https, &old_ca, None).await.is_err(),
        "the old certificate is no longer served"
    );
    let mut fresh = tls_connection(gateway.https, new_ca.ca_path(), None)
        .await
        .unwrap();
    assert_eq!(get(&mut fresh, &url, Some("alice")).await.0, 200);
    // The connection opened before keeps its session and keeps being served.
    assert_eq!(
        get(&mut kept, &url, Some("alice")).await,
        (200, "127.0.0.61".into())
    );
    gateway.running.shutdown().await;
}
