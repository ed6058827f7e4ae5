//! Contract: a proxy its client gave back (`CooldownStore::return_extracted`) is never
//! handed to anyone else while that client may still hold its credentials: no extraction,
//! no lease, no check until its hard expiry, unless the vendor re-issues it (new
//! credentials or a later issue time), which starts a new generation that is checked
//! before it is handed out. The client's own extraction shows it returned, without
//! credentials, on a read and on a replay. And the lease epoch feedback tickets are bound
//! to (`Reporter::Unheld`) names the proxy's latest lease only until it moves on.

use super::factory::PoolFactory;
use super::fixtures::*;
use crate::fresh_pool;
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, Conflict, CooldownStore, Credentials, ExtractMode,
    ExtractResponse, ExtractionId, HealthBatch, HealthObservation, PoolError, ProxyId, ProxyStatus,
    Reporter, ReturnOutcome, UnixMillis,
};

const LEASE: u64 = 1_000;

/// `client_name` extracts `count` proxies of `upstream_name` under `key`.
async fn extract_keyed<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    client_name: &str,
    upstream_name: &str,
    count: u32,
    key: &str,
) -> Result<ExtractResponse, PoolError> {
    let mut request = extract_request(client_name, count, ExtractMode::Partial);
    request.filter.upstream = Some(upstream(upstream_name));
    request.idempotency_key = Some(key.to_owned());
    pool.extract(now, request).await.map(|o| o.response)
}

/// What `client_name` gets from `upstream_name` at `now` (a fresh request each time).
async fn extractable<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    client_name: &str,
    upstream_name: &str,
) -> Vec<ProxyId> {
    let mut request = extract_request(client_name, 10, ExtractMode::Partial);
    request.filter.upstream = Some(upstream(upstream_name));
    match pool.extract(now, request).await {
        Ok(out) => out.response.proxies.into_iter().map(|p| p.id).collect(),
        Err(PoolError::InsufficientInventory { .. }) => Vec::new(),
        Err(error) => panic!("extract at {now}: {error}"),
    }
}

/// Every way the pool could hand `id` to someone at `now`, each asserted refused; an
/// extraction from its upstream finds `others` alone (and takes them).
async fn assert_handed_to_nobody<P: ActivityPool>(
    pool: &P,
    now: UnixMillis,
    id: &ProxyId,
    others: &[ProxyId],
) {
    assert_eq!(extractable(pool, now, "c2", "solo").await, others, "{now}");
    assert_eq!(
        pool.assign(now, id, &worker("gw-1"), LEASE).await,
        Err(PoolError::Conflict(Conflict::Status)),
        "leased at {now}"
    );
    let assignable = pool.assignable(now, 100).await.unwrap();
    assert!(
        assignable.iter().all(|r| &r.id != id),
        "assignable at {now}"
    );
    // Not checked either: a passing check must not bring it back.
    assert!(
        find_record(pool, now, id).await.is_none(),
        "checkable at {now}"
    );
    let check = HealthBatch {
        observations: vec![HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 5 },
        }],
        unhealthy_after_failures: 3,
    };
    assert_eq!(pool.apply_health(now, check).await.unwrap().applied, 0);
    for who in ["c1", "c2"] {
        assert_eq!(
            pool.may_report(now, &client(who), id).await,
            Ok(Reporter::No),
            "{who} at {now}"
        );
    }
}

/// The one proxy of upstream `solo`, extracted by c1 under key `k1` and given back.
async fn given_back<P: ActivityPool>(pool: &P, candidate: Candidate) -> (ProxyId, ExtractionId) {
    let id = seed_available(pool, T0, "solo", vec![candidate]).await[0].clone();
    let out = extract_keyed(pool, T0 + 10, "c1", "solo", 1, "k1")
        .await
        .unwrap();
    assert_eq!(out.proxies[0].id, id);
    assert_eq!(
        pool.return_extracted(T0 + 20, &client("c1"), &id).await,
        Ok(ReturnOutcome::Returned)
    );
    (id, out.id)
}

pub async fn given_back_is_handed_to_nobody_until_its_hard_expiry<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let others = seed_range(&pool, T0, "acme", 1, 2).await;
    let (id, _) = given_back(&pool, candidate(50)).await;
    // Throughout the holder's window, and when the vendor lists it again unchanged.
    for now in [T0 + 21, T0 + 1_000, T0 + TTL_MS - MARGIN_MS - 1] {
        assert_handed_to_nobody(&pool, now, &id, &[]).await;
    }
    let same = pool
        .upsert(T0 + 2_000, batch("solo", vec![candidate(50)]))
        .await
        .unwrap();
    assert_eq!((same.extracted_ignored, same.inserted), (1, 0));
    assert_handed_to_nobody(&pool, T0 + 2_001, &id, &[]).await;
    // Given back once: the client no longer holds it.
    assert_eq!(
        pool.return_extracted(T0 + 2_002, &client("c1"), &id).await,
        Err(PoolError::NotFound)
    );
    // The rest of the pool is untouched.
    let mut rest = extractable(&pool, T0 + 2_003, "c3", "acme").await;
    rest.sort();
    let mut expected = others.clone();
    expected.sort();
    assert_eq!(rest, expected);
    // Its hard expiry ends the lifetime: a later listing is a new proxy, as always.
    let later = pool
        .upsert(T0 + TTL_MS, batch("solo", vec![candidate(50)]))
        .await
        .unwrap();
    assert_eq!(later.inserted, 1);
    mark_healthy(&pool, T0 + TTL_MS + 1, std::slice::from_ref(&id)).await;
    assert_eq!(
        extractable(&pool, T0 + TTL_MS + 2, "c2", "solo").await,
        vec![id]
    );
}

pub async fn given_back_returns_only_as_a_new_generation_from_the_vendor<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let (id, extraction) = given_back(&pool, candidate(60)).await;
    let other = seed_range(&pool, T0 + 30, "solo", 61, 1).await;
    // New credentials: a new generation, which waits like any new proxy while its
    // upstream is at max_size.
    let mut renewed = candidate(60);
    renewed.credentials = Some(Credentials::new("user60", "pw-renewed-60"));
    let mut full = batch("solo", vec![renewed.clone()]);
    full.max_size = 1;
    let over = pool.upsert(T0 + 40, full).await.unwrap();
    assert_eq!((over.over_max_size, over.inserted), (1, 0));
    assert_handed_to_nobody(&pool, T0 + 41, &id, &other).await;
    let report = pool
        .upsert(T0 + 50, batch("solo", vec![renewed]))
        .await
        .unwrap();
    assert_eq!(report.inserted, 1);
    // FETCHED: checked before anyone gets it.
    let record = find_record(&pool, T0 + 51, &id).await.unwrap();
    assert_eq!(record.status, ProxyStatus::Fetched);
    assert_eq!(
        extractable(&pool, T0 + 52, "c2", "solo").await,
        Vec::<ProxyId>::new()
    );
    mark_healthy(&pool, T0 + 60, std::slice::from_ref(&id)).await;
    let out = extract_keyed(&pool, T0 + 70, "c2", "solo", 1, "k2")
        .await
        .unwrap();
    assert_eq!(out.proxies[0].id, id);
    assert_eq!(
        out.proxies[0].password.as_ref().map(|p| p.expose()),
        Some("pw-renewed-60")
    );
    // The first client's extraction still shows it returned: its hold ended with the
    // return, whoever holds the proxy now.
    let first = pool
        .get_extraction(T0 + 80, &client("c1"), &extraction)
        .await
        .unwrap();
    assert!(first.proxies[0].returned && first.proxies[0].password.is_none());
}

pub async fn given_back_returns_with_a_later_issue_time_only<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    let mut issued = candidate(70);
    issued.issued_at_ms = Some(T0 - 1_000);
    let (id, _) = given_back(&pool, issued.clone()).await;
    // The same issue time, an earlier one, none: the same generation, still withheld.
    for at in [Some(T0 - 1_000), Some(T0 - 5_000), None] {
        let mut again = issued.clone();
        again.issued_at_ms = at;
        let report = pool
            .upsert(T0 + 30, batch("solo", vec![again]))
            .await
            .unwrap();
        assert_eq!(
            (report.inserted, report.extracted_ignored),
            (0, 1),
            "{at:?}"
        );
    }
    assert_handed_to_nobody(&pool, T0 + 31, &id, &[]).await;
    let mut reissued = issued;
    reissued.issued_at_ms = Some(T0 + 25);
    let report = pool
        .upsert(T0 + 40, batch("solo", vec![reissued]))
        .await
        .unwrap();
    assert_eq!(report.inserted, 1);
    mark_healthy(&pool, T0 + 50, std::slice::from_ref(&id)).await;
    assert_eq!(extractable(&pool, T0 + 60, "c2", "solo").await, vec![id]);
}

pub async fn given_back_shows_no_credentials_in_its_extraction<F: PoolFactory>(factory: &F) {
    let pool = fresh_pool!(factory);
    seed_range(&pool, T0, "solo", 80, 2).await;
    let first = extract_keyed(&pool, T0 + 10, "c1", "solo", 2, "k1")
        .await
        .unwrap();
    assert!(
        first
            .proxies
            .iter()
            .all(|p| p.password.is_some() && !p.returned)
    );
    let (back, kept) = (&first.proxies[0], &first.proxies[1]);
    pool.return_extracted(T0 + 20, &client("c1"), &back.id)
        .await
        .unwrap();
    let mut expected = first.clone();
    expected.proxies[0].given_back();
    let read = pool
        .get_extraction(T0 + 30, &client("c1"), &first.id)
        .await
        .unwrap();
    assert_eq!(read, expected);
    assert!(read.proxies[0].returned && read.proxies[0].username.is_none());
    assert_eq!(&read.proxies[1], kept);
    // A replay with the same key is the same copy: never the credentials again.
    let mut replay = extract_request("c1", 2, ExtractMode::Partial);
    replay.filter.upstream = Some(upstream("solo"));
    replay.idempotency_key = Some("k1".to_owned());
    let replayed = pool.extract(T0 + 40, replay).await.unwrap();
    assert!(replayed.replayed);
    assert_eq!(replayed.response, expected);
    // Another client still reads nothing of it.
    assert_eq!(
        pool.get_extraction(T0 + 50, &client("c2"), &first.id).await,
        Err(PoolError::NotFound)
    );
}

pub async fn lease_epoch_names_the_latest_lease_until_the_proxy_moves_on<F: PoolFactory>(
    factory: &F,
) {
    let pool = fresh_pool!(factory);
    let id = seed_range(&pool, T0, "solo", 90, 1).await[0].clone();
    let unheld = |lease_epoch| Ok(Reporter::Unheld { lease_epoch });
    let c2 = client("c2");
    let reporter = |now| pool.may_report(now, &c2, &id);
    // Never leased: no generation a ticket could name.
    assert_eq!(reporter(T0 + 1).await, unheld(None));
    let first = pool
        .assign(T0 + 10, &id, &worker("gw-1"), LEASE)
        .await
        .unwrap();
    assert_eq!(reporter(T0 + 11).await, unheld(Some(first.epoch)));
    // The lease lapses and is released: the proxy has not moved on yet.
    pool.expire(T0 + 10 + LEASE, 10).await.unwrap();
    assert_eq!(reporter(T0 + 11 + LEASE).await, unheld(Some(first.epoch)));
    // Leased again (here to another gateway): a new generation.
    let second = pool
        .assign(T0 + 20 + LEASE, &id, &worker("gw-2"), LEASE)
        .await
        .unwrap();
    assert_ne!(second.epoch, first.epoch);
    assert_eq!(reporter(T0 + 21 + LEASE).await, unheld(Some(second.epoch)));
    pool.expire(T0 + 20 + 2 * LEASE, 10).await.unwrap();
    // Extracted, given back, re-issued by the vendor: no earlier lease is named again.
    let out = extract_keyed(&pool, T0 + 30 + 2 * LEASE, "c1", "solo", 1, "k1")
        .await
        .unwrap();
    assert_eq!(out.proxies[0].id, id);
    assert_eq!(reporter(T0 + 31 + 2 * LEASE).await, Ok(Reporter::No));
    pool.return_extracted(T0 + 32 + 2 * LEASE, &client("c1"), &id)
        .await
        .unwrap();
    let mut renewed = candidate(90);
    renewed.credentials = Some(Credentials::new("user90", "pw-renewed-90"));
    pool.upsert(T0 + 40 + 2 * LEASE, batch("solo", vec![renewed]))
        .await
        .unwrap();
    assert_eq!(reporter(T0 + 41 + 2 * LEASE).await, unheld(None));
}
