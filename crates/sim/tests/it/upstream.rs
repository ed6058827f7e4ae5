//! Upstream proxies over real sockets: every kind reaches the origin from its own exit,
//! credentials are enforced, and the fault knobs do what they say.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use proxypool_proto::{ProtoError, TargetAddr, socks5};
use proxypool_sim::client::{get, get_via_connect, get_via_http_proxy, get_via_socks5};
use proxypool_sim::{Origin, ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CREDS: (&str, &str) = ("alice", "s3cret");

async fn proxy(kind: ProxyKind, exit: u8) -> UpstreamProxy {
    UpstreamProxy::start(UpstreamProxyConfig {
        kind,
        exit_ip: Ipv4Addr::new(127, 0, 0, exit),
        credentials: Some((CREDS.0.into(), CREDS.1.into())),
        region: Some("eu".into()),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap()
}

fn exit(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

#[tokio::test]
async fn origin_sees_the_peer_directly() {
    let origin = Origin::start().await.unwrap();
    let got = get(origin.addr(), "/hello?x=1").await.unwrap();
    assert_eq!(got.status, 200);
    let echo = got.echo().unwrap();
    assert_eq!(echo.exit, exit(1));
    assert_eq!(echo.method, "GET");
    assert_eq!(echo.path, "/hello?x=1");
    assert_eq!(echo.host, origin.addr().to_string());
    assert_eq!(origin.requests(), 1);

    let teapot = get(origin.addr(), "/status/418").await.unwrap();
    assert_eq!(teapot.status, 418);
    assert_eq!(origin.requests_by_exit().get(&exit(1)), Some(&2));
}

#[tokio::test]
async fn http_proxy_absolute_form_and_connect_leave_from_the_exit() {
    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Http, 21).await;

    let plain = get_via_http_proxy(proxy.addr(), Some(CREDS), origin.addr(), "/plain")
        .await
        .unwrap();
    assert_eq!(plain.status, 200, "{}", plain.text());
    let echo = plain.echo().unwrap();
    assert_eq!(echo.exit, exit(21));
    assert_eq!(echo.path, "/plain");

    let tunneled = get_via_connect(proxy.addr(), Some(CREDS), origin.addr(), "/tunnel")
        .await
        .unwrap();
    assert_eq!(tunneled.echo().unwrap().exit, exit(21));

    let stats = proxy.stats();
    assert_eq!(
        (stats.requests, stats.tunnels, stats.auth_failures),
        (1, 1, 0)
    );
    assert_eq!(origin.requests_by_exit().get(&exit(21)), Some(&2));
}

#[tokio::test]
async fn http_proxy_keeps_the_client_connection_alive() {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;

    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Http, 22).await;
    let stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    for i in 0..3 {
        let req = hyper::Request::get(origin.url(&format!("/n/{i}")))
            .header(
                "proxy-authorization",
                proxypool_proto::http_connect::basic_auth_value(CREDS.0, CREDS.1),
            )
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let echo: proxypool_sim::Echo = serde_json::from_slice(&body).unwrap();
        assert_eq!(echo.path, format!("/n/{i}"));
        assert_eq!(echo.exit, exit(22));
    }
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.requests), (1, 3));
}

#[tokio::test]
async fn socks5_proxy_leaves_from_the_exit_for_ip_and_domain_targets() {
    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Socks5, 23).await;
    let by_ip = TargetAddr::Ip(origin.addr());
    let got = get_via_socks5(proxy.addr(), Some(CREDS), &by_ip, "/s")
        .await
        .unwrap();
    assert_eq!(got.echo().unwrap().exit, exit(23));

    let by_name = TargetAddr::Domain("localhost".into(), origin.addr().port());
    let got = get_via_socks5(proxy.addr(), Some(CREDS), &by_name, "/d")
        .await
        .unwrap();
    assert_eq!(got.echo().unwrap().exit, exit(23));
    assert_eq!(proxy.stats().tunnels, 2);
}

#[tokio::test]
async fn wrong_or_missing_credentials_are_refused() {
    let origin = Origin::start().await.unwrap();
    let http = proxy(ProxyKind::Http, 24).await;
    let socks = proxy(ProxyKind::Socks5, 25).await;

    let got = get_via_http_proxy(http.addr(), Some(("alice", "nope")), origin.addr(), "/")
        .await
        .unwrap();
    assert_eq!(got.status, 407);
    let got = get_via_http_proxy(http.addr(), None, origin.addr(), "/")
        .await
        .unwrap();
    assert_eq!(got.status, 407);
    let err = get_via_connect(http.addr(), Some(("bob", CREDS.1)), origin.addr(), "/")
        .await
        .unwrap_err();
    assert!(matches!(err, ProtoError::Rejected { status: 407 }), "{err}");
    assert_eq!(http.stats().auth_failures, 3);

    let target = TargetAddr::Ip(origin.addr());
    let err = get_via_socks5(socks.addr(), Some(("alice", "nope")), &target, "/")
        .await
        .unwrap_err();
    assert!(matches!(err, ProtoError::AuthRejected), "{err}");
    let err = get_via_socks5(socks.addr(), None, &target, "/")
        .await
        .unwrap_err();
    assert!(matches!(err, ProtoError::AuthRejected), "{err}");
    assert_eq!(socks.stats().auth_failures, 2);
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn dead_proxies_refuse_and_come_back() {
    let origin = Origin::start().await.unwrap();
    for (kind, n) in [(ProxyKind::Http, 26), (ProxyKind::Socks5, 27)] {
        let proxy = proxy(kind, n).await;
        proxy.set_dead(true);
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        let target = TargetAddr::Ip(origin.addr());
        let err = socks5::connect(&mut stream, &target, Some(CREDS))
            .await
            .unwrap_err();
        assert!(matches!(err, ProtoError::Io(_)), "{kind}: {err}");
        assert_eq!(proxy.stats().dead_drops, 1);

        proxy.set_dead(false);
        let got = match kind {
            ProxyKind::Http => get_via_connect(proxy.addr(), Some(CREDS), origin.addr(), "/").await,
            ProxyKind::Socks5 => get_via_socks5(proxy.addr(), Some(CREDS), &target, "/").await,
        };
        assert_eq!(got.unwrap().echo().unwrap().exit, exit(n));
    }
}

#[tokio::test]
async fn failure_rate_one_fails_every_request() {
    let origin = Origin::start().await.unwrap();
    let http = proxy(ProxyKind::Http, 28).await;
    http.set_failure_rate(1.0);
    let got = get_via_http_proxy(http.addr(), Some(CREDS), origin.addr(), "/")
        .await
        .unwrap();
    assert_eq!(got.status, 502);
    let err = get_via_connect(http.addr(), Some(CREDS), origin.addr(), "/")
        .await
        .unwrap_err();
    assert!(matches!(err, ProtoError::Rejected { status: 502 }), "{err}");

    let socks = proxy(ProxyKind::Socks5, 29).await;
    socks.set_failure_rate(1.0);
    let err = get_via_socks5(
        socks.addr(),
        Some(CREDS),
        &TargetAddr::Ip(origin.addr()),
        "/",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::SocksRejected {
                reply: socks5::Reply::GeneralFailure
            }
        ),
        "{err}"
    );
    assert_eq!(
        http.stats().injected_failures + socks.stats().injected_failures,
        3
    );
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn latency_delays_the_answer() {
    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Socks5, 30).await;
    proxy.set_latency(Duration::from_secs(30));
    let target = TargetAddr::Ip(origin.addr());
    let slow = proxypool_proto::with_timeout(
        Duration::from_millis(100),
        get_via_socks5(proxy.addr(), Some(CREDS), &target, "/"),
    )
    .await;
    assert!(matches!(slow, Err(ProtoError::Timeout(_))), "{slow:?}");
    proxy.set_latency(Duration::ZERO);
    get_via_socks5(proxy.addr(), Some(CREDS), &target, "/")
        .await
        .unwrap();
}

#[tokio::test]
async fn unreachable_targets_get_502_or_connection_refused() {
    // A port that was free a moment ago: nothing listens there now.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let http = proxy(ProxyKind::Http, 31).await;
    let err = get_via_connect(http.addr(), Some(CREDS), closed, "/")
        .await
        .unwrap_err();
    assert!(matches!(err, ProtoError::Rejected { status: 502 }), "{err}");
    let socks = proxy(ProxyKind::Socks5, 32).await;
    let err = get_via_socks5(socks.addr(), Some(CREDS), &TargetAddr::Ip(closed), "/")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProtoError::SocksRejected {
                reply: socks5::Reply::ConnectionRefused
            }
        ),
        "{err}"
    );
    assert_eq!(
        http.stats().connect_failures + socks.stats().connect_failures,
        2
    );
}

#[tokio::test]
async fn dropping_the_handle_closes_listener_and_tunnels() {
    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Socks5, 33).await;
    let addr = proxy.addr();
    let mut tunnel = TcpStream::connect(addr).await.unwrap();
    socks5::connect(&mut tunnel, &TargetAddr::Ip(origin.addr()), Some(CREDS))
        .await
        .unwrap();
    drop(proxy);
    // The tunnel ends: the read sees EOF (or a reset) instead of hanging.
    let mut buf = [0u8; 1];
    let read = tunnel.read(&mut buf).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // The listener is gone.
    let mut refused = false;
    for _ in 0..100 {
        match TcpStream::connect(addr).await {
            Err(_) => {
                refused = true;
                break;
            }
            Ok(mut s) => {
                // The accept loop may not have observed the shutdown yet: yield and retry.
                let _ = s.shutdown().await;
                tokio::task::yield_now().await;
            }
        }
    }
    assert!(refused);
}

#[tokio::test]
async fn proxy_url_is_curl_ready() {
    let http = proxy(ProxyKind::Http, 34).await;
    assert_eq!(http.url(), format!("http://alice:s3cret@{}", http.addr()));
    let socks = proxy(ProxyKind::Socks5, 35).await;
    assert_eq!(
        socks.url(),
        format!("socks5h://alice:s3cret@{}", socks.addr())
    );
    assert_eq!(socks.region(), Some("eu"));
    assert_eq!(socks.exit_ip(), Ipv4Addr::new(127, 0, 0, 35));
}

#[tokio::test]
async fn a_backconnect_gateway_keeps_a_sessions_exit_and_rotates_without_one() {
    use proxypool_sim::BackconnectConfig;
    let origin = Origin::start().await.unwrap();
    for kind in [ProxyKind::Http, ProxyKind::Socks5] {
        let gateway = UpstreamProxy::start(UpstreamProxyConfig {
            kind,
            backconnect: Some(BackconnectConfig {
                account: "acct".into(),
                password: "pw".into(),
                exits: (11..=14).map(|n| Ipv4Addr::new(127, 0, 1, n)).collect(),
                default_minutes: 10,
            }),
            ..UpstreamProxyConfig::default()
        })
        .await
        .unwrap();
        let origin_addr = origin.addr();
        let gateway_addr = gateway.addr();
        let exit_as = |user: &'static str| async move {
            let fetched = match kind {
                ProxyKind::Http => {
                    get_via_http_proxy(gateway_addr, Some((user, "pw")), origin_addr, "/").await
                }
                ProxyKind::Socks5 => {
                    let target = TargetAddr::Ip(origin_addr);
                    get_via_socks5(gateway_addr, Some((user, "pw")), &target, "/").await
                }
            };
            // The exit the origin saw, or the refusal's status (0: the handshake failed).
            match fetched {
                Ok(f) if f.status == 200 => Ok(f.echo().unwrap().exit),
                Ok(f) => Err(f.status),
                Err(_) => Err(0),
            }
        };
        let session = exit_as("acct-country-us-session-s1-sesstime-5")
            .await
            .unwrap();
        for _ in 0..3 {
            assert_eq!(
                exit_as("acct-country-us-session-s1-sesstime-5")
                    .await
                    .unwrap(),
                session,
                "{kind:?}: a session keeps its exit"
            );
        }
        let mut rotating = std::collections::BTreeSet::new();
        for _ in 0..4 {
            rotating.insert(exit_as("acct-country-de").await.unwrap());
        }
        assert!(
            rotating.len() >= 3,
            "{kind:?}: without a session it rotates: {rotating:?}"
        );
        assert_eq!(gateway.live_sessions(), 1);
        assert_eq!(gateway.countries().get("de"), Some(&4));
        assert!(
            exit_as("other-session-s1").await.is_err(),
            "{kind:?}: another account is refused"
        );
        assert_eq!(gateway.stats().auth_failures, 1, "{kind:?}");
    }
}
