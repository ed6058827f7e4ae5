//! The vendor list endpoint over real sockets: formats, fault knobs and rotation.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use proxypool_proto::{ProtoError, TargetAddr};
use proxypool_sim::client::{get, get_via_connect, get_via_socks5};
use proxypool_sim::{
    FleetConfig, ListFaults, ListFormat, Origin, ProxyKind, SimConfig, SimVendor, VendorConfig,
    VendorEndpoint,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn fleet(size: usize, first_exit: u8) -> FleetConfig {
    FleetConfig {
        size,
        regions: vec!["eu".into(), "us".into()],
        carriers: vec!["acme-mobile".into()],
        first_exit: Ipv4Addr::new(127, 0, 1, first_exit),
        ..FleetConfig::default()
    }
}

async fn vendor(format: ListFormat, size: usize, first_exit: u8) -> VendorEndpoint {
    VendorEndpoint::start(VendorConfig {
        format,
        fleet: fleet(size, first_exit),
        ..VendorConfig::default()
    })
    .await
    .unwrap()
}

async fn fetch_text(vendor: &VendorEndpoint) -> (u16, String) {
    let got = get(vendor.addr(), "/proxies").await.unwrap();
    (got.status, got.text())
}

#[tokio::test]
async fn text_lists_every_proxy_with_credentials() {
    let vendor = vendor(ListFormat::Text, 3, 10).await;
    let (status, body) = fetch_text(&vendor).await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = body.lines().collect();
    let proxies = vendor.proxies();
    assert_eq!(lines.len(), 3);
    for (line, proxy) in lines.iter().zip(&proxies) {
        assert_eq!(*line, format!("{}:sim-user:sim-pass", proxy.addr()));
    }
    let exits: Vec<Ipv4Addr> = proxies.iter().map(|p| p.exit_ip()).collect();
    assert_eq!(
        exits,
        [10, 11, 12].map(|n| Ipv4Addr::new(127, 0, 1, n)).to_vec()
    );
    let kinds: Vec<ProxyKind> = proxies.iter().map(|p| p.kind()).collect();
    assert_eq!(kinds, [ProxyKind::Http, ProxyKind::Socks5, ProxyKind::Http]);
    assert_eq!(vendor.fetches(), 1);
    assert!(vendor.url().ends_with("/proxies"));
}

#[tokio::test]
async fn text_with_scheme_prefixes_the_protocol() {
    let vendor = vendor(ListFormat::TextWithScheme, 2, 20).await;
    let (_, body) = fetch_text(&vendor).await;
    let lines: Vec<&str> = body.lines().collect();
    assert!(lines[0].starts_with("http://127.0.0.1:"), "{}", lines[0]);
    assert!(lines[1].starts_with("socks5://127.0.0.1:"), "{}", lines[1]);
}

#[tokio::test]
async fn json_lists_objects_with_labels_and_expiry() {
    let vendor = VendorEndpoint::start(VendorConfig {
        format: ListFormat::Json,
        fleet: fleet(2, 30),
        ttl: Some(Duration::from_secs(3600)),
        ..VendorConfig::default()
    })
    .await
    .unwrap();
    let got = get(vendor.addr(), "/").await.unwrap();
    let list: Vec<Value> = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(list.len(), 2);
    let proxies = vendor.proxies();
    for (entry, proxy) in list.iter().zip(&proxies) {
        assert_eq!(entry["host"], "127.0.0.1");
        assert_eq!(entry["port"], proxy.addr().port());
        assert_eq!(entry["protocol"], proxy.kind().scheme());
        assert_eq!(entry["username"], "sim-user");
        assert_eq!(entry["password"], "sim-pass");
        assert_eq!(entry["carrier"], "acme-mobile");
        assert!(entry["expires_at_ms"].as_u64().unwrap() > 1_700_000_000_000);
        assert!(entry.get("exit_ip").is_none());
    }
    assert_eq!(list[0]["region"], "eu");
    assert_eq!(list[1]["region"], "us");
    // Staggered lifetimes: the first proxy expires before the second.
    assert!(list[0]["expires_at_ms"].as_u64() < list[1]["expires_at_ms"].as_u64());
}

#[tokio::test]
async fn listed_proxies_work_and_exits_differ() {
    let sim = SimVendor::start(SimConfig {
        proxies: 4,
        first_exit: Ipv4Addr::new(127, 0, 2, 1),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let origin = sim.origin();
    for listing in sim.vendor().listings() {
        let proxy = format!("{}:{}", listing.host, listing.port)
            .parse()
            .unwrap();
        let auth = Some((
            listing.username.as_deref().unwrap(),
            listing.password.as_deref().unwrap(),
        ));
        let got = match listing.protocol {
            ProxyKind::Http => get_via_connect(proxy, auth, origin.addr(), "/").await,
            ProxyKind::Socks5 => {
                get_via_socks5(proxy, auth, &TargetAddr::Ip(origin.addr()), "/").await
            }
        };
        assert_eq!(
            got.unwrap().echo().unwrap().exit,
            IpAddr::V4(listing.exit_ip)
        );
    }
    let exits: HashSet<IpAddr> = origin.requests_by_exit().into_keys().collect();
    assert_eq!(exits.len(), 4);
    assert!(!exits.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
}

#[tokio::test]
async fn malformed_entries_are_mixed_in() {
    let vendor = vendor(ListFormat::Text, 2, 40).await;
    vendor.set_faults(ListFaults {
        malformed_entries: 5,
        ..ListFaults::default()
    });
    let (_, body) = fetch_text(&vendor).await;
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 7);
    let good: Vec<&&str> = lines
        .iter()
        .filter(|l| l.ends_with(":sim-user:sim-pass"))
        .collect();
    assert_eq!(good.len(), 2);
    // Interleaved, not just appended.
    assert!(lines[0].ends_with(":sim-pass") && !lines[1].ends_with(":sim-pass"));

    vendor.set_format(ListFormat::Json);
    let got = get(vendor.addr(), "/").await.unwrap();
    let list: Vec<Value> = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(list.len(), 7);
    let valid = list
        .iter()
        .filter(|e| e["port"].as_u64().is_some_and(|p| (1..=65535).contains(&p)))
        .filter(|e| e["host"].as_str().is_some_and(|h| !h.is_empty()))
        .filter(|e| matches!(e["protocol"].as_str(), Some("http" | "socks5")))
        .count();
    assert_eq!(valid, 2);
}

#[tokio::test]
async fn oversized_bodies_with_and_without_length() {
    let vendor = vendor(ListFormat::Json, 1, 50).await;
    vendor.set_faults(ListFaults {
        oversized_body: Some(1 << 20),
        ..ListFaults::default()
    });
    let head = raw_head(&vendor).await;
    assert!(head.contains("content-length: 1048576"), "{head}");
    let got = get(vendor.addr(), "/").await.unwrap();
    assert_eq!(got.body.len(), 1 << 20);
    // Still valid JSON: only the size is wrong.
    let list: Vec<Value> = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(list.len(), 1);

    vendor.set_faults(ListFaults {
        oversized_body: Some(1 << 20),
        chunked: true,
        ..ListFaults::default()
    });
    let head = raw_head(&vendor).await;
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    let got = get(vendor.addr(), "/").await.unwrap();
    assert_eq!(got.body.len(), 1 << 20);
}

/// The response head of one GET, lower-cased.
async fn raw_head(vendor: &VendorEndpoint) -> String {
    let mut stream = TcpStream::connect(vendor.addr()).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: v\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).await.unwrap();
    let text = String::from_utf8_lossy(&all).to_lowercase();
    text.split("\r\n\r\n").next().unwrap().to_owned()
}

#[tokio::test]
async fn error_status_and_slow_answers() {
    let vendor = vendor(ListFormat::Text, 1, 60).await;
    vendor.set_faults(ListFaults {
        status: Some(500),
        ..ListFaults::default()
    });
    let got = get(vendor.addr(), "/").await.unwrap();
    assert_eq!(got.status, 500);

    vendor.set_faults(ListFaults {
        delay: Duration::from_secs(30),
        ..ListFaults::default()
    });
    let slow =
        proxypool_proto::with_timeout(Duration::from_millis(100), get(vendor.addr(), "/")).await;
    assert!(matches!(slow, Err(ProtoError::Timeout(_))), "{slow:?}");

    vendor.set_faults(ListFaults::default());
    assert_eq!(fetch_text(&vendor).await.0, 200);
    assert_eq!(vendor.fetches(), 3);
}

#[tokio::test]
async fn manual_rotation_replaces_oldest_on_fresh_exits_and_stops_old_ones() {
    let origin = Origin::start().await.unwrap();
    let vendor = vendor(ListFormat::Text, 3, 70).await;
    let before = vendor.proxies();
    let fresh = vendor.rotate(2).await.unwrap();
    assert_eq!(fresh.len(), 2);
    assert_eq!(vendor.replaced(), 2);

    let after = vendor.proxies();
    assert_eq!(after.len(), 3);
    assert_eq!(after[0].addr(), before[2].addr());
    let exits: Vec<Ipv4Addr> = after.iter().map(|p| p.exit_ip()).collect();
    assert_eq!(
        exits,
        [72, 73, 74].map(|n| Ipv4Addr::new(127, 0, 1, n)).to_vec()
    );

    // The retired proxy no longer works even though we still hold its handle.
    let retired = &before[0];
    assert_eq!(retired.kind(), ProxyKind::Http);
    let result = get_via_connect(
        retired.addr(),
        Some(("sim-user", "sim-pass")),
        origin.addr(),
        "/",
    )
    .await;
    assert!(result.is_err(), "{result:?}");

    // The new ones are listed and do work.
    let (_, body) = fetch_text(&vendor).await;
    for proxy in &fresh {
        assert!(body.contains(&proxy.addr().to_string()));
    }
    let http = fresh.iter().find(|p| p.kind() == ProxyKind::Http).unwrap();
    let got = get_via_connect(
        http.addr(),
        Some(("sim-user", "sim-pass")),
        origin.addr(),
        "/",
    )
    .await
    .unwrap();
    assert_eq!(got.echo().unwrap().exit, IpAddr::V4(http.exit_ip()));
}

#[tokio::test]
async fn ttl_rotation_churns_the_list() {
    let vendor = VendorEndpoint::start(VendorConfig {
        fleet: fleet(2, 80),
        ttl: Some(Duration::from_millis(200)),
        ..VendorConfig::default()
    })
    .await
    .unwrap();
    let first: HashSet<Ipv4Addr> = vendor.listings().iter().map(|l| l.exit_ip).collect();
    // Both initial proxies expire within one TTL; wait for that signal, not a sleep.
    tokio::time::timeout(Duration::from_secs(10), vendor.wait_replaced(2))
        .await
        .expect("two proxies rotated out within the deadline");
    let now: HashSet<Ipv4Addr> = vendor.listings().iter().map(|l| l.exit_ip).collect();
    assert_eq!(now.len(), 2);
    assert!(first.is_disjoint(&now), "{first:?} vs {now:?}");
}
