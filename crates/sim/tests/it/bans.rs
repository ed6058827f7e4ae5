//! The origin's bans over real sockets: names under `.test` reach the origin through every
//! kind of upstream, a banned (exit, host) pair gets the ban's status while other exits and
//! other hosts do not, bans change at runtime, and every request is counted per pair.

use std::net::{IpAddr, Ipv4Addr};

use proxypool_proto::TargetAddr;
use proxypool_sim::client::{get_named_via_connect, get_named_via_http_proxy, get_via_socks5};
use proxypool_sim::origin::host_name;
use proxypool_sim::{HostCount, Origin, ProxyKind, StatusCode, UpstreamProxy, UpstreamProxyConfig};

const CREDS: (&str, &str) = ("alice", "s3cret");
const SHOP_A: &str = "shop-a.test";
const SHOP_B: &str = "shop-b.test";

async fn proxy(kind: ProxyKind, exit: u8) -> UpstreamProxy {
    UpstreamProxy::start(UpstreamProxyConfig {
        kind,
        exit_ip: Ipv4Addr::new(127, 0, 0, exit),
        credentials: Some((CREDS.0.into(), CREDS.1.into())),
        ..UpstreamProxyConfig::default()
    })
    .await
    .unwrap()
}

fn exit(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// `GET /` on `host` (at the origin's port) in absolute form through `proxy`: the status
/// and the host the origin saw.
async fn fetch(proxy: &UpstreamProxy, origin: &Origin, host: &str) -> (u16, String) {
    let authority = format!("{host}:{}", origin.addr().port());
    let got = get_named_via_http_proxy(proxy.addr(), Some(CREDS), &authority, "/page")
        .await
        .unwrap();
    let echo = got
        .echo()
        .unwrap_or_else(|| panic!("not an echo: {}", got.text()));
    assert_eq!(echo.exit, IpAddr::V4(proxy.exit_ip()));
    (got.status, echo.host)
}

fn count(requests: u64, banned: u64) -> HostCount {
    HostCount { requests, banned }
}

#[tokio::test]
async fn a_ban_refuses_one_exit_for_one_host_only() {
    let origin = Origin::start().await.unwrap();
    let banned = proxy(ProxyKind::Http, 41).await;
    let other = proxy(ProxyKind::Http, 42).await;
    let port = origin.addr().port();

    // Before any ban both names reach the origin through both exits.
    assert_eq!(
        fetch(&banned, &origin, SHOP_A).await,
        (200, format!("{SHOP_A}:{port}"))
    );
    assert_eq!(fetch(&other, &origin, SHOP_B).await.0, 200);

    origin.ban(exit(41), SHOP_A, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(fetch(&banned, &origin, SHOP_A).await.0, 429);
    assert_eq!(fetch(&banned, &origin, SHOP_B).await.0, 200, "another host");
    assert_eq!(fetch(&other, &origin, SHOP_A).await.0, 200, "another exit");
    // A Host in another case, with a trailing dot, is the same host.
    assert_eq!(fetch(&banned, &origin, "Shop-A.TEST.").await.0, 429);

    // Banning again changes the status; lifting it lets the exit through again.
    origin.ban(exit(41), SHOP_A, StatusCode::FORBIDDEN);
    assert_eq!(fetch(&banned, &origin, SHOP_A).await.0, 403);
    assert_eq!(
        origin.bans().into_iter().collect::<Vec<_>>(),
        [((exit(41), SHOP_A.to_owned()), StatusCode::FORBIDDEN)]
    );
    assert!(origin.unban(exit(41), SHOP_A));
    assert!(!origin.unban(exit(41), SHOP_A), "already lifted");
    assert_eq!(fetch(&banned, &origin, SHOP_A).await.0, 200);

    assert_eq!(origin.host_counts(exit(41), SHOP_A), count(5, 3));
    assert_eq!(origin.host_counts(exit(41), SHOP_B), count(1, 0));
    assert_eq!(origin.host_counts(exit(42), SHOP_A), count(1, 0));
    assert_eq!(origin.host_counts(exit(42), SHOP_B), count(1, 0));
    assert_eq!(origin.host_counts(exit(43), SHOP_A), count(0, 0));
    assert_eq!(origin.requests_by_exit_and_host().len(), 4);
    assert_eq!(origin.requests(), 8);
}

#[tokio::test]
async fn bans_apply_inside_connect_and_socks5_tunnels_and_clear_at_once() {
    let origin = Origin::start().await.unwrap();
    let http = proxy(ProxyKind::Http, 44).await;
    let socks = proxy(ProxyKind::Socks5, 45).await;
    let port = origin.addr().port();
    origin.ban(exit(44), SHOP_A, StatusCode::FORBIDDEN);
    origin.ban(exit(45), SHOP_B, StatusCode::TOO_MANY_REQUESTS);

    let tunneled =
        get_named_via_connect(http.addr(), Some(CREDS), &format!("{SHOP_A}:{port}"), "/")
            .await
            .unwrap();
    assert_eq!(tunneled.status, 403);
    let socks_b = TargetAddr::domain(SHOP_B, port).unwrap();
    let through_socks = get_via_socks5(socks.addr(), Some(CREDS), &socks_b, "/")
        .await
        .unwrap();
    assert_eq!(through_socks.status, 429);
    assert_eq!(through_socks.echo().unwrap().exit, exit(45));
    let socks_a = TargetAddr::domain(SHOP_A, port).unwrap();
    let other_host = get_via_socks5(socks.addr(), Some(CREDS), &socks_a, "/")
        .await
        .unwrap();
    assert_eq!(other_host.status, 200);

    origin.clear_bans();
    assert!(origin.bans().is_empty());
    let after = get_via_socks5(socks.addr(), Some(CREDS), &socks_b, "/")
        .await
        .unwrap();
    assert_eq!(after.status, 200);
    assert_eq!(origin.host_counts(exit(45), SHOP_B), count(2, 1));
    assert_eq!(origin.host_counts(exit(44), SHOP_A), count(1, 1));
}

#[tokio::test]
async fn a_status_path_does_not_lift_a_ban() {
    let origin = Origin::start().await.unwrap();
    let proxy = proxy(ProxyKind::Http, 46).await;
    let authority = format!("{SHOP_A}:{}", origin.addr().port());
    origin.ban(exit(46), SHOP_A, StatusCode::TOO_MANY_REQUESTS);
    let got = get_named_via_http_proxy(proxy.addr(), Some(CREDS), &authority, "/status/200")
        .await
        .unwrap();
    assert_eq!(got.status, 429);
}

#[test]
fn host_names_drop_the_port_the_dot_and_the_case() {
    assert_eq!(host_name("Shop-A.test.:8080"), "shop-a.test");
    assert_eq!(host_name("shop-a.test"), "shop-a.test");
    assert_eq!(host_name("127.0.0.1:80"), "127.0.0.1");
    assert_eq!(host_name("[::1]:80"), "::1");
    assert_eq!(host_name("::1"), "::1");
    assert_eq!(host_name(""), "");
}
