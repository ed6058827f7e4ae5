//! Shared by the Redis tests: one private redis-server and one Redis Cluster for the whole
//! binary (each started on first use, killed by the testkit's janitors when the binary
//! exits), pools isolated from each other by a unique key prefix, and the retry a caller
//! does while the store is unavailable. Tests that break a server (flush it, pause it,
//! stop it, freeze or kill a node) start one of their own instead.

use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisCluster, RedisServer};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static SERVER: OnceLock<Option<RedisServer>> = OnceLock::new();
static CLUSTER: OnceLock<Option<RedisCluster>> = OnceLock::new();

/// The binary's shared private redis-server, or `None` after the testkit's skip banner.
pub(crate) fn shared_server() -> Option<&'static RedisServer> {
    SERVER
        .get_or_init(proxypool_testkit::private_redis_or_skip)
        .as_ref()
}

/// The binary's shared Redis Cluster (3 primaries with a replica each), or `None` after the
/// testkit's skip banner. Tests of faults start a cluster of their own.
pub(crate) fn shared_cluster() -> Option<&'static RedisCluster> {
    CLUSTER
        .get_or_init(|| proxypool_testkit::redis_cluster_or_skip(3, 1))
        .as_ref()
}

/// `redis+cluster://` with every node of `cluster` as a seed.
pub(crate) fn cluster_url(cluster: &RedisCluster) -> String {
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|node| format!("127.0.0.1:{}", node.port))
        .collect();
    format!("redis+cluster://{}", seeds.join(","))
}

/// A key prefix no other pool of this process (or an earlier run) uses.
pub(crate) fn unique_prefix(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{tag}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Retries `call` while the store is unavailable, as a caller would, for up to 10 s: tests
/// that run short timeouts or break the store on purpose must not turn a slow or recovering
/// store into a failure. Any other error, or unavailability past the bound, fails the test.
pub(crate) async fn until_available<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = proxypool_core::PoolResult<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match call().await {
            Ok(value) => return value,
            Err(error) if error.is_unavailable() && Instant::now() < deadline => {
                tokio::time::sleep(proxypool_testkit::wait::POLL_INTERVAL).await;
            }
            Err(error) => panic!("still failing: {error:?}"),
        }
    }
}

/// A generous per-call timeout for tests that are not about timeouts: a loaded CI
/// machine must not turn a slow call into a failed assertion.
pub(crate) const TEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A pool for the contract suite on `url`: the suite's scan limits, `groups` shard groups.
pub(crate) fn contract_pool(
    url: &str,
    limits: proxypool_pool::contract::ScanLimits,
    groups: usize,
) -> RedisPool {
    pool_on(
        url,
        RedisPoolOptions {
            key_prefix: "contract".to_owned(),
            extract_scan_budget: limits.extract_scan_budget,
            inventory_scan_budget: limits.inventory_scan_budget,
            call_timeout: TEST_TIMEOUT,
            groups,
            ..RedisPoolOptions::default()
        },
    )
}

/// A pool on `url` with a unique prefix and the given options.
pub(crate) fn pool_on(url: &str, options: RedisPoolOptions) -> RedisPool {
    let options = RedisPoolOptions {
        key_prefix: unique_prefix(&options.key_prefix),
        ..options
    };
    RedisPool::new(RedisClient::open(url).unwrap(), options).unwrap()
}

use proxypool_testkit::RespValue;

/// Every key under `pattern` (SCAN, so a shared server is never blocked).
pub(crate) fn scan_keys(server: &RedisServer, pattern: &str) -> Vec<String> {
    let mut conn = server.connect().unwrap();
    let mut cursor = "0".to_owned();
    let mut keys = Vec::new();
    loop {
        let reply = conn
            .command(&["SCAN", cursor.as_str(), "MATCH", pattern, "COUNT", "1000"])
            .unwrap();
        let RespValue::Array(parts) = reply else {
            panic!("SCAN answered {reply:?}")
        };
        cursor = parts[0].as_text().unwrap();
        if let RespValue::Array(batch) = &parts[1] {
            keys.extend(batch.iter().filter_map(RespValue::as_text));
        }
        if cursor == "0" {
            return keys;
        }
    }
}

fn flatten(value: &RespValue, out: &mut Vec<u8>) {
    match value {
        RespValue::Array(items) => items.iter().for_each(|i| flatten(i, out)),
        RespValue::Bulk(bytes) => {
            out.extend_from_slice(bytes);
            out.push(b'\n');
        }
        other => {
            if let Some(text) = other.as_text() {
                out.extend_from_slice(text.as_bytes());
                out.push(b'\n');
            }
        }
    }
}

/// Everything a key holds (strings, hash fields and values, set and zset members).
pub(crate) fn dump_key(server: &RedisServer, key: &str) -> Vec<u8> {
    let mut conn = server.connect().unwrap();
    let kind = conn.command(&["TYPE", key]).unwrap().as_text().unwrap();
    let reply = match kind.as_str() {
        "string" => conn.command(&["GET", key]),
        "hash" => conn.command(&["HGETALL", key]),
        "zset" => conn.command(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "set" => conn.command(&["SMEMBERS", key]),
        "list" => conn.command(&["LRANGE", key, "0", "-1"]),
        "none" => return Vec::new(),
        other => panic!("unexpected key type {other} of {key}"),
    }
    .unwrap();
    let mut out = Vec::new();
    flatten(&reply, &mut out);
    out
}

/// An integer reply of `args` (DBSIZE, HLEN, ZCARD...).
pub(crate) fn integer(server: &RedisServer, args: &[&str]) -> i64 {
    match server.command(args).unwrap() {
        RespValue::Integer(n) => n,
        other => panic!("{args:?} answered {other:?}"),
    }
}
