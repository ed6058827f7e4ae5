//! The activity pool over `rediss://` against a private `redis-server --tls-port`: with the
//! server's CA in `[store.tls]` the pool answers; trusting only the system roots it fails
//! closed (unavailable), as does a plain `redis://` client on the TLS port.

use crate::common::*;
use proxypool_controller::open_store;
use proxypool_core::DueQuery;
use proxypool_testkit::{TestCa, private_redis_tls_or_skip};

fn store_section(url: &str, ca: Option<&std::path::Path>) -> String {
    let tls = ca.map_or_else(String::new, |ca| {
        format!("[store.tls]\nca = \"{}\"\n", ca.display())
    });
    format!(
        "[store]\nurl = \"{url}\"\ncall_timeout = \"1s\"\nleader_lease = \"5s\"\n{tls}\n{}",
        static_upstream("s")
    )
}

async fn answers(text: &str) -> Result<(), String> {
    let config = parse_config(&config_text(text));
    let opened = open_store(&config.store).await.map_err(|e| e.to_string())?;
    // Past the identity check (no guard established one here) to reach the server itself.
    opened.pool.expect(None);
    opened
        .pool
        .due_for_check(
            0,
            DueQuery {
                limit: 1,
                recheck_after_ms: 0,
            },
        )
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_works_over_rediss_with_the_configured_ca_and_fails_closed_without_it() {
    let ca = TestCa::new("redis ca").unwrap();
    let Some(redis) = private_redis_tls_or_skip(&ca) else {
        return;
    };
    let tls_url = redis.tls_url().unwrap().to_owned();
    answers(&store_section(&tls_url, Some(ca.ca_path())))
        .await
        .expect("rediss:// with the CA answers");
    let untrusted = answers(&store_section(&tls_url, None)).await;
    assert!(
        untrusted.is_err(),
        "a server certificate the roots do not vouch for was accepted"
    );
    let plain_on_tls_port = tls_url.replace("rediss://", "redis://");
    assert!(
        answers(&store_section(&plain_on_tls_port, None))
            .await
            .is_err()
    );
}
