//! A vendor as it really writes its list: the simulated vendor's Webshare-shaped API (DRF
//! pages with full next URLs, ISO 8601 `created_at` at two offsets, `"valid": false`
//! entries, gzip, `Authorization: Token`) read with the configuration `docs/vendors.md`
//! shows for Webshare, taken from the page as written so the two cannot drift. Every valid
//! proxy is loaded with its issue time and labels, the invalid ones are refused as
//! `vendor_invalid`; when the API moves to another port of its host, the round follows
//! only with that `host:port` in `redirect_hosts`, and otherwise fails as `foreign_host`
//! without sending the token there.

use crate::common::*;
use proxypool_controller::provider::{Reconciler, RoundOutcome, StatusBoard, VendorClient};
use proxypool_controller::{Clock, ManualClock};
use proxypool_core::{DueQuery, HealthStore, ProxyRecord, UpstreamId};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_sim::{ApiKnobs, FleetConfig, ProxyKind, VendorConfig, VendorEndpoint};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

const VENDORS_MD: &str = include_str!("../../../../docs/vendors.md");
/// The Webshare example's URL line, as the page writes it.
const DOC_URL: &str =
    "url = \"https://proxy.webshare.io/api/v2/proxy/list/?mode=direct&page_size=100\"";

/// The TOML block of `docs/vendors.md`'s Webshare example.
fn documented_config() -> &'static str {
    proxypool_testkit::marked_toml_block(VENDORS_MD, "webshare-config:")
}

/// The documented configuration pointed at `url` on the simulated vendor (loopback, plain
/// http, loopback proxies) with `redirect_hosts`; nothing else is changed.
fn config_for(url: &str, redirect_hosts: &[String]) -> String {
    let documented = documented_config();
    assert!(documented.contains(DOC_URL), "{documented}");
    let hosts: Vec<String> = redirect_hosts.iter().map(|h| format!("{h:?}")).collect();
    documented.replacen(
        DOC_URL,
        &format!(
            "url = \"{url}\"\nallow_plaintext = true\nallow_private_hosts = true\n\
             redirect_hosts = [{}]",
            hosts.join(", ")
        ),
        1,
    )
}

struct Rig {
    pool: Arc<MemoryPool>,
    clock: Arc<ManualClock>,
    board: Arc<StatusBoard>,
    reconciler: Reconciler,
}

fn rig(vendor: &VendorEndpoint, redirect_hosts: &[String]) -> Rig {
    // Two entries a page: the walk follows `next` over several pages.
    let url = format!("{}&page_size=2", vendor.webshare_url());
    let text = config_text(&config_for(&url, redirect_hosts));
    let token = vendor.api_config().token.clone();
    let config = parse_config_env(&text, &[("WEBSHARE_API_TOKEN", &token)]);
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
        pool,
        clock,
        board,
        reconciler,
    }
}

async fn vendor(size: usize) -> VendorEndpoint {
    VendorEndpoint::start(VendorConfig {
        fleet: FleetConfig {
            size,
            kinds: vec![ProxyKind::Http],
            regions: vec!["us".into(), "de".into()],
            ..FleetConfig::default()
        },
        ttl: Some(Duration::from_secs(600)),
        ..VendorConfig::default()
    })
    .await
    .unwrap()
}

/// Moves the vendor's Webshare-shaped list to a second port; returns it.
async fn move_to_second_port(vendor: &VendorEndpoint) -> u16 {
    let port = vendor.serve_second_port().await.unwrap();
    vendor.set_api_knobs(ApiKnobs {
        webshare_port: Some(port),
        ..ApiKnobs::default()
    });
    port
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

fn webshare() -> UpstreamId {
    UpstreamId::new("webshare").unwrap()
}

/// Checks a successful round over `vendor`'s list: the valid entries stored as listed,
/// the invalid ones refused by their reason.
async fn every_valid_proxy_is_loaded(rig: &Rig, vendor: &VendorEndpoint, outcome: &RoundOutcome) {
    let listed = vendor.webshare_listings();
    let valid: BTreeSet<(String, u16)> = listed
        .iter()
        .filter(|(_, valid)| *valid)
        .map(|(l, _)| (l.host.clone(), l.port))
        .collect();
    let invalid = (listed.len() - valid.len()) as u32;
    assert!(invalid > 0 && !valid.is_empty(), "{listed:?}");
    assert_eq!(outcome.fetched as usize, listed.len());
    assert_eq!(outcome.report.inserted as usize, valid.len());
    assert_eq!(
        outcome.parse_dropped,
        [("vendor_invalid".to_owned(), invalid)].into(),
        "{outcome:?}"
    );
    assert!(outcome.ignored.is_empty(), "{outcome:?}");
    let status = rig.board.get(&webshare()).unwrap();
    assert_eq!(status.last_error, None);
    assert_eq!(status.last_dropped.get("vendor_invalid"), Some(&invalid));

    let records = records(rig).await;
    let stored: BTreeSet<(String, u16)> =
        records.iter().map(|r| (r.host.clone(), r.port)).collect();
    assert_eq!(stored, valid);
    for record in &records {
        let (listing, _) = listed
            .iter()
            .find(|(l, _)| (l.host.as_str(), l.port) == (record.host.as_str(), record.port))
            .unwrap();
        let credentials = record.credentials.as_ref().unwrap();
        assert_eq!(Some(&credentials.username), listing.username.as_ref());
        assert_eq!(
            Some(credentials.password.expose()),
            listing.password.as_deref()
        );
        // `created_at`, ISO 8601 at +00:00 or -07:00, to the millisecond.
        assert_eq!(record.issued_at_ms, Some(listing.issued_at_ms));
        assert_eq!(
            record
                .region
                .as_ref()
                .map(|r| r.as_str().to_ascii_lowercase()),
            listing.region.clone()
        );
        let city = record.labels.get("city").map(String::as_str);
        assert!(
            matches!(city, Some("new_york" | "los_angeles" | "são_paulo")),
            "{city:?}"
        );
        let asn = record.labels.get("asn").map(String::as_str);
        assert!(matches!(asn, Some("7922" | "3320" | "15169")), "{asn:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_webshare_config_loads_every_valid_proxy() {
    let vendor = vendor(6).await;
    let rig = rig(&vendor, &[]);
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    every_valid_proxy_is_loaded(&rig, &vendor, &outcome).await;
    // Three pages of two, walked by their full `next` URLs.
    assert_eq!(vendor.api_requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_to_another_port_is_followed_only_to_a_listed_host_and_port() {
    let vendor = vendor(6).await;
    let port = move_to_second_port(&vendor).await;
    let rig = rig(&vendor, &[format!("127.0.0.1:{port}")]);
    let outcome = rig.reconciler.reconcile_once().await.unwrap();
    every_valid_proxy_is_loaded(&rig, &vendor, &outcome).await;
    // The redirect, then three pages on the new port.
    assert_eq!(vendor.api_requests(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_to_an_unlisted_port_fails_the_round_as_foreign_host() {
    // Neither the list's host alone (its standard port, 80) nor nothing lets it through.
    for redirect_hosts in [vec![], vec!["127.0.0.1".to_owned()]] {
        let vendor = vendor(4).await;
        let port = move_to_second_port(&vendor).await;
        let rig = rig(&vendor, &redirect_hosts);
        let error = rig.reconciler.reconcile_once().await.unwrap_err();
        assert_eq!(error.kind(), "foreign_host", "{error}");
        assert!(
            error.to_string().contains(&format!("127.0.0.1:{port}")),
            "{error}"
        );
        // Only the redirect was answered: nothing, the token least of all, reached the
        // other port, and nothing was stored.
        assert_eq!(vendor.api_requests(), 1, "{redirect_hosts:?}");
        assert!(records(&rig).await.is_empty());
        let status = rig.board.get(&webshare()).unwrap();
        assert_eq!(status.last_error.as_deref(), Some("foreign_host"));
    }
}
