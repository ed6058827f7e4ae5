//! Skip locally, fail in CI: what a test does when a server binary is missing.
//!
//! A developer without redis-server should still be able to run the rest of the suite, so
//! the test skips with a banner. In CI (`CI=true`) a missing server means the suite did not
//! test what it claims, so the test panics instead. Anything other than a missing binary
//! (a server that fails to start) always panics: that is a real failure.

use std::io::Write;

use crate::error::TestkitError;
use crate::postgres::{POSTGRES_URL_ENV, PostgresServer};
use crate::redis::{REDIS_URL_ENV, RedisServer};
use crate::redis_cluster::RedisCluster;

/// Whether the environment says "this is CI": `CI=true` (or `1`, `yes`), as CI services set it.
pub fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "yes"
        )
    })
}

pub(crate) fn skip_or_fail<T>(
    what: &str,
    env_var: &str,
    outcome: Result<T, TestkitError>,
) -> Option<T> {
    match outcome {
        Ok(server) => Some(server),
        Err(error @ TestkitError::BinaryNotFound { .. }) => {
            if running_in_ci() {
                panic!("CI=true and {what} is unavailable, so this test cannot run: {error}");
            }
            let banner = "=".repeat(78);
            // Straight to stderr, not eprintln!: the test harness captures eprintln! output
            // of passing tests, and a skip must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "\n{banner}\nSKIPPED: {error}\n\
                 This test did NOT run. Install it (scripts/test.sh does) or set {env_var}.\n\
                 Under CI=true this is a failure.\n{banner}"
            );
            None
        }
        Err(error) => panic!("{what} failed to start: {error}"),
    }
}

/// A Redis for this test, or `None` (after a loud banner) when redis-server is not
/// installed; panics under `CI=true` or when the server fails to start.
///
/// ```no_run
/// let Some(redis) = proxypool_testkit::redis_or_skip() else { return };
/// # drop(redis);
/// ```
pub fn redis_or_skip() -> Option<RedisServer> {
    skip_or_fail("redis-server", REDIS_URL_ENV, RedisServer::start())
}

/// A PostgreSQL for this test, or `None` (after a loud banner) when initdb/postgres are not
/// installed; panics under `CI=true` or when the server fails to start.
///
/// ```no_run
/// let Some(postgres) = proxypool_testkit::postgres_or_skip() else { return };
/// # drop(postgres);
/// ```
pub fn postgres_or_skip() -> Option<PostgresServer> {
    skip_or_fail(
        "PostgreSQL (initdb/postgres)",
        POSTGRES_URL_ENV,
        PostgresServer::start(),
    )
}

/// Like [`redis_or_skip`], but always a private server (for fault-injection tests that
/// stop and restart it, even when `PROXYPOOL_TEST_REDIS_URL` is set).
pub fn private_redis_or_skip() -> Option<RedisServer> {
    skip_or_fail("redis-server", REDIS_URL_ENV, RedisServer::start_private())
}

/// A private `redis-server` that also serves TLS with a certificate of `ca`.
pub fn private_redis_tls_or_skip(ca: &crate::TestCa) -> Option<RedisServer> {
    skip_or_fail(
        "redis-server",
        REDIS_URL_ENV,
        RedisServer::start_private_tls(ca),
    )
}

/// A private PostgreSQL with `ssl = on` and a certificate of `ca`.
pub fn private_postgres_tls_or_skip(ca: &crate::TestCa) -> Option<PostgresServer> {
    skip_or_fail(
        "PostgreSQL (initdb/postgres)",
        POSTGRES_URL_ENV,
        PostgresServer::start_private_tls(ca),
    )
}

/// Like [`postgres_or_skip`], but always a private cluster (for fault-injection tests).
pub fn private_postgres_or_skip() -> Option<PostgresServer> {
    skip_or_fail(
        "PostgreSQL (initdb/postgres)",
        POSTGRES_URL_ENV,
        PostgresServer::start_private(),
    )
}

/// A private Redis Cluster of `primaries` primaries with `replicas_per_primary` replicas
/// each, or `None` (after a loud banner) when redis-server or redis-cli is not installed;
/// panics under `CI=true` or when the cluster fails to form.
///
/// ```no_run
/// let Some(cluster) = proxypool_testkit::redis_cluster_or_skip(3, 1) else { return };
/// # drop(cluster);
/// ```
pub fn redis_cluster_or_skip(
    primaries: usize,
    replicas_per_primary: usize,
) -> Option<RedisCluster> {
    skip_or_fail(
        "a Redis Cluster (redis-server, redis-cli)",
        "PROXYPOOL_TEST_REDIS_SERVER / PROXYPOOL_TEST_REDIS_CLI",
        RedisCluster::start(primaries, replicas_per_primary),
    )
}

/// As [`redis_cluster_or_skip`], every node also serving TLS with a certificate of `ca`
/// ([`RedisCluster::start_tls`]).
pub fn redis_cluster_tls_or_skip(
    primaries: usize,
    replicas_per_primary: usize,
    ca: &crate::TestCa,
) -> Option<RedisCluster> {
    skip_or_fail(
        "a Redis Cluster (redis-server, redis-cli)",
        "PROXYPOOL_TEST_REDIS_SERVER / PROXYPOOL_TEST_REDIS_CLI",
        RedisCluster::start_tls(primaries, replicas_per_primary, ca),
    )
}
