//! Incremental snapshots at 100,000 proxies, over the real control API: one cooldown
//! change and one lease renewal each reach the worker as a delta of a few hundred bytes
//! (checked by the client, which applies it to what it holds and compares checksums), and
//! a worker that missed a delta, or starts over, gets the whole snapshot.
//!
//! It reads what was served from the process's one metrics registry, so it runs one at a
//! time with the other tests that do (`SERIAL`).

use crate::SERIAL;
use crate::common::*;
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, CooldownChange, CooldownStore, Domain, DomainCooldown,
    FetchedBatch, HealthBatch, HealthObservation, OwnershipRepository, Protocol, ProxyId,
    UpstreamId, WorkerId,
};
use serde_json::Value;

const PROXIES: usize = 100_000;

/// `n` AVAILABLE proxies of one upstream, upserted and checked in chunks.
async fn seed(pool: &dyn ActivityPool, now: u64, n: usize) -> Vec<ProxyId> {
    let mut ids = Vec::with_capacity(n);
    for chunk in 0..n.div_ceil(1_000) {
        let candidates: Vec<Candidate> = (chunk * 1_000..((chunk + 1) * 1_000).min(n))
            .map(|i| {
                let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xff, i & 0xff);
                Candidate::new(Protocol::Http, &host, 8080)
            })
            .collect();
        pool.upsert(
            now,
            FetchedBatch {
                upstream: UpstreamId::new("bulk").unwrap(),
                operation_id: None,
                ttl_ms: 600_000,
                safety_margin_ms: 10_000,
                max_size: 2 * n as u64,
                default_max_sessions: 4,
                candidates,
            },
        )
        .await
        .unwrap();
    }
    let due = pool
        .due_for_check(
            now,
            proxypool_core::DueQuery {
                limit: n,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap();
    let checked: Vec<ProxyId> = due.iter().map(|r| r.id.clone()).collect();
    for chunk in checked.chunks(5_000) {
        pool.apply_health(
            now,
            HealthBatch {
                observations: chunk
                    .iter()
                    .map(|id| HealthObservation {
                        proxy_id: id.clone(),
                        checked_at_ms: now,
                        outcome: CheckOutcome::Success { latency_ms: 5 },
                    })
                    .collect(),
                unhealthy_after_failures: 3,
            },
        )
        .await
        .unwrap();
    }
    ids.extend(checked);
    ids
}

fn listed<'a>(snapshot: &'a Value, id: &ProxyId) -> &'a Value {
    snapshot["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} is listed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_change_at_100k_proxies_is_a_delta_of_a_few_hundred_bytes() {
    let _serial = SERIAL.lock().await;
    let text = config_text("").replace("[snapshot]\n", "[snapshot]\nmax_proxies = 100000\n");
    let (controller, pool, _clock) = controller(parse_config(&text));
    let metrics = proxypool_metrics::install().unwrap();
    // The other tests of this process served updates too (before this one took `SERIAL`):
    // what this one served is the difference.
    let served_before = metrics.render();
    let now = T0;
    let ids = seed(pool.as_ref(), now, PROXIES).await;
    assert_eq!(ids.len(), PROXIES);
    let addr = serve_control(&controller).await;
    let client = ControlClient::new(addr, Some(WORKER_TOKEN));
    assert_eq!(client.register("gw-a", "s").await.status, 200);
    let worker = WorkerId::new("gw-a").unwrap();
    let mut epochs = std::collections::HashMap::new();
    for id in &ids {
        let assignment = pool.assign(now, id, &worker, 30_000).await.unwrap();
        epochs.insert(id.clone(), assignment.epoch);
    }

    // The first snapshot is whole: every proxy.
    let first = client.snapshot("gw-a", "s", 0, 0).await;
    assert_eq!(first.update, Some("full"));
    let whole_bytes = first.wire.len();
    let snapshot = first.json();
    assert_eq!(snapshot["proxies"].as_array().unwrap().len(), PROXIES);
    let v1 = snapshot["reference"]["version"].as_u64().unwrap();
    assert_eq!(
        client.ack("gw-a", "s", &snapshot["reference"]).await.status,
        204
    );

    // One cooldown on one proxy: a delta naming that proxy's entries.
    let banned = &ids[31_337];
    pool.apply_cooldowns(
        now,
        &[CooldownChange::Set(DomainCooldown {
            proxy_id: banned.clone(),
            domain: Domain::of_host("example.com").unwrap(),
            project: None,
            until_ms: now + 60_000,
            strikes: 1,
            forget_at_ms: now + 120_000,
        })],
    )
    .await
    .unwrap();
    let cooled = client.snapshot("gw-a", "s", v1, 0).await;
    assert_eq!(cooled.update, Some("delta"), "{:?}", cooled.status);
    assert!(
        cooled.wire.len() < 1_000,
        "a cooldown change is {} bytes (the whole snapshot is {whole_bytes})",
        cooled.wire.len()
    );
    let snapshot = cooled.json();
    let cooldowns = snapshot["advisories"]["cooldowns"].as_array().unwrap();
    assert_eq!(cooldowns.len(), 1);
    assert_eq!(cooldowns[0]["proxy_id"], banned.as_str());
    let v2 = snapshot["reference"]["version"].as_u64().unwrap();
    assert!(v2 > v1);

    // One lease renewed: a delta with that lease's new end only.
    let renewed = &ids[77_777];
    let assignment = pool
        .renew(now + 5_000, renewed, &worker, epochs[renewed], 30_000)
        .await
        .unwrap();
    let moved = client.snapshot("gw-a", "s", v2, 0).await;
    assert_eq!(moved.update, Some("delta"));
    assert!(
        moved.wire.len() < 1_000,
        "a lease renewal is {} bytes",
        moved.wire.len()
    );
    let delta: Value = serde_json::from_slice(&moved.wire).unwrap();
    assert_eq!(
        delta["delta"]["leases"][0]["id"],
        renewed.as_str(),
        "{delta}"
    );
    assert!(delta["delta"].get("upsert").is_none(), "{delta}");
    let snapshot = moved.json();
    assert_eq!(
        listed(&snapshot, renewed)["lease_until_ms"],
        assignment.lease_until_ms
    );
    let v3 = snapshot["reference"]["version"].as_u64().unwrap();

    // A worker that missed a delta (it still holds v2 when v4 is out) gets it whole.
    pool.apply_cooldowns(
        now,
        &[CooldownChange::Clear {
            proxy_id: banned.clone(),
            domain: Domain::of_host("example.com").unwrap(),
            project: None,
        }],
    )
    .await
    .unwrap();
    let caught_up = client.snapshot("gw-a", "s", v3, 0).await;
    assert_eq!(caught_up.update, Some("delta"));
    let v4 = caught_up.json()["reference"]["version"].as_u64().unwrap();
    let released = &ids[5];
    pool.begin_drain(now, released, &worker, epochs[released])
        .await
        .unwrap();
    client.forget("gw-a", "s");
    let missed = client.snapshot("gw-a", "s", v3, 0).await;
    assert_eq!(
        missed.update,
        Some("full"),
        "behind the issued version: the whole snapshot"
    );
    let snapshot = missed.json();
    assert!(snapshot["reference"]["version"].as_u64().unwrap() > v4);
    assert_eq!(snapshot["proxies"].as_array().unwrap().len(), PROXIES - 1);
    assert_eq!(snapshot["held"][0]["id"], released.as_str());
    assert!(
        snapshot["advisories"].get("cooldowns").is_none(),
        "the cleared cooldown is gone: {}",
        snapshot["advisories"]
    );

    // The deltas were made from the store's change journal, not from a whole read.
    let metrics = metrics.render();
    let count = |text: &str, update: &str, read: &str| -> u64 {
        text.lines()
            .find(|line| {
                line.starts_with("proxypool_controller_snapshot_updates_total{")
                    && line.contains(&format!("update=\"{update}\""))
                    && line.contains(&format!("read=\"{read}\""))
            })
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    let served = |update: &str, read: &str| {
        count(&metrics, update, read) - count(&served_before, update, read)
    };
    assert_eq!(served("delta", "changes"), 3, "{metrics}");
    assert_eq!(served("full", "whole"), 2, "{metrics}");

    // Starting over (version 0) is always the whole snapshot.
    client.forget("gw-a", "s");
    let again = client.snapshot("gw-a", "s", 0, 0).await;
    assert_eq!(again.update, Some("full"));
}
