//! Shared by the Redis test binaries: one private redis-server per test binary (started
//! once, killed by the testkit's janitor when the binary exits) and pools isolated from
//! each other by a unique key prefix.

#![allow(dead_code, unreachable_pub)]

use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::RedisServer;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static SERVER: OnceLock<Option<RedisServer>> = OnceLock::new();

/// The binary's shared private redis-server, or `None` after the testkit's skip banner.
pub fn shared_server() -> Option<&'static RedisServer> {
    SERVER
        .get_or_init(proxypool_testkit::private_redis_or_skip)
        .as_ref()
}

/// A key prefix no other pool of this process (or an earlier run) uses.
pub fn unique_prefix(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{tag}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A pool on `url` with a unique prefix and the given options.
pub fn pool_on(url: &str, options: RedisPoolOptions) -> RedisPool {
    let options = RedisPoolOptions {
        key_prefix: unique_prefix(&options.key_prefix),
        ..options
    };
    RedisPool::new(RedisClient::open(url).unwrap(), options).unwrap()
}
