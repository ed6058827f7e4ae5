//! `https` upstream proxies: the gateway speaks TLS to the proxy itself, verified against
//! the upstream's CA bundle from the snapshot, before any byte of the proxy protocol (so
//! the proxy's credentials never cross the network in clear). Plain HTTP, CONNECT and
//! SOCKS5 clients all go through it; a proxy whose certificate does not chain to the
//! upstream's CA is refused before a request reaches it, and counted.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, TlsOrigin, UPSTREAM_PASS, UPSTREAM_USER};
use crate::common::*;
use proxypool_core::control::UpstreamTls;
use proxypool_core::{Protocol, UpstreamId};
use proxypool_edge::{ServerTls, ServerTlsFiles};
use proxypool_sim::{ProxyKind, UpstreamProxy, UpstreamProxyConfig};
use proxypool_testkit::TestCa;
use std::net::Ipv4Addr;

/// An HTTPS proxy of the simulated vendor, leaving from `exit`, with a certificate of `ca`.
async fn https_proxy(ca: &TestCa, exit: Ipv4Addr) -> UpstreamProxy {
    let files = ca.server(&format!("proxy-{exit}")).unwrap();
    let tls = ServerTls::load(ServerTlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap();
    UpstreamProxy::start(UpstreamProxyConfig {
        kind: ProxyKind::Http,
        exit_ip: exit,
        credentials: Some((UPSTREAM_USER.into(), UPSTREAM_PASS.into())),
        tls: Some(tls.current()),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap()
}

fn trust(upstream: &str, ca: &TestCa) -> UpstreamTls {
    UpstreamTls {
        upstream: UpstreamId::new(upstream).unwrap(),
        ca_pem: Some(std::fs::read_to_string(ca.ca_path()).unwrap()),
        server_name: None,
        refuse_internal: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstreams_carry_every_client_protocol_over_verified_tls() {
    let _alone = alone().await;
    let origin = EchoOrigin::start().await;
    let tls_origin = TlsOrigin::start().await;
    let vendor_ca = TestCa::new("vendor ca").unwrap();
    let other_ca = TestCa::new("someone else").unwrap();
    let good = https_proxy(&vendor_ca, Ipv4Addr::new(127, 0, 0, 91)).await;
    let impostor = https_proxy(&other_ca, Ipv4Addr::new(127, 0, 0, 92)).await;
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    let controller = TestController::start(WORKER, 60_000).await;
    // Both upstreams trust the vendor's CA: the impostor's certificate chains elsewhere.
    controller.state.lock().unwrap().upstream_tls =
        vec![trust("vendor", &vendor_ca), trust("spoofed", &vendor_ca)];
    controller.publish(
        vec![
            proxy(1, Protocol::Https, good.addr(), credentials, "vendor", "us"),
            proxy(
                2,
                Protocol::Https,
                impostor.addr(),
                credentials,
                "spoofed",
                "de",
            ),
        ],
        vec![client("alice")],
    );
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    let tls_errors = "proxypool_gateway_upstream_failures_total{reason=\"proxy_tls_error\"}";
    let tls_errors_before = metric(&gateway, tls_errors).await.unwrap_or(0.0);

    let user = "alice-upstream-vendor";
    let plain = curl(&["-x", &http_proxy_url(user, gateway.http), &origin.url()]).await;
    assert_eq!(
        (plain.status, plain.body.as_str()),
        (200, "127.0.0.91"),
        "plain HTTP: {plain:?}"
    );
    let socks = curl(&["-x", &socks_proxy_url(user, gateway.socks5), &origin.url()]).await;
    assert_eq!(
        (socks.status, socks.body.as_str()),
        (200, "127.0.0.91"),
        "SOCKS5: {socks:?}"
    );
    let https = curl(&[
        "-k",
        "-x",
        &http_proxy_url(user, gateway.http),
        &format!("https://localhost:{}/", tls_origin.addr.port()),
    ])
    .await;
    assert_eq!(https.status, 200, "CONNECT: {https:?}");
    let stats = good.stats();
    assert!(
        stats.requests >= 1 && stats.tunnels >= 2,
        "the https proxy carried them: {stats:?}"
    );

    let refused = curl(&[
        "-x",
        &http_proxy_url("alice-upstream-spoofed", gateway.http),
        &origin.url(),
    ])
    .await;
    assert!(
        refused.status >= 500,
        "a proxy with a certificate of another CA is not used: {refused:?}"
    );
    assert_ne!(refused.body, "127.0.0.92", "{refused:?}");
    let seen = impostor.stats();
    assert_eq!(
        (seen.requests, seen.tunnels, seen.auth_failures),
        (0, 0, 0),
        "no request (nor its credentials) reached the impostor: {seen:?}"
    );
    let failures = metric(&gateway, tls_errors).await;
    assert!(
        failures.is_some_and(|n| n > tls_errors_before),
        "the refusal is counted: {failures:?} after {tls_errors_before}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_proxy_is_verified_under_the_configured_server_name() {
    let origin = EchoOrigin::start().await;
    let ca = TestCa::new("vendor ca").unwrap();
    // The certificate names the vendor's host only, while the list gives an address.
    let files = ca.server_for("named", &["proxy.vendor.test"]).unwrap();
    let tls = ServerTls::load(ServerTlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap();
    let named = UpstreamProxy::start(UpstreamProxyConfig {
        kind: ProxyKind::Http,
        exit_ip: Ipv4Addr::new(127, 0, 0, 93),
        credentials: Some((UPSTREAM_USER.into(), UPSTREAM_PASS.into())),
        tls: Some(tls.current()),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap();
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    let controller = TestController::start(WORKER, 60_000).await;
    let mut by_name = trust("named", &ca);
    by_name.server_name = Some("proxy.vendor.test".into());
    controller.state.lock().unwrap().upstream_tls = vec![by_name, trust("unnamed", &ca)];
    controller.publish(
        vec![
            proxy(1, Protocol::Https, named.addr(), credentials, "named", "us"),
            proxy(
                2,
                Protocol::Https,
                named.addr(),
                credentials,
                "unnamed",
                "us",
            ),
        ],
        vec![client("alice")],
    );
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    let served = curl(&[
        "-x",
        &http_proxy_url("alice-upstream-named", gateway.http),
        &origin.url(),
    ])
    .await;
    assert_eq!(
        (served.status, served.body.as_str()),
        (200, "127.0.0.93"),
        "{served:?}"
    );
    // Without the name, the address is checked against a certificate that does not carry it.
    let refused = curl(&[
        "-x",
        &http_proxy_url("alice-upstream-unnamed", gateway.http),
        &origin.url(),
    ])
    .await;
    assert!(refused.status >= 500, "{refused:?}");
    gateway.shutdown().await;
}
