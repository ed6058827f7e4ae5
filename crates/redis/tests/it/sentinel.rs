//! `redis+sentinel://` end to end: a private redis-server, a private Sentinel monitoring
//! it (redis-server in sentinel mode), and a pool that finds the master through it, also
//! after the master restarts.

use crate::support;

use proxypool_core::ports::*;
use proxypool_core::{Candidate, FetchedBatch, Protocol, UpstreamId};
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisServer, RespConnection};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A Sentinel process this test started; killed (by its pid) and cleaned up on drop.
struct Sentinel {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Sentinel {
    fn start(master: &RedisServer) -> Sentinel {
        // From the testkit, which never hands a port out twice: the servers other tests
        // of this binary start cannot be given it meanwhile.
        let port = proxypool_testkit::free_port();
        let dir = std::env::temp_dir().join(format!("pp-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {} 1\n",
                dir.display(),
                master.port()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&config)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sentinel = Sentinel { child, dir, port };
        proxypool_testkit::eventually("the sentinel answering", Duration::from_secs(10), || {
            RespConnection::connect("127.0.0.1", port)
                .and_then(|mut c| c.command(&["PING"]))
                .is_ok()
        });
        sentinel
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn batch(n: usize) -> FetchedBatch {
    FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 30_000,
        safety_margin_ms: 5_000,
        max_size: 100,
        default_max_sessions: 4,
        candidates: (0..n)
            .map(|i| Candidate::new(Protocol::Http, format!("s{i}.vendor.test"), 80))
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_url_finds_the_master_and_follows_a_restart() {
    let Some(mut master) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    let sentinel = Sentinel::start(&master);
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", sentinel.port);
    let client = RedisClient::open(&url).unwrap();
    assert!(client.is_sentinel());
    let pool = RedisPool::new(
        client,
        RedisPoolOptions {
            key_prefix: support::unique_prefix("sentinel"),
            call_timeout: support::TEST_TIMEOUT,
            ..RedisPoolOptions::default()
        },
    )
    .unwrap();
    let t0 = 1_700_000_000_000;
    assert_eq!(pool.upsert(t0, batch(3)).await.unwrap().inserted, 3);
    let keys = support::scan_keys(&master, &format!("{}*", pool.keyspace()));
    assert!(
        !keys.is_empty(),
        "the data is on the master the sentinel named"
    );

    // The master goes away and comes back: the pool asks the Sentinel again and recovers.
    master.restart().unwrap();
    let report = support::until_available(|| pool.upsert(t0 + 1, batch(2))).await;
    assert_eq!(report.inserted, 2, "the restarted master is empty");
}
