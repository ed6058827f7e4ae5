//! Controllers on a private Redis (`proxypool-testkit`): the done-means scenario with a
//! password-protected Redis store, and lease failover between controllers sharing one
//! Redis, each controller started from a config like an operator's.
//!
//! Takeover times are wall-clock measurements across independently scheduled tasks, so
//! they are taken by bounded waiting on the leadership's watch channel and asserted
//! against bounds with some slack for a loaded machine; each test prints what it measured
//! (`cargo test -- --nocapture`).

use crate::common::{e2e, eventually_async};
use proxypool_controller::config::{Config, Env, Role};
use proxypool_controller::leadership::CONTROLLER_LEASE;
use proxypool_controller::{Controller, RunningController, Term, open_store};
use proxypool_core::{Expectation, PoolError, StoreMark, Unavailable};
use proxypool_sim::{SimConfig, SimVendor};
use proxypool_testkit::{RedisServer, RespValue, private_redis_or_skip};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Slack over a computed bound for scheduling on a busy 2-core machine.
const SLACK: Duration = Duration::from_millis(300);

/// Two (or more) controllers' config: a fast vendor interval so fetch counts move.
const FAILOVER_CONFIG: &str = r#"
[store]
url = "REDIS_URL"
key_prefix = "failover"
call_timeout = "200ms"
leader_lease = "LEASE"

[listen]
control = "127.0.0.1:0"

[checker]
timeout = "500ms"
interval = "100ms"

[[worker_tokens]]
name = "gateways"
token = { env = "FAILOVER_WORKER_TOKEN" }

[[upstreams]]
id = "sim"
ttl = "5m"
safety_margin = "5s"
max_size = 100

[upstreams.provider]
kind = "http"
# the simulated vendor: plain HTTP on loopback, listing loopback proxies
allow_plaintext = true
allow_private_hosts = true
url = "VENDOR_URL"
format = "text"
interval = "200ms"
timeout = "1s"

[[upstreams.health.targets]]
url = "ORIGIN_URL"
"#;

fn failover_config(redis: &RedisServer, vendor: &SimVendor, lease: &str) -> Config {
    let text = FAILOVER_CONFIG
        .replace("REDIS_URL", redis.url())
        .replace("LEASE", lease)
        .replace("VENDOR_URL", &vendor.list_url())
        .replace("ORIGIN_URL", &vendor.origin().url("/health"));
    let env = Env::from_pairs([("FAILOVER_WORKER_TOKEN", "failover-worker-token")]);
    Config::from_toml_str(
        &text,
        "failover.toml",
        Path::new("."),
        Role::Controller,
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn vendor(first_exit: Ipv4Addr) -> SimVendor {
    SimVendor::start(SimConfig {
        proxies: 2,
        first_exit,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

async fn start(config: Config) -> RunningController {
    Controller::from_config(config)
        .await
        .unwrap()
        .start()
        .await
        .unwrap()
}

fn term_of(running: &RunningController) -> watch::Receiver<Option<Term>> {
    running.controller().leadership().watch()
}

fn fetches(running: &RunningController) -> u64 {
    running
        .controller()
        .status_board()
        .all()
        .iter()
        .map(|s| s.total_fetches)
        .sum()
}

/// Waits until `rx` shows a term (`leading`) or none; the time it took.
async fn wait_leading(
    rx: &mut watch::Receiver<Option<Term>>,
    leading: bool,
    bound: Duration,
    what: &str,
) -> Duration {
    let started = Instant::now();
    tokio::time::timeout(bound, rx.wait_for(|t| t.is_some() == leading))
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {bound:?}"))
        .unwrap();
    started.elapsed()
}

/// Starts two controllers on one Redis and returns them as (leader, standby).
async fn leader_and_standby(config: &Config) -> (RunningController, RunningController) {
    let a = start(config.clone()).await;
    let b = start(config.clone()).await;
    let (mut a_term, mut b_term) = (term_of(&a), term_of(&b));
    tokio::time::timeout(Duration::from_secs(10), async {
        tokio::select! {
            _ = a_term.wait_for(Option::is_some) => {}
            _ = b_term.wait_for(Option::is_some) => {}
        }
    })
    .await
    .expect("nobody leads");
    if a_term.borrow().is_some() {
        (a, b)
    } else {
        (b, a)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_one_leader_only_it_fetches_and_a_crash_hands_over_within_the_lease() {
    let Some(redis) = private_redis_or_skip() else {
        return;
    };
    let vendor = vendor(Ipv4Addr::new(127, 0, 4, 1)).await;
    // Two seconds: with one, a loaded machine may delay a renewal past the leader's guard,
    // and for a moment nobody leads (as it should then be, but not what is watched here).
    let lease = Duration::from_secs(2);
    let config = failover_config(&redis, &vendor, "2s");
    let (leader, standby) = leader_and_standby(&config).await;
    let (mut leader_term, mut standby_term) = (term_of(&leader), term_of(&standby));

    // Over several lease periods exactly one leads, and only it fetches from the vendor.
    let watch_until = Instant::now() + 3 * lease;
    while Instant::now() < watch_until {
        tokio::select! {
            _ = leader_term.changed() => {}
            _ = standby_term.changed() => {}
            _ = tokio::time::sleep_until(watch_until.into()) => {}
        }
        let leading = [&leader_term, &standby_term]
            .iter()
            .filter(|t| t.borrow().is_some())
            .count();
        assert_eq!(leading, 1, "{leading} controllers lead");
    }
    assert!(leader_term.borrow().is_some());
    let total = vendor.vendor().fetches();
    assert!(
        total >= 5,
        "the leader fetched only {total} times in {:?}",
        3 * lease
    );
    assert_eq!(fetches(&standby), 0, "the standby fetched");
    assert!(
        fetches(&leader) + 1 >= total,
        "{} of {total}",
        fetches(&leader)
    );

    // The leader dies without releasing: the standby waits for the lease to lapse (the
    // leader renewed at most a third of a lease ago), then takes over.
    let crashed = Instant::now();
    leader.abort();
    let takeover = wait_leading(&mut standby_term, true, lease + SLACK, "takeover").await;
    eprintln!("measured: takeover after a crash took {takeover:?} (lease {lease:?})");
    assert!(
        takeover >= lease * 2 / 3 - Duration::from_millis(100),
        "took over after {takeover:?}, before the crashed leader's lease could have ended"
    );
    assert!(crashed.elapsed() <= lease + SLACK);

    // The new leader fetches.
    eventually_async(
        "the new leader fetches",
        Duration::from_secs(10),
        async || (fetches(&standby) >= 2).then_some(()),
    )
    .await;
    standby.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_hands_the_lease_over_at_once() {
    let Some(redis) = private_redis_or_skip() else {
        return;
    };
    let vendor = vendor(Ipv4Addr::new(127, 0, 4, 11)).await;
    // A 3 s lease: the leader renews every second, so at any moment its lease has at least
    // 2 s left, and a standby that took over sooner than that was handed the lease.
    let lease = Duration::from_secs(3);
    let config = failover_config(&redis, &vendor, "3s");
    let (leader, standby) = leader_and_standby(&config).await;
    let mut standby_term = term_of(&standby);
    eventually_async("the leader fetches", Duration::from_secs(10), async || {
        (fetches(&leader) >= 1).then_some(())
    })
    .await;

    let stopping = Instant::now();
    leader.shutdown().await;
    let shutdown = stopping.elapsed();
    wait_leading(&mut standby_term, true, lease, "takeover").await;
    let takeover = stopping.elapsed();
    eprintln!(
        "measured: clean hand-over took {takeover:?} from the start of shutdown ({shutdown:?} of it shutting down; lease {lease:?})"
    );
    // A tenth of the lease between standby polls, plus slack.
    assert!(
        takeover <= shutdown + lease / 10 + SLACK,
        "hand-over took {takeover:?}"
    );
    assert!(takeover < lease * 2 / 3, "hand-over took {takeover:?}");
    standby.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_redis_steps_down_before_its_lease_ends_and_leads_again_after() {
    let Some(mut redis) = private_redis_or_skip() else {
        return;
    };
    let vendor = vendor(Ipv4Addr::new(127, 0, 4, 21)).await;
    let lease = Duration::from_secs(1);
    let running = start(failover_config(&redis, &vendor, "1s")).await;
    let mut term = term_of(&running);
    wait_leading(&mut term, true, Duration::from_secs(10), "first term").await;
    eventually_async("the leader fetches", Duration::from_secs(10), async || {
        (vendor.vendor().fetches() >= 2).then_some(())
    })
    .await;

    // Redis dies: the last renewal started at most a third of a lease ago, and the term
    // ends a guard (call timeout 200 ms + a tenth of the lease) before that lease would.
    tokio::task::block_in_place(|| redis.stop()).unwrap();
    let stepped_down = wait_leading(&mut term, false, lease, "step-down").await;
    eprintln!("measured: stepped down {stepped_down:?} after Redis stopped (lease {lease:?})");
    assert!(stepped_down <= lease - Duration::from_millis(300) + SLACK / 3);

    // Not leading: the vendor is not polled any more. The second is the stimulus: at a
    // 200 ms interval a loop still running would fetch five times in it; one fetch may
    // have been on its way when the term ended.
    let parked = vendor.vendor().fetches();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let fetched = vendor.vendor().fetches() - parked;
    assert!(fetched <= 1, "fetched {fetched} times while not leading");

    // Redis is back (empty: no persistence): the controller leads and fetches again.
    tokio::task::block_in_place(|| redis.start_again()).unwrap();
    let back = wait_leading(&mut term, true, Duration::from_secs(5), "re-election").await;
    eprintln!("measured: leading again {back:?} after Redis restarted");
    eventually_async("fetches resume", Duration::from_secs(10), async || {
        (vendor.vendor().fetches() > parked).then_some(())
    })
    .await;
    running.shutdown().await;
}

const REDIS_PASSWORD: &str = "e2e-redis-s3cret";

/// Done means, with Redis: the same scenario as `end_to_end.rs`, from a config file whose
/// store is a private, password-protected Redis (the password from a `{ file = ... }` reference).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_on_a_private_redis_serves_a_worker_checked_proxies() {
    let Some(redis) = private_redis_or_skip() else {
        return;
    };
    redis
        .command(&["CONFIG", "SET", "requirepass", REDIS_PASSWORD])
        .unwrap();
    let vendor = e2e::start_vendor(Ipv4Addr::new(127, 0, 4, 31)).await;
    let store = format!(
        "[store]\nurl = \"{}0\"\npassword = {{ file = \"secrets/redis-password\" }}\nkey_prefix = \"e2e\"\ncall_timeout = \"250ms\"\nleader_lease = \"2s\"\n",
        redis.url()
    );
    let path = e2e::write_config(
        &store,
        &vendor,
        &[("secrets/redis-password", &format!("{REDIS_PASSWORD}\n"))],
    );
    let config = Config::load_with_env(&path, Role::Controller, &e2e::env()).unwrap();
    assert!(!format!("{config:?}").contains(REDIS_PASSWORD));

    // Without the password the store refuses every call, and says so without a secret.
    let mut anonymous = config.store.clone();
    anonymous.password = None;
    let opened = open_store(&anonymous).await.unwrap();
    // Past the identity check (nothing established it here) to reach the server itself.
    opened.pool.expect(None);
    let refused = opened
        .pool
        .live_sessions(proxypool_core::now_millis(), 1)
        .await
        .unwrap_err();
    assert!(refused.is_unavailable(), "{refused}");
    assert!(
        !matches!(refused, PoolError::Unavailable(Unavailable::StoreLost(_))),
        "{refused}"
    );

    let running = Controller::from_config(config)
        .await
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_leading(
        &mut term_of(&running),
        true,
        Duration::from_secs(10),
        "leadership",
    )
    .await;
    e2e::serves_a_worker_checked_proxies(&running, &vendor).await;
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durability_refuse_fails_the_start_until_redis_keeps_its_data_and_never_evicts() {
    let Some(redis) = private_redis_or_skip() else {
        return;
    };
    let vendor = vendor(Ipv4Addr::new(127, 0, 4, 61)).await;
    let mut config = failover_config(&redis, &vendor, "2s");
    config.store.durability = proxypool_controller::config::DurabilityPolicy::Refuse;

    // The test server runs without AOF: refused, saying why.
    let refused = open_store(&config.store).await.unwrap_err().to_string();
    assert!(refused.contains("appendonly is off"), "{refused}");

    redis
        .command(&["CONFIG", "SET", "appendonly", "yes"])
        .unwrap();
    redis
        .command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    let refused = open_store(&config.store).await.unwrap_err().to_string();
    assert!(
        refused.contains("maxmemory-policy is allkeys-lru"),
        "{refused}"
    );
    assert!(!refused.contains("appendonly"), "{refused}");

    redis
        .command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .unwrap();
    open_store(&config.store)
        .await
        .expect("AOF on and noeviction: durable");

    // `warn` (the default) never fails the start, even on a server that would forget.
    redis
        .command(&["CONFIG", "SET", "appendonly", "no"])
        .unwrap();
    config.store.durability = proxypool_controller::config::DurabilityPolicy::Warn;
    open_store(&config.store).await.expect("warn only");
}

/// The leader lease lives in the keyspace of the store's incarnation, so an opened store
/// refuses every call, the lease's included, until its identity is established: a lease
/// taken before would be held where no other controller looks (a second leader).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_store_leads_only_in_the_incarnation_it_established() {
    let Some(redis) = private_redis_or_skip() else {
        return;
    };
    let vendor = vendor(Ipv4Addr::new(127, 0, 4, 71)).await;
    let config = failover_config(&redis, &vendor, "2s");
    let opened = open_store(&config.store).await.unwrap();
    let now = proxypool_core::now_millis();
    let refused = opened.pool.live_sessions(now, 1).await.unwrap_err();
    assert!(
        matches!(refused, PoolError::Unavailable(Unavailable::StoreLost(_))),
        "{refused}"
    );

    // Established by hand as the store guard would: the lease follows.
    let mark = opened
        .pool
        .install_mark(now, &StoreMark::fresh(1, None).unwrap())
        .await
        .unwrap();
    opened.pool.expect(Some(Expectation {
        identity: mark.identity.clone(),
        generation: mark.generation,
    }));
    let mut term = opened.leadership.watch();
    let took = wait_leading(&mut term, true, Duration::from_secs(3), "leadership").await;
    eprintln!("leads {took:?} after the identity was established");
    // The renewer's first attempt came before the identity did, and left no lease anywhere
    // else: the only leases hash is the incarnation's, and it names this holder.
    let keys = match redis.command(&["KEYS", "*leases*"]).unwrap() {
        RespValue::Array(keys) => keys,
        other => panic!("KEYS answered {other:?}"),
    };
    let [RespValue::Bulk(key)] = keys.as_slice() else {
        panic!("one leases hash expected: {keys:?}");
    };
    let key = String::from_utf8(key.clone()).unwrap();
    assert!(key.contains(&mark.identity), "{key}");
    let RespValue::Bulk(lease) = redis
        .command(&["HGET", key.as_str(), CONTROLLER_LEASE])
        .unwrap()
    else {
        panic!("no controller lease in {key}");
    };
    let lease = String::from_utf8(lease).unwrap();
    let holder = opened.leadership.lease_holder().unwrap();
    assert!(
        lease.starts_with(&format!("{holder}\t")),
        "{lease} / {holder}"
    );
}
