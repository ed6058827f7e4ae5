//! Interop with third-party upstream proxies from Debian: tinyproxy (HTTP, Basic auth)
//! and microsocks (SOCKS5, username/password), each leaving from its own exit address.

use crate::common::control::TestController;
use crate::common::upstreams::{EchoOrigin, TlsOrigin, UPSTREAM_PASS, UPSTREAM_USER, Upstream};
use crate::common::*;
use proxypool_core::Protocol;
use std::net::Ipv4Addr;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tinyproxy_and_microsocks_upstreams_carry_http_https_and_socks5() {
    let origin = EchoOrigin::start().await;
    let tls = TlsOrigin::start().await;
    let tinyproxy = Upstream::http(Ipv4Addr::new(127, 0, 0, 82)).await;
    let microsocks = Upstream::socks5(Ipv4Addr::new(127, 0, 0, 83)).await;
    let credentials = Some((UPSTREAM_USER, UPSTREAM_PASS));
    let controller = TestController::start(WORKER, 60_000).await;
    controller.publish(
        vec![
            proxy(1, Protocol::Http, tinyproxy.addr, credentials, "tiny", "us"),
            proxy(
                2,
                Protocol::Socks5,
                microsocks.addr,
                credentials,
                "micro",
                "de",
            ),
        ],
        vec![client("alice")],
    );
    let gateway = Running::start(config(&controller)).await;
    acked(&controller, 1).await;
    for (user, exit) in [
        ("alice-upstream-tiny", "127.0.0.82"),
        ("alice-upstream-micro", "127.0.0.83"),
    ] {
        let plain = curl(&["-x", &http_proxy_url(user, gateway.http), &origin.url()]).await;
        assert_eq!(
            (plain.status, plain.body.as_str()),
            (200, exit),
            "{user}: {plain:?}"
        );
        let socks = curl(&["-x", &socks_proxy_url(user, gateway.socks5), &origin.url()]).await;
        assert_eq!(
            (socks.status, socks.body.as_str()),
            (200, exit),
            "{user}: {socks:?}"
        );
        let https = curl(&[
            "-k",
            "-x",
            &http_proxy_url(user, gateway.http),
            &format!("https://localhost:{}/", tls.addr.port()),
        ])
        .await;
        assert_eq!(https.status, 200, "{user}: {https:?}");
    }
    gateway.shutdown().await;
}
