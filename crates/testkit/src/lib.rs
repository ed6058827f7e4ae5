//! proxypool-testkit: private `redis-server` and PostgreSQL guards for tests.
//!
//! Adapters are tested against real servers, not mocks (docs/ARCHITECTURE.md, Testing). A guard starts a
//! server of its own on a free loopback port in a scratch directory, waits (bounded) until
//! it answers, hands out its URL, can stop and restart it on the same port to inject
//! faults, and kills it and deletes its directory when dropped.
//!
//! ```no_run
//! let Some(mut redis) = proxypool_testkit::redis_or_skip() else { return };
//! let url = redis.url().to_owned(); // redis://127.0.0.1:PORT/
//! redis.stop().unwrap();            // clients now get "connection refused"
//! redis.start_again().unwrap();     // same port, empty data
//! # drop(url);
//! ```
//!
//! Module map:
//! - `redis`: [`RedisServer`] and a RESP2 client on the `redis` crate ([`RespConnection`]).
//! - [`redis_cluster`]: [`RedisCluster`], a private Redis Cluster (primaries with replicas,
//!   one `redis-server` per node, formed by `redis-cli --cluster create`, also over TLS)
//!   whose nodes tests kill, pause, resume and restart, with waits for failover and rejoin.
//! - `postgres`: [`PostgresServer`] (initdb template per test process, copied per
//!   server) and the sqlx client behind [`PostgresServer::query`].
//! - `skip`: [`redis_or_skip`] / [`postgres_or_skip`] / [`redis_cluster_or_skip`]: skip
//!   with a banner when a binary is missing, panic under `CI=true`.
//! - `process`: spawning, janitors (cleanup even when the test process is killed),
//!   signals, bounded readiness waits, free ports ([`free_port`]), log tails.
//! - `private_server`: launch on a free port, stop, launch again: what both guards share.
//! - `privilege`: running PostgreSQL as an unprivileged account when tests run as root.
//! - `binaries`: where the server programs are found.
//! - `scratch`, `url`: scratch directories (`tempfile`) and connection URLs (`url`).
//! - `error`: [`TestkitError`].
//! - [`tls`]: [`TestCa`], a private CA writing server and client certificates as PEM files.
//! - [`browser`]: [`Browser`], headless Chromium over the DevTools protocol (on
//!   `tungstenite`'s blocking WebSocket, extra switches and an event handler), and
//!   [`browser_or_skip`].
//! - [`edge`]: real-socket clients for listener tests (idle floods, a client on another
//!   loopback address, trickling and oversize requests); async, on tokio.
//! - [`cpu`]: CPU time of a process from `/proc`, for benchmarks' CPU per operation.
//! - [`doc_block`]: a configuration block a doc shows, read from the page by the tests.
//! - [`wait`]: bounded waits on a condition ([`eventually`], [`eventually_some`],
//!   [`eventually_async`], [`poll_until`]), the poll loop every crate's tests share.
//! - [`flood`]: idle floods spread over many loopback addresses, IPv4 and IPv6 (one /64
//!   routed to loopback, which needs root: skipped with a banner otherwise, failed under
//!   `CI=true`).
//! - [`server_side`]: what the server's end of a loopback connection holds unread (the
//!   kernel's socket table), to wait until a server has read half a request.
//!
//! Environment:
//! - `PROXYPOOL_TEST_REDIS_URL`, `PROXYPOOL_TEST_POSTGRES_URL`: use an external server;
//!   `stop`/`restart` then fail with [`TestkitError::ExternalServer`].
//! - `PROXYPOOL_TEST_REDIS_SERVER` (binary), `PROXYPOOL_TEST_REDIS_CLI` (the cluster's
//!   `redis-cli`), `PROXYPOOL_TEST_PG_BIN_DIR` (directory with `initdb` and `postgres`):
//!   pin the programs instead of searching.
//! - `PROXYPOOL_TEST_PG_USER`: the account PostgreSQL runs as when the tests run as root.
//! - `PROXYPOOL_TEST_TMPDIR`: where scratch directories go (default: `/dev/shm` when it
//!   is a tmpfs with 1 GiB free, else the temp dir).
//! - `PROXYPOOL_TEST_CHROMIUM`: the browser binary (default: `chromium` on `PATH`);
//!   `PROXYPOOL_TEST_CERTUTIL`: NSS's `certutil` (default: on `PATH`, from libnss3-tools).
//! - `CI=true`: a missing server fails the test instead of skipping it.
//!
//! Everything but `edge`, `flood`, `server_side` and [`eventually_async`] is blocking
//! (the PostgreSQL client runs sqlx on a runtime of its own, on a thread of its own);
//! calling it from an async test blocks that test's thread for the server's startup,
//! which is what a test wants anyway.

mod binaries;
pub mod browser;
pub mod cpu;
pub mod doc_block;
pub mod edge;
pub mod error;
pub mod flood;
pub mod postgres;
mod private_server;
mod privilege;
mod process;
pub mod redis;
pub mod redis_cluster;
mod scratch;
pub mod server_side;
mod skip;
pub mod tls;
mod url;
pub mod wait;

pub use browser::{Browser, LaunchOptions, browser_or_skip, browser_or_skip_with};
pub use doc_block::marked_toml_block;
pub use error::TestkitError;
pub use postgres::{POSTGRES_URL_ENV, PostgresServer, Rows};
pub use redis::{REDIS_URL_ENV, RedisServer, RespConnection, RespValue};
pub use redis_cluster::{
    CLUSTER_NODE_TIMEOUT, CLUSTER_SLOTS, ClusterNode, ClusterRole, NodeState, RedisCluster,
};
pub use skip::{
    postgres_or_skip, private_postgres_or_skip, private_postgres_tls_or_skip,
    private_redis_or_skip, private_redis_tls_or_skip, redis_cluster_or_skip,
    redis_cluster_tls_or_skip, redis_or_skip, running_in_ci,
};
pub use tls::{CertFiles, TestCa};
pub use wait::{eventually, eventually_async, eventually_some, poll_until};

/// A free loopback port for a test's own listener, never one this process handed out
/// before (to a test or to one of the servers here): the kernel may offer a just-released
/// port again, and two listeners of one test would then collide.
pub fn free_port() -> u16 {
    process::free_loopback_port().expect("a free loopback port")
}
