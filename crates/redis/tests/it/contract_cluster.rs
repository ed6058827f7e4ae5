//! The whole activity-pool contract suite (the same functions MemoryPool and a single
//! redis-server run) against RedisPool on a private Redis Cluster of 3 primaries with a
//! replica each, shared by this test binary; every pool gets its own key prefix, so tests
//! run in parallel without seeing each other. Each pool spreads its keys over three shard
//! groups, one per primary: every call is routed to its group's primary, and the calls that
//! span groups (extraction, sessions, leases, counters) answer as one group does.

use crate::support;

use async_trait::async_trait;
use proxypool_pool::contract::{PoolFactory, ScanLimits};
use proxypool_redis::RedisPool;

#[derive(Debug, Clone, Copy)]
struct ClusterFactory;

#[async_trait]
impl PoolFactory for ClusterFactory {
    type Pool = RedisPool;

    async fn create(&self, limits: ScanLimits) -> Option<RedisPool> {
        Some(support::contract_pool(
            &support::cluster_url(support::shared_cluster()?),
            limits,
            3,
        ))
    }
}

proxypool_pool::contract_suite!(ClusterFactory);
proxypool_pool::lease_contract_suite!(ClusterFactory);

/// The three groups land on the three primaries, each holding its group's keys and the one
/// library the calls routed to it loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_lives_on_its_own_primary() {
    use proxypool_core::{Candidate, FetchedBatch, Protocol, Upserter, UpstreamId};
    use proxypool_testkit::{RedisCluster, RespValue};

    let Some(pool) = ClusterFactory.create(ScanLimits::default()).await else {
        return;
    };
    let cluster = support::shared_cluster().unwrap();
    let batch = FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 60_000,
        safety_margin_ms: 5_000,
        max_size: 100,
        default_max_sessions: 4,
        candidates: (0..30)
            .map(|i| Candidate::new(Protocol::Http, format!("r{i}.vendor.test"), 80))
            .collect(),
    };
    assert_eq!(
        pool.upsert(1_700_000_000_000, batch)
            .await
            .unwrap()
            .inserted,
        30
    );
    pool.probe().await.unwrap();

    let keyspaces = pool.group_keyspaces();
    assert_eq!(keyspaces.len(), 3);
    let mut owners: Vec<u16> = Vec::new();
    for keyspace in &keyspaces {
        let slot = RedisCluster::key_slot(keyspace);
        let owner = cluster.primary_of_slot(slot).unwrap();
        let mut node = cluster.connect(owner).unwrap();
        let held = match node
            .command(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
            .unwrap()
        {
            RespValue::Integer(n) => n,
            other => panic!("COUNTKEYSINSLOT answered {other:?}"),
        };
        assert!(held > 0, "group {keyspace} holds no keys on {owner}");
        owners.push(owner);
    }
    owners.sort_unstable();
    let mut primaries = cluster.primaries().unwrap();
    primaries.sort_unstable();
    assert_eq!(owners, primaries, "one group per primary");
    for port in primaries {
        let mut node = cluster.connect(port).unwrap();
        let libraries = match node
            .command(&["FUNCTION", "LIST", "LIBRARYNAME", "proxypool_*"])
            .unwrap()
        {
            RespValue::Array(libraries) => libraries.len(),
            other => panic!("FUNCTION LIST answered {other:?}"),
        };
        assert_eq!(libraries, 1, "primary {port} holds the library");
    }
}

/// Durability is read from every primary, and a risk names the primary it is on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durability_is_read_from_every_primary() {
    let Some(pool) = ClusterFactory.create(ScanLimits::default()).await else {
        return;
    };
    let cluster = support::shared_cluster().unwrap();
    let durability = pool.durability().await.unwrap();
    let mut read: Vec<u16> = durability
        .servers
        .iter()
        .map(|s| {
            let server = s.server.as_deref().expect("a cluster names each primary");
            server.rsplit_once(':').unwrap().1.parse().unwrap()
        })
        .collect();
    read.sort_unstable();
    let mut primaries = cluster.primaries().unwrap();
    primaries.sort_unstable();
    assert_eq!(read, primaries);
    // The kit's nodes keep nothing on disk.
    for server in &durability.servers {
        assert_eq!(server.appendonly, Some(false), "{server:?}");
        assert!(server.maxmemory_policy.is_some(), "{server:?}");
    }
    let risks = durability.risks();
    assert!(
        risks
            .iter()
            .filter(|r| r.contains("appendonly is off"))
            .count()
            == 3
            && risks.iter().all(|r| r.starts_with("primary 127.0.0.1:")),
        "{risks:?}"
    );
}
