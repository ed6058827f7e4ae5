//! Vendor list APIs against the simulated vendor, over real sockets: a paginated,
//! token-authenticated, gzip (or deflate) JSON API with its own field names behind one
//! redirect is read whole; a redirect or a next link to a foreign host, a missing token and
//! a walk past `max_pages` fail the round whole (nothing upserted, the kind on the
//! upstream's status); a text list behind HTTP Basic is read in every line shape.

use crate::common::*;
use proxypool_controller::provider::{Reconciler, RoundError, StatusBoard, VendorClient};
use proxypool_controller::{Clock, ManualClock};
use proxypool_core::{DueQuery, HealthStore, ProxyRecord, UpstreamId};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_sim::{
    ApiKnobs, ContentEncoding, FleetConfig, ProxyKind, VendorConfig, VendorEndpoint,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

/// The API's own field names, mapped.
const FIELDS: &str = r#"
[upstreams.provider.fields]
list = "/result/items"
host = "/addr"
port = "/port_no"
protocol = "/kind"
username = "/login"
password = "/secret"
region = "/geo/country"
city = "/geo/city"
carrier = "/isp"
expires_at = "/valid_until"
issued_at = "/issued"
time_unit = "seconds"
"#;

const NEXT_URL_PAGES: &str = r#"
[upstreams.provider.pagination]
style = "next_url"
next = "/links/next"
"#;

struct Rig {
    vendor: VendorEndpoint,
    pool: Arc<MemoryPool>,
    clock: Arc<ManualClock>,
    board: Arc<StatusBoard>,
    reconciler: Reconciler,
}

/// A file of its own holding `secret`, for a `{ file = ... }` reference (tests run in
/// parallel: none may read another's half-written file).
fn secret_file(name: &str, secret: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("proxypool-{name}-{}-{n}", std::process::id()));
    std::fs::write(&path, secret).unwrap();
    path.display().to_string()
}

fn token_auth(token: &str) -> String {
    format!(
        "[upstreams.provider.auth.header]\nname = \"Authorization\"\nscheme = \"Token\"\nvalue = {{ file = \"{}\" }}\n",
        secret_file(&format!("api-token-{token}"), token)
    )
}

async fn vendor(size: usize) -> VendorEndpoint {
    VendorEndpoint::start(VendorConfig {
        fleet: FleetConfig {
            size,
            kinds: vec![ProxyKind::Http, ProxyKind::Socks5],
            regions: vec!["us".into(), "de".into()],
            carriers: vec!["att".into()],
            ..FleetConfig::default()
        },
        ttl: Some(Duration::from_secs(120)),
        ..VendorConfig::default()
    })
    .await
    .unwrap()
}

/// A reconciler of `url` on `vendor` in `format`, with more provider settings.
fn rig(vendor: VendorEndpoint, url: &str, format: &str, provider_extra: &str) -> Rig {
    let text = config_text(&format!(
        r#"
[[upstreams]]
id = "api"
ttl = "5m"
safety_margin = "5s"
max_size = 1000
[upstreams.provider]
kind = "http"
allow_plaintext = true
allow_private_hosts = true
url = "{url}"
format = "{format}"
timeout = "2s"
{provider_extra}
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"
"#
    ));
    let config = parse_config(&text);
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
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

async fn records(rig: &Rig) -> Vec<ProxyRecord> {
    rig.pool
        .due_for_check(
            rig.clock.now(),
            DueQuery {
                limit: 10_000,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap()
}

fn listed(vendor: &VendorEndpoint) -> BTreeSet<(String, u16)> {
    vendor
        .listings()
        .into_iter()
        .map(|l| (l.host, l.port))
        .collect()
}

fn stored(records: &[ProxyRecord]) -> BTreeSet<(String, u16)> {
    records.iter().map(|r| (r.host.clone(), r.port)).collect()
}

/// A listener on another loopback host that only counts the connections it gets.
async fn foreign_host() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let reached = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&reached);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::Relaxed);
            drop(socket);
        }
    });
    (format!("http://127.0.0.2:{port}/collect"), reached)
}

fn api() -> UpstreamId {
    UpstreamId::new("api").unwrap()
}

async fn fails_whole(rig: &Rig, kind: &str) -> RoundError {
    let error = rig.reconciler.reconcile_once().await.unwrap_err();
    assert_eq!(error.kind(), kind, "{error}");
    assert!(records(rig).await.is_empty(), "nothing upserted");
    let status = rig.board.get(&api()).unwrap();
    assert_eq!(status.last_error.as_deref(), Some(kind));
    assert_eq!(status.total_failures, 1);
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paginated_gzip_token_api_behind_one_redirect_is_read_whole() {
    let vendor = vendor(6).await;
    vendor.set_api_knobs(ApiKnobs {
        redirect_once: true,
        ..ApiKnobs::default()
    });
    let url = vendor.api_url();
    let token = vendor.api_config().token.clone();
    let extra = format!("{}{NEXT_URL_PAGES}{FIELDS}", token_auth(&token));
    let rig = rig(vendor, &url, "json", &extra);
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (6, 6));
    assert!(outcome.parse_dropped.is_empty(), "{outcome:?}");
    // One redirect, then three pages of two.
    assert_eq!(rig.vendor.api_requests(), 4);
    let records = records(&rig).await;
    assert_eq!(stored(&records), listed(&rig.vendor));
    let listings = rig.vendor.listings();
    for record in &records {
        let listing = listings
            .iter()
            .find(|l| (l.host.as_str(), l.port) == (record.host.as_str(), record.port))
            .unwrap();
        assert_eq!(record.protocol.to_string(), listing.protocol.scheme());
        let credentials = record.credentials.as_ref().unwrap();
        assert_eq!(credentials.username, "sim-user");
        assert_eq!(credentials.password.expose(), "sim-pass");
        assert_eq!(
            record.region.as_ref().map(|r| r.as_str()),
            listing.region.as_deref()
        );
        assert_eq!(record.carrier.as_ref().map(|c| c.as_str()), Some("att"));
        // Stored in the one canonical form of a place.
        assert_eq!(
            record.labels.get("city").map(String::as_str),
            Some("springfield")
        );
        // `valid_until` is in seconds: the vendor's expiry, to the second.
        let expiry = listing.expires_at_ms.unwrap() / 1000 * 1000;
        assert_eq!(record.hard_expiry_ms, expiry);
        assert_eq!(
            record.issued_at_ms,
            Some(listing.issued_at_ms / 1000 * 1000)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deflate_pages_walked_by_link_header_or_page_number_are_read_whole() {
    for (pages, requests) in [
        (
            "[upstreams.provider.pagination]\nstyle = \"link_header\"\n",
            3,
        ),
        // The empty fourth page ends the walk.
        (
            "[upstreams.provider.pagination]\nstyle = \"query_param\"\nparam = \"page\"\nstart = 1\nstep = 1\n",
            4,
        ),
    ] {
        let vendor = vendor(6).await;
        vendor.set_api_knobs(ApiKnobs {
            encoding: ContentEncoding::Deflate,
            ..ApiKnobs::default()
        });
        let url = vendor.api_url();
        let token = vendor.api_config().token.clone();
        let extra = format!("{}{pages}{FIELDS}", token_auth(&token));
        let rig = rig(vendor, &url, "json", &extra);
        let outcome = rig.reconciler.reconcile_once().await.unwrap();
        assert_eq!(
            (outcome.fetched, outcome.report.inserted),
            (6, 6),
            "{pages}"
        );
        assert_eq!(rig.vendor.api_requests(), requests, "{pages}");
        assert_eq!(stored(&records(&rig).await), listed(&rig.vendor));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_key_is_sent_on_every_page() {
    let vendor = vendor(5).await;
    let url = vendor.api_url();
    let key = secret_file("api-query-key", &vendor.api_config().token);
    let extra = format!(
        "[upstreams.provider.auth.query]\nname = \"key\"\nvalue = {{ file = \"{key}\" }}\n{NEXT_URL_PAGES}{FIELDS}"
    );
    let rig = rig(vendor, &url, "json", &extra);
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (5, 5));
    assert_eq!(rig.vendor.api_requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_401_and_nothing_is_upserted() {
    for auth in [String::new(), token_auth("not-the-token")] {
        let vendor = vendor(4).await;
        let url = vendor.api_url();
        let rig = rig(
            vendor,
            &url,
            "json",
            &format!("{auth}{NEXT_URL_PAGES}{FIELDS}"),
        );
        let error = fails_whole(&rig, "http_status").await;
        assert!(error.to_string().contains("401"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_foreign_host_is_refused_and_shown_in_the_status() {
    let (foreign, reached) = foreign_host().await;
    let vendor = vendor(4).await;
    vendor.set_api_knobs(ApiKnobs {
        foreign_redirect: Some(foreign.clone()),
        ..ApiKnobs::default()
    });
    let url = vendor.api_url();
    let token = vendor.api_config().token.clone();
    let extra = format!("{}{NEXT_URL_PAGES}{FIELDS}", token_auth(&token));
    let refused = rig(vendor, &url, "json", &extra);
    let error = fails_whole(&refused, "foreign_host").await;
    assert!(error.to_string().contains("127.0.0.2"), "{error}");
    assert_eq!(reached.load(Ordering::Relaxed), 0, "the token never left");

    // Listed in redirect_hosts with its port, the same redirect is followed.
    let authority = foreign
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let vendor = proxypool_sim::VendorEndpoint::start(VendorConfig::default())
        .await
        .unwrap();
    vendor.set_api_knobs(ApiKnobs {
        foreign_redirect: Some(foreign),
        ..ApiKnobs::default()
    });
    let url = vendor.api_url();
    let extra = format!(
        "redirect_hosts = [\"{authority}\"]\n{}{NEXT_URL_PAGES}{FIELDS}",
        token_auth(&token)
    );
    let allowed = rig(vendor, &url, "json", &extra);
    let error = allowed.reconciler.reconcile_once().await.unwrap_err();
    assert_ne!(error.kind(), "foreign_host", "{error}");
    assert_eq!(reached.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_link_to_a_foreign_host_fails_the_round_whole() {
    let (foreign, reached) = foreign_host().await;
    let vendor = vendor(6).await;
    vendor.set_api_knobs(ApiKnobs {
        foreign_next: Some(foreign),
        ..ApiKnobs::default()
    });
    let url = vendor.api_url();
    let token = vendor.api_config().token.clone();
    let extra = format!("{}{NEXT_URL_PAGES}{FIELDS}", token_auth(&token));
    let rig = rig(vendor, &url, "json", &extra);
    // The first page was read, and is not upserted on its own.
    fails_whole(&rig, "foreign_host").await;
    assert_eq!(rig.vendor.api_requests(), 1);
    assert_eq!(reached.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_past_max_pages_fails_whole_and_one_within_it_succeeds() {
    let vendor = vendor(6).await;
    let url = vendor.api_url();
    let token = vendor.api_config().token.clone();
    let extra = format!(
        "{}{NEXT_URL_PAGES}max_pages = 2\n{FIELDS}",
        token_auth(&token)
    );
    let rig = rig(vendor, &url, "json", &extra);
    fails_whole(&rig, "too_many_pages").await;
    assert_eq!(
        rig.vendor.api_requests(),
        2,
        "no page past the bound is asked for"
    );

    let vendor = self::vendor(6).await;
    let url = vendor.api_url();
    let extra = extra.replace("max_pages = 2", "max_pages = 3");
    let rig = self::rig(vendor, &url, "json", &extra);
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 6);
}

fn basic_auth(password: &str) -> String {
    format!(
        "[upstreams.provider.auth.basic]\nusername = \"list-user\"\npassword = {{ file = \"{}\" }}\n",
        secret_file(&format!("basic-{password}"), password)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_basic_auth_text_list_in_every_line_shape_is_read() {
    let vendor = vendor(8).await;
    let url = vendor.basic_url();
    let rig = rig(vendor, &url, "text", &basic_auth("list-pass"));
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!((outcome.fetched, outcome.report.inserted), (8, 8));
    assert!(outcome.parse_dropped.is_empty(), "{outcome:?}");
    let records = records(&rig).await;
    assert_eq!(stored(&records), listed(&rig.vendor));
    // `host:port` carries no credentials; the three other shapes carry the vendor's.
    let with_credentials = records
        .iter()
        .filter(|r| {
            r.credentials
                .as_ref()
                .is_some_and(|c| c.username == "sim-user" && c.password.expose() == "sim-pass")
        })
        .count();
    assert_eq!(with_credentials, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_basic_password_is_an_http_status_401() {
    let vendor = vendor(4).await;
    let url = vendor.basic_url();
    let rig = rig(vendor, &url, "text", &basic_auth("wrong-pass"));
    let error = fails_whole(&rig, "http_status").await;
    assert!(error.to_string().contains("401"), "{error}");
}

/// Pages that are decompression bombs in `encoding`: a small body that decodes to 16 times
/// the cap. The round fails as `too_large` with nothing upserted (reading stops at the
/// cap, so what it buffers stays within it); once the vendor answers properly again, the
/// next round reads the list.
async fn a_bomb_is_refused_at_the_cap(encoding: ContentEncoding) {
    const CAP: usize = 1024 * 1024;
    let vendor = vendor(4).await;
    vendor.set_api_knobs(ApiKnobs {
        encoding,
        bomb_bytes: Some(16 * CAP),
        ..ApiKnobs::default()
    });
    let url = vendor.api_url();
    let token = vendor.api_config().token.clone();
    let extra = format!(
        "max_bytes = {CAP}\n{}{NEXT_URL_PAGES}{FIELDS}",
        token_auth(&token)
    );
    let rig = rig(vendor, &url, "json", &extra);
    let error = fails_whole(&rig, "too_large").await;
    assert_eq!(error.to_string(), "the response is larger than max_bytes");
    assert_eq!(rig.vendor.api_requests(), 1);

    rig.vendor.set_api_knobs(ApiKnobs {
        encoding,
        ..ApiKnobs::default()
    });
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    assert_eq!(outcome.report.inserted, 4);
    assert_eq!(rig.board.get(&api()).unwrap().last_error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_refused_at_the_cap_and_the_round_fails_cleanly() {
    a_bomb_is_refused_at_the_cap(ContentEncoding::Gzip).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deflate_bomb_is_refused_at_the_cap_and_the_round_fails_cleanly() {
    a_bomb_is_refused_at_the_cap(ContentEncoding::Deflate).await;
}
