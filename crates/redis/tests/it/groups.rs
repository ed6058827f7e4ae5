//! RedisPool over three shard groups on one redis-server: what only a pool over several
//! groups can get wrong, beyond the contract suite every pool runs (`contract_groups.rs`).
//! Proxies spread and live in one group each; a pool of another group count is refused
//! before it touches anything; an all-or-nothing extraction that falls short gives back
//! every part it took, also under concurrency; attempts of one keyed extraction hand out
//! one set; the counters read as one order every group; a fenced call in any group ends
//! with the term.

use crate::support;

use proxypool_core::{
    Conflict, ExtractMode, Extractor, Fence, Fencing, InventoryReader, LeaseStore,
    OwnershipRepository, PoolError, ProxyId, StoreIdentity, WorkerRuntimeStore,
};
use proxypool_pool::contract::fixtures::*;
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use std::collections::BTreeSet;

const GROUPS: usize = 3;

fn pool() -> Option<RedisPool> {
    let server = support::shared_server()?;
    Some(support::pool_on(
        server.url(),
        RedisPoolOptions {
            key_prefix: "groups".to_owned(),
            call_timeout: support::TEST_TIMEOUT,
            groups: GROUPS,
            ..RedisPoolOptions::default()
        },
    ))
}

/// `ids` by the group each lives in.
fn by_group(pool: &RedisPool, ids: &[ProxyId]) -> Vec<Vec<ProxyId>> {
    let mut groups = vec![Vec::new(); GROUPS];
    for id in ids {
        groups[pool.group_index(id)].push(id.clone());
    }
    groups
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_spread_over_the_groups_and_each_lives_in_its_group_alone() {
    let Some(pool) = pool() else { return };
    let server = support::shared_server().unwrap();
    let ids = seed_range(&pool, T0, "acme", 0, 60).await;
    let expected = by_group(&pool, &ids);
    for (keyspace, ids) in pool.group_keyspaces().iter().zip(&expected) {
        assert!(!ids.is_empty(), "60 proxies leave no group empty");
        let held = support::integer(server, &["HLEN", &format!("{keyspace}records")]);
        assert_eq!(held as usize, ids.len(), "{keyspace}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_another_group_count_is_refused_before_it_touches_anything() {
    let Some(first) = pool() else { return };
    let server = support::shared_server().unwrap();
    assert_eq!(first.read_mark().await.unwrap(), None);
    let other = RedisPool::new(
        RedisClient::open(server.url()).unwrap(),
        RedisPoolOptions {
            groups: 2,
            ..first.options().clone()
        },
    )
    .unwrap();
    let err = other.read_mark().await.unwrap_err();
    assert!(
        matches!(&err, PoolError::InvalidInput(m) if m.contains("spread over 3 shard groups")),
        "{err:?}"
    );
    let mark = proxypool_core::StoreMark {
        identity: "0123456789abcdef0123456789abcdef".to_owned(),
        generation: 1,
        recovery: None,
    };
    assert!(other.install_mark(T0, &mark).await.is_err());
    assert_eq!(
        first.read_mark().await.unwrap(),
        None,
        "nothing was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_all_or_nothing_extraction_that_falls_short_gives_back_every_part() {
    let Some(pool) = pool() else { return };
    let server = support::shared_server().unwrap();
    let ids = seed_range(&pool, T0, "acme", 0, 12).await;
    let err = pool
        .extract(T0 + 1, extract_request("c1", 13, ExtractMode::AllOrNothing))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        PoolError::InsufficientInventory {
            requested: 13,
            matching: 12
        }
    );
    let inventory = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    assert_eq!(inventory.unextracted, 12);
    assert_eq!(
        inventory
            .by_status
            .get(&proxypool_core::ProxyStatus::Available),
        Some(&12)
    );
    for keyspace in pool.group_keyspaces() {
        assert_eq!(
            support::scan_keys(server, &format!("{keyspace}idem:*")),
            Vec::<String>::new(),
            "no part is left behind"
        );
        assert_eq!(
            support::scan_keys(server, &format!("{keyspace}xclaim:*")),
            Vec::<String>::new(),
            "no claim is left behind"
        );
    }
    let out = pool
        .extract(T0 + 2, extract_request("c1", 12, ExtractMode::Partial))
        .await
        .unwrap();
    let got: BTreeSet<ProxyId> = out.response.proxies.iter().map(|p| p.id.clone()).collect();
    assert_eq!(got, ids.into_iter().collect(), "every proxy went back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_of_one_keyed_extraction_hand_out_one_set() {
    let Some(pool) = pool() else { return };
    seed_range(&pool, T0, "acme", 0, 40).await;
    let mut request = extract_request("c1", 6, ExtractMode::Partial);
    request.idempotency_key = Some("k1".to_owned());
    let attempts: Vec<_> = (0..16)
        .map(|_| {
            let (pool, request) = (pool.clone(), request.clone());
            tokio::spawn(async move { pool.extract(T0 + 1, request).await.unwrap() })
        })
        .collect();
    let mut sets = BTreeSet::new();
    let mut fresh = 0;
    for attempt in attempts {
        let out = attempt.await.unwrap();
        fresh += usize::from(!out.replayed);
        let ids: Vec<ProxyId> = out.response.proxies.iter().map(|p| p.id.clone()).collect();
        assert_eq!(ids.len(), 6);
        sets.insert(ids);
    }
    assert_eq!(sets.len(), 1, "every attempt answers the same proxies");
    assert!(fresh >= 1);
    let left = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    assert_eq!(left.unextracted, 34, "one set was handed out");

    // More than the anchor group holds: the attempts share one claim and its parts.
    let mut across = extract_request("c1", 20, ExtractMode::AllOrNothing);
    across.idempotency_key = Some("k3".to_owned());
    let attempts: Vec<_> = (0..8)
        .map(|_| {
            let (pool, request) = (pool.clone(), across.clone());
            tokio::spawn(async move { pool.extract(T0 + 1, request).await.unwrap() })
        })
        .collect();
    let mut sets = BTreeSet::new();
    for attempt in attempts {
        let ids: BTreeSet<ProxyId> = attempt
            .await
            .unwrap()
            .response
            .proxies
            .iter()
            .map(|p| p.id.clone())
            .collect();
        assert_eq!(ids.len(), 20);
        sets.insert(ids);
    }
    assert_eq!(sets.len(), 1, "every attempt answers the same proxies");
    let left = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    assert_eq!(left.unextracted, 14, "one set of 20 more was handed out");

    // Attempts of a keyed all-or-nothing request that cannot be met take nothing.
    let mut too_many = extract_request("c1", 30, ExtractMode::AllOrNothing);
    too_many.idempotency_key = Some("k2".to_owned());
    let attempts: Vec<_> = (0..8)
        .map(|_| {
            let (pool, request) = (pool.clone(), too_many.clone());
            tokio::spawn(async move { pool.extract(T0 + 2, request).await })
        })
        .collect();
    for attempt in attempts {
        assert!(matches!(
            attempt.await.unwrap(),
            Err(PoolError::InsufficientInventory { requested: 30, .. })
        ));
    }
    let left = pool.inventory(T0 + 2, &upstream("acme")).await.unwrap();
    assert_eq!(left.unextracted, 14, "nothing stays taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_all_or_nothing_extractions_share_scarce_stock_without_overlap() {
    let Some(pool) = pool() else { return };
    seed_range(&pool, T0, "acme", 0, 20).await;
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let request = extract_request(&format!("c{i}"), 6, ExtractMode::AllOrNothing);
                pool.extract(T0 + 1, request).await
            })
        })
        .collect();
    let mut handed = BTreeSet::new();
    let mut served = 0;
    for racer in racers {
        match racer.await.unwrap() {
            Ok(out) => {
                served += 1;
                assert_eq!(out.response.proxies.len(), 6);
                for p in out.response.proxies {
                    assert!(handed.insert(p.id.clone()), "{} handed out twice", p.id);
                }
            }
            Err(PoolError::InsufficientInventory { requested: 6, .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(served >= 1, "the first one is always met");
    let left = pool.inventory(T0 + 1, &upstream("acme")).await.unwrap();
    assert_eq!(
        left.unextracted as usize,
        20 - handed.len(),
        "what failed went back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_read_as_one_order_every_group() {
    let Some(pool) = pool() else { return };
    let ids = seed_range(&pool, T0, "acme", 0, 60).await;
    let groups = by_group(&pool, &ids);
    let w1 = worker("gw-1");
    // Five leases in the home group move its epoch; the others stay behind.
    for id in &groups[0][..5] {
        pool.assign(T0 + 1, id, &w1, 20_000).await.unwrap();
    }
    let epoch = pool.current_epoch(T0 + 1).await.unwrap();
    assert!(epoch >= 5);
    for group in &groups[1..] {
        let later = pool.assign(T0 + 2, &group[0], &w1, 20_000).await.unwrap();
        assert!(
            later.epoch > epoch,
            "a lease after the read counts above it"
        );
    }

    // The same for a worker's snapshot counter and its journal.
    pool.open_session(T0 + 3, &w1, "s1", 60_000).await.unwrap();
    let version = pool.snapshot_version(T0 + 3, &w1).await.unwrap().worker;
    let moved = pool
        .assign(T0 + 4, &groups[2][1], &w1, 20_000)
        .await
        .unwrap();
    assert!(pool.snapshot_version(T0 + 4, &w1).await.unwrap().worker > version);
    let changes = pool
        .snapshot_changes(T0 + 4, &w1, version, &[], 1_000)
        .await
        .unwrap();
    let named: Vec<ProxyId> = changes
        .changed
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(named, vec![moved.proxy_id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_call_in_every_group_ends_with_the_term() {
    let Some(pool) = pool() else { return };
    let ids = seed_range(&pool, T0, "acme", 0, 60).await;
    let groups = by_group(&pool, &ids);
    let first = pool
        .try_acquire(T0, "controller", "a", 1_000)
        .await
        .unwrap()
        .unwrap();
    let old = pool.fenced(Fence::new("controller", "a", first.token));
    let w1 = worker("gw-1");
    for group in &groups {
        old.assign(T0 + 1, &group[0], &w1, 20_000).await.unwrap();
    }
    let second = pool
        .try_acquire(T0 + 1_500, "controller", "b", 1_000)
        .await
        .unwrap()
        .unwrap();
    assert!(second.token > first.token);
    for group in &groups {
        let err = old
            .assign(T0 + 1_600, &group[1], &w1, 20_000)
            .await
            .unwrap_err();
        assert_eq!(err, PoolError::Conflict(Conflict::StaleTerm));
        assert_eq!(pool.get(T0 + 1_600, &group[1]).await.unwrap(), None);
    }
    let new = pool.fenced(Fence::new("controller", "b", second.token));
    for group in &groups {
        new.assign(T0 + 1_700, &group[1], &w1, 20_000)
            .await
            .unwrap();
    }
    // A clean resignation clears every copy: the term's calls stop everywhere at once.
    pool.release(T0 + 1_800, "controller", "b", second.token)
        .await
        .unwrap();
    for group in &groups {
        let err = new
            .assign(T0 + 1_900, &group[2], &w1, 20_000)
            .await
            .unwrap_err();
        assert_eq!(err, PoolError::Conflict(Conflict::StaleTerm));
    }
}
