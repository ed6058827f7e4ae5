//! The TLS to an upstream's `https` proxies (`proxy_tls`) reaches every gateway in its
//! snapshot, counted in the checksum the gateway verifies: the CA bundle's text and the
//! server name, for that upstream only.

use crate::common::*;
use proxypool_core::control::WorkerSnapshot;
use proxypool_snapshot::snapshot_checksum;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_carry_each_upstreams_proxy_tls() {
    let ca = proxypool_testkit::TestCa::new("vendor ca").unwrap();
    let with_tls = static_upstream("vendor")
        + &format!(
            "[upstreams.proxy_tls]\nca = \"{}\"\nserver_name = \"proxy.vendor.test\"\n",
            ca.ca_path().display()
        );
    let config = parse_config(&config_text(&(with_tls + &static_upstream("plain"))));
    let (serving, pool, _clock) = controller(config);
    seed_available(pool.as_ref(), T0, "vendor", 2).await;
    let client = ControlClient::new(serve_control(&serving).await, Some(WORKER_TOKEN));
    client.register("gw-a", "s").await;
    serving.ownership_manager().round().await.unwrap();
    let reply = client.snapshot("gw-a", "s", 0, 0).await;
    let snapshot: WorkerSnapshot = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(
        snapshot.upstream_tls.len(),
        1,
        "{:?}",
        snapshot.upstream_tls
    );
    let shipped = &snapshot.upstream_tls[0];
    assert_eq!(shipped.upstream.as_str(), "vendor");
    assert_eq!(
        shipped.ca_pem.as_deref(),
        Some(std::fs::read_to_string(ca.ca_path()).unwrap().as_str())
    );
    assert_eq!(shipped.server_name.as_deref(), Some("proxy.vendor.test"));
    assert_eq!(
        snapshot_checksum(
            &snapshot.proxies,
            &snapshot.held,
            &snapshot.clients,
            &snapshot.advisories,
            snapshot.ticket_key.as_ref(),
            &snapshot.upstream_tls,
        ),
        snapshot.reference.checksum,
        "the gateway's check of the checksum covers it"
    );
    assert_ne!(
        snapshot_checksum(
            &snapshot.proxies,
            &snapshot.held,
            &snapshot.clients,
            &snapshot.advisories,
            snapshot.ticket_key.as_ref(),
            &[],
        ),
        snapshot.reference.checksum,
        "a snapshot stripped of it fails the check"
    );
}
