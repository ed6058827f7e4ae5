//! The provider reconciler against a simulated vendor endpoint over real sockets: good,
//! malformed, oversized and failing responses.

use crate::common::*;
use proxypool_controller::provider::{Reconciler, RoundError, StatusBoard, VendorClient};
use proxypool_controller::{Clock, ManualClock};
use proxypool_core::{DueQuery, HealthStore, Protocol, ProxyRecord, UpstreamId};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_sim::{FleetConfig, ListFaults, ListFormat, ProxyKind, VendorConfig, VendorEndpoint};
use std::sync::Arc;
use std::time::Duration;

struct Rig {
    vendor: VendorEndpoint,
    pool: Arc<MemoryPool>,
    clock: Arc<ManualClock>,
    board: Arc<StatusBoard>,
    reconciler: Reconciler,
}

async fn rig(format: ListFormat, list_format: &str, size: usize, provider_extra: &str) -> Rig {
    let vendor = VendorEndpoint::start(VendorConfig {
        format,
        fleet: FleetConfig {
            size,
            kinds: vec![ProxyKind::Http, ProxyKind::Socks5],
            regions: vec!["us".into(), "de".into()],
            ..FleetConfig::default()
        },
        ttl: Some(Duration::from_secs(120)),
        faults: ListFaults::default(),
        api: Default::default(),
    })
    .await
    .unwrap();
    let text = config_text(&format!(
        r#"
[[upstreams]]
id = "sim"
ttl = "5m"
safety_margin = "5s"
max_size = 1000
[upstreams.provider]
kind = "http"
# the simulated vendor: plain HTTP on loopback, listing loopback proxies
allow_plaintext = true
allow_private_hosts = true
url = "{url}"
format = "{list_format}"
timeout = "500ms"
{provider_extra}
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"
"#,
        url = vendor.url()
    ));
    let config = parse_config(&text);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    // The vendor stamps expiries from the wall clock, so start the test clock there.
    let clock = ManualClock::new(proxypool_core::now_millis());
    let board = Arc::new(StatusBoard::default());
    let reconciler = Reconciler::new(
        Arc::new(config.upstreams[0].clone()),
        pool.clone(),
        clock.clone(),
        // As the controller builds it: `allow_private_hosts` lets it reach the sim.
        VendorClient::for_upstream(&config.upstreams[0]),
        board.clone(),
    );
    Rig {
        vendor,
        pool,
        clock,
        board,
        reconciler,
    }
}

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

fn sim() -> UpstreamId {
    UpstreamId::new("sim").unwrap()
}

#[tokio::test]
async fn a_good_text_list_is_inserted_then_refreshed() {
    let rig = rig(ListFormat::TextWithScheme, "text", 4, "").await;
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (4, 4));
    let stored = records(&rig.pool, rig.clock.now()).await;
    assert_eq!(stored.len(), 4);
    for listing in rig.vendor.listings() {
        let record = stored
            .iter()
            .find(|r| r.port == listing.port)
            .expect("listed proxy stored");
        let expected = match listing.protocol {
            ProxyKind::Http => Protocol::Http,
            ProxyKind::Socks5 => Protocol::Socks5,
        };
        assert_eq!(record.protocol, expected);
        let creds = record.credentials.as_ref().unwrap();
        assert_eq!(creds.username, "sim-user");
        assert_eq!(creds.password.expose(), "sim-pass");
    }

    rig.clock.advance(1_000);
    let again = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((again.report.inserted, again.report.refreshed), (0, 4));
    let status = rig.board.get(&sim()).unwrap();
    assert_eq!(status.last_error, None);
    assert_eq!(status.total_fetches, 2);
    assert_eq!(status.last_refreshed, 4);
    assert_eq!(rig.vendor.fetches(), 2);
}

#[tokio::test]
async fn a_json_list_carries_labels_and_vendor_expiry() {
    let rig = rig(ListFormat::Json, "json", 4, "").await;
    let now = rig.clock.now();
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 4);
    let stored = records(&rig.pool, now).await;
    assert!(
        stored
            .iter()
            .any(|r| r.region.as_ref().map(|l| l.as_str()) == Some("de"))
    );
    for record in &stored {
        // The vendor's own expiry (about 120 s from now) is shorter than our 5 min TTL.
        assert!(
            record.hard_expiry_ms < now + 300_000,
            "{}",
            record.hard_expiry_ms
        );
        assert_eq!(record.usable_until_ms, record.hard_expiry_ms - 5_000);
    }
}

#[tokio::test]
async fn malformed_entries_are_dropped_by_reason_without_failing_the_list() {
    for (format, name) in [
        (ListFormat::TextWithScheme, "text"),
        (ListFormat::Json, "json"),
    ] {
        let rig = rig(format, name, 3, "").await;
        rig.vendor.set_faults(ListFaults {
            malformed_entries: 7,
            ..ListFaults::default()
        });
        let outcome = rig.reconciler.reconcile_once().await.unwrap();
        assert_eq!(
            outcome.report.inserted, 3,
            "{name}: the good entries still go in"
        );
        let status = rig.board.get(&sim()).unwrap();
        let dropped: u32 = status.last_dropped.values().sum();
        assert_eq!(dropped, 7, "{name}: {:?}", status.last_dropped);
        assert!(
            status.last_dropped.len() >= 2,
            "{name}: counted by reason: {:?}",
            status.last_dropped
        );
        assert_eq!(status.last_error, None);
    }
}

#[tokio::test]
async fn an_oversized_response_fails_the_fetch_whole() {
    let rig = rig(ListFormat::TextWithScheme, "text", 3, "max_bytes = 4096").await;
    for chunked in [false, true] {
        rig.vendor.set_faults(ListFaults {
            oversized_body: Some(64 * 1024),
            chunked,
            ..ListFaults::default()
        });
        let error = rig.reconciler.reconcile_once().await.unwrap_err();
        assert_eq!(error.kind(), "too_large", "chunked = {chunked}");
    }
    assert!(
        records(&rig.pool, rig.clock.now()).await.is_empty(),
        "nothing from a refused body"
    );
    let status = rig.board.get(&sim()).unwrap();
    assert_eq!(status.last_error.as_deref(), Some("too_large"));
    assert_eq!(status.consecutive_failures, 2);

    // Back to normal: the next round succeeds and resets the failure count.
    rig.vendor.set_faults(ListFaults::default());
    rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(rig.board.get(&sim()).unwrap().consecutive_failures, 0);
}

#[tokio::test]
async fn failing_vendors_are_reported_by_kind() {
    let rig = rig(ListFormat::Json, "json", 2, "").await;
    rig.vendor.set_faults(ListFaults {
        status: Some(500),
        ..ListFaults::default()
    });
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert!(matches!(error, RoundError::Fetch(_)));
    assert_eq!(error.kind(), "http_status");

    rig.vendor.set_faults(ListFaults {
        delay: Duration::from_secs(3),
        ..ListFaults::default()
    });
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), "timeout");
    assert!(records(&rig.pool, rig.clock.now()).await.is_empty());

    // A vendor that is gone altogether.
    let url = rig.vendor.url();
    let listening = rig.vendor.addr();
    drop(rig.vendor);
    // Its listener closes on its own task, once the vendor's shutdown reaches it.
    eventually_async(
        "the vendor stopped listening",
        Duration::from_secs(10),
        async || {
            let connected = tokio::net::TcpStream::connect(listening).await;
            connected.is_err().then_some(())
        },
    )
    .await;
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), "connect", "{url}");
    let status = rig.board.get(&sim()).unwrap();
    assert_eq!((status.consecutive_failures, status.total_failures), (3, 3));
}

#[tokio::test]
async fn a_body_that_is_not_a_list_fails_as_malformed() {
    // A JSON upstream fed a text list.
    let rig = rig(ListFormat::TextWithScheme, "json", 2, "").await;
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), "malformed_body");
}
