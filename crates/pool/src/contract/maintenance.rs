//! Contract: Maintenance (bounded sweeps; memory stays bounded under 30 s TTL churn).

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{ExtractMode, Footprint};

pub async fn maintenance_sweep_is_bounded<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let ids = seed_range(&pool, T0, "acme", 0, 10).await;
    pool.assign(T0, &ids[0], &worker("gw-1"), 10_000)
        .await
        .unwrap();
    let after = T0 + TTL_MS;
    let first = pool.sweep(after, 4).await.unwrap();
    assert_eq!(first.records_removed, 4);
    assert!(first.more_pending);
    let mut removed = first.records_removed;
    let mut assignments = first.assignments_removed;
    loop {
        let report = pool.sweep(after, 4).await.unwrap();
        assert!(report.records_removed <= 4);
        removed += report.records_removed;
        assignments += report.assignments_removed;
        if !report.more_pending {
            break;
        }
    }
    assert_eq!((removed, assignments), (10, 1));
    let footprint = pool.footprint().await.unwrap();
    assert_eq!((footprint.records, footprint.assignments), (0, 0));
    assert_eq!(
        pool.inventory(after, &upstream("acme"))
            .await
            .unwrap()
            .unextracted,
        0
    );
}

/// Ten simulated minutes of a vendor rotating 50 proxies with a 30 s lifetime, checked,
/// extracted, assigned and swept: the store ends holding only live state.
pub async fn maintenance_ttl_churn_stays_bounded<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let step = 5_000;
    let mut peak = Footprint::default();
    let mut next = 0usize;
    for tick in 0..120u64 {
        let now = T0 + tick * step;
        // Each tick the vendor lists ~8 new proxies plus the ones from the previous tick.
        let fresh: Vec<usize> = (next..next + 8).collect();
        let listed: Vec<_> = fresh
            .iter()
            .copied()
            .chain(next.saturating_sub(8)..next)
            .map(candidate)
            .collect();
        next += 8;
        pool.upsert(now, batch("acme", listed)).await.unwrap();
        let ids: Vec<_> = fresh.iter().map(|&i| candidate_id(i)).collect();
        mark_healthy(&pool, now, &ids).await;
        let mut request = extract_request("c1", 2, ExtractMode::Partial);
        request.idempotency_key = Some(format!("tick-{tick}"));
        request.idempotency_ttl_ms = 60_000;
        pool.extract(now, request).await.unwrap();
        let spare = pool.assignable(now, 1).await.unwrap();
        pool.assign(now, &spare[0].id, &worker("gw-1"), 8_000)
            .await
            .unwrap();
        pool.expire(now, 100).await.unwrap();
        sweep_all(&pool, now).await;

        let f = pool.footprint().await.unwrap();
        peak.records = peak.records.max(f.records);
        peak.index_entries = peak.index_entries.max(f.index_entries);
        peak.results = peak.results.max(f.results);
    }
    // A record lives at most 30 s + one refresh (5 s): at most ~8 new per 5 s tick.
    assert!(peak.records <= 8 * 8, "records stayed bounded: {peak:?}");
    assert!(
        peak.results <= 14,
        "stored responses are capped by proxy expiry: {peak:?}"
    );
    assert!(
        peak.index_entries <= 64 * 10,
        "indexes stayed bounded: {peak:?}"
    );

    let end = T0 + 120 * step + 40_000;
    sweep_all(&pool, end).await;
    pool.expire(end, 1_000).await.unwrap();
    let f = pool.footprint().await.unwrap();
    assert_eq!(
        (f.records, f.assignments, f.results),
        (0, 0, 0),
        "everything expired is gone: {f:?}"
    );
}

/// Sweeps until nothing is pending; a store that always says "more" fails instead of hanging.
async fn sweep_all<P: proxypool_core::ActivityPool>(pool: &P, now: proxypool_core::UnixMillis) {
    for _ in 0..1_000 {
        if !pool.sweep(now, 16).await.unwrap().more_pending {
            return;
        }
    }
    panic!("sweep never finished: more_pending stayed true");
}
