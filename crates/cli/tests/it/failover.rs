//! Split mode through controller failures, with every timing at its default: two
//! `proxypool controller` processes and two `proxypool gateway` processes (each listing
//! both controllers) on a private Redis with AOF on and a private PostgreSQL, against a
//! simulated vendor, with traffic through both gateways the whole time.
//!
//! 1. SIGKILL the leader at the worst moment of the lease cycle: when the earliest
//!    gateway lease has `renew_before` plus a little left, so the dead leader renewed
//!    nothing and the standby must take over and renew in time. No request fails.
//! 2. SIGSTOP the new leader past its leader lease, then SIGCONT it: the other controller
//!    takes over, the stopped one comes back as a standby (its stale term's writes are
//!    refused by the store), no request fails and no proxy is held by two owners.
//! 3. A drain sent to the standby is carried out by the leader, and survives the leader's
//!    death: the next leader keeps the gateway drained until it is uncordoned.

use crate::common::exposition::ownership_rounds;
use crate::common::split::{failover_controller_config, gateway_config, migrate_quota};
use crate::common::{
    Proc, Scratch, api, curl, curl_or_skip, eventually, eventually_some, free_port,
    gateway_proxies, gateway_status, sim_upstream, sim_vendor, try_exit_via,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PROXIES: usize = 10;
/// `[ownership] renew_before` by default.
const RENEW_BEFORE_MS: u64 = 20_000;
/// `[store] leader_lease` by default.
const LEADER_LEASE: Duration = Duration::from_secs(10);

const ENV: [(&str, &str); 5] = [
    ("WORKER_TOKEN_A", "failover-worker-token-a"),
    ("WORKER_TOKEN_B", "failover-worker-token-b"),
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
    ("QUOTA_PASSWORD", "quota-role-password"),
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One controller of the pair: its ports and, while it runs, its process.
struct Controller {
    name: &'static str,
    config: String,
    api: u16,
    process: Option<Proc>,
}

impl Controller {
    fn start(&mut self, logs: &Path) {
        let env: Vec<(&str, &str)> = ENV.to_vec();
        self.process = Some(Proc::start(
            self.name,
            &["controller", "--config", &self.config],
            &env,
            logs,
        ));
    }

    fn signal(&self, signal: &str) {
        self.process.as_ref().expect("running").signal(signal);
    }

    fn kill(&mut self) {
        let mut process = self.process.take().expect("running");
        process.signal("KILL");
        process.wait(Duration::from_secs(10));
    }

    /// Its `/metrics` as `(series, value)` pairs (none when unreachable).
    fn metrics(&self) -> Vec<(String, f64)> {
        let (code, body) = curl(&[&format!("http://127.0.0.1:{}/metrics", self.api)]);
        if code != 0 {
            return Vec::new();
        }
        body.lines()
            .filter_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                Some((series.to_owned(), value.parse().ok()?))
            })
            .collect()
    }

    /// One series of its `/metrics` (0 when absent or unreachable).
    fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .into_iter()
            .find_map(|(name, value)| (name == series).then_some(value))
            .unwrap_or(0.0)
    }

    /// The sum of every series of `family` whose labels contain `label`.
    fn metric_sum(&self, family: &str, label: &str) -> f64 {
        self.metrics()
            .into_iter()
            .filter(|(name, _)| name.starts_with(&format!("{family}{{")) && name.contains(label))
            .map(|(_, value)| value)
            .sum()
    }

    fn leads(&self) -> bool {
        self.metric("proxypool_controller_leader") == 1.0
    }

    /// An admin call to its client API, a 503 retried as a client does: (status, body);
    /// status 0 when it cannot be reached.
    fn admin(&self, method: &str, path: &str) -> (u16, Value) {
        let answer = api::call(
            method,
            &format!("http://127.0.0.1:{}{path}", self.api),
            Some("acme-api-token-0001"),
            None,
        );
        (answer.status, answer.json())
    }

    fn worker_mode(&self, worker: &str) -> String {
        let (status, body) = self.admin("GET", "/v1/admin/workers");
        assert_eq!(status, 200, "{body}");
        body["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["worker"] == worker)
            .map(|w| w["mode"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    }
}

/// Requests through one gateway in a loop until stopped; every failure is kept with its
/// time and what the gateway answered.
struct Traffic {
    stop: Arc<AtomicBool>,
    /// When the last finished request was sent (Unix ms; 0 before the first).
    last_sent_ms: Arc<AtomicU64>,
    /// How many requests finished.
    finished: Arc<AtomicUsize>,
    thread: Option<JoinHandle<(usize, Vec<String>)>>,
}

impl Traffic {
    fn start(proxy: String, origin: String) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let last_sent_ms = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        let (flag, last, count) = (
            Arc::clone(&stop),
            Arc::clone(&last_sent_ms),
            Arc::clone(&finished),
        );
        let thread = std::thread::spawn(move || {
            let (mut sent, mut failed) = (0, Vec::new());
            while !flag.load(Ordering::Relaxed) {
                sent += 1;
                let sent_at = now_ms();
                let (code, body) = curl(&["-x", &proxy, &origin]);
                let ok = code == 0
                    && serde_json::from_str::<Value>(&body)
                        .is_ok_and(|echo| echo["exit"].is_string());
                if !ok {
                    failed.push(format!("at {} ms: curl {code}: {body}", now_ms()));
                }
                last.store(sent_at, Ordering::Relaxed);
                count.fetch_add(1, Ordering::Relaxed);
                // The client's pace (about 20 requests a second), not a wait for anything.
                std::thread::sleep(Duration::from_millis(50));
            }
            (sent, failed)
        });
        Traffic {
            stop,
            last_sent_ms,
            finished,
            thread: Some(thread),
        }
    }

    /// Whether a request sent after `ms` (Unix) has finished.
    fn sent_after(&self, ms: u64) -> bool {
        self.last_sent_ms.load(Ordering::Relaxed) > ms
    }

    fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// Stops and asserts that every request succeeded.
    fn finish(mut self, what: &str) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let (sent, failed) = self.thread.take().unwrap().join().unwrap();
        assert!(
            failed.is_empty(),
            "{what}: {} of {sent} requests failed: {failed:#?}",
            failed.len()
        );
        assert!(sent > 20, "{what}: only {sent} requests");
        sent
    }
}

/// The earliest lease end either gateway knows of.
fn earliest_lease_end(admins: &[&str]) -> Option<u64> {
    admins
        .iter()
        .filter_map(|admin| gateway_status(admin)?["leases"]["earliest_end_ms"].as_u64())
        .min()
}

fn exits(proxy: &str, origin: &str, n: usize) -> BTreeSet<String> {
    (0..n).filter_map(|_| try_exit_via(proxy, origin)).collect()
}

#[test]
fn gateways_serve_through_a_killed_a_stopped_and_a_draining_leader() {
    if !curl_or_skip() {
        return;
    }
    let Some(redis) = proxypool_testkit::private_redis_or_skip() else {
        return;
    };
    // Exclusivity needs a Redis that keeps what it was told: AOF on.
    redis
        .command(&["CONFIG", "SET", "appendonly", "yes"])
        .unwrap();
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (_runtime, sim) = sim_vendor(PROXIES);
    let upstream = sim_upstream(&sim);
    let scratch = Scratch::new("failover");
    let mut controllers = ["ctl-1", "ctl-2"].map(|name| {
        let (control, api) = (free_port(), free_port());
        let file = scratch.write(
            &format!("{name}.toml"),
            &failover_controller_config(&redis, pg.port(), control, api, &upstream),
        );
        (
            control,
            Controller {
                name,
                config: file.to_str().unwrap().to_owned(),
                api,
                process: None,
            },
        )
    });
    let controls = [controllers[0].0, controllers[1].0];
    let [(_, first), (_, second)] = &mut controllers;
    let mut env: Vec<(&str, &str)> = ENV.to_vec();
    env.push(("PG_ADMIN_URL", admin_url.as_str()));
    migrate_quota(&first.config, &env);

    first.start(&scratch.path);
    eventually(
        "the first controller leads",
        Duration::from_secs(30),
        || first.leads(),
    );
    second.start(&scratch.path);
    eventually(
        "the second controller serves",
        Duration::from_secs(30),
        || {
            second.metric("proxypool_controller_leader") == 0.0
                && second.admin("GET", "/v1/admin/workers").0 == 200
        },
    );

    // Gateway A lists the leader first, gateway B the standby: killing the leader takes
    // A's controller away and leaves B's.
    let ports_a = (free_port(), free_port());
    let ports_b = (free_port(), free_port());
    let file_a = scratch.write(
        "gw-a.toml",
        &gateway_config("gw-a", &controls, ports_a.0, ports_a.1, &sim, None),
    );
    let file_b = scratch.write(
        "gw-b.toml",
        &gateway_config(
            "gw-b",
            &[controls[1], controls[0]],
            ports_b.0,
            ports_b.1,
            &sim,
            None,
        ),
    );
    let _gateway_a = Proc::start(
        "gw-a",
        &["gateway", "--config", file_a.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let _gateway_b = Proc::start(
        "gw-b",
        &["gateway", "--config", file_b.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let admin_a = format!("127.0.0.1:{}", ports_a.1);
    let admin_b = format!("127.0.0.1:{}", ports_b.1);
    let admins = [admin_a.as_str(), admin_b.as_str()];
    let half = (PROXIES / 2) as u64;
    eventually(
        "both gateways hold half of the proxies",
        Duration::from_secs(60),
        || gateway_proxies(&admin_a) == half && gateway_proxies(&admin_b) == half,
    );
    let origin = sim.origin().url("/");
    let proxy_a = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_a.0);
    let proxy_b = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_b.0);

    // 1. SIGKILL the leader when the earliest lease has renew_before + 300 ms left.
    let traffic = [
        Traffic::start(proxy_a.clone(), origin.clone()),
        Traffic::start(proxy_b.clone(), origin.clone()),
    ];
    let (lease_end, kill_at) = eventually_some(
        "a lease cycle with time to aim the kill",
        Duration::from_secs(60),
        || {
            let end = earliest_lease_end(&admins).expect("leases");
            let kill_at = end.saturating_sub(RENEW_BEFORE_MS + 300);
            (kill_at >= now_ms() + 50).then_some((end, kill_at))
        },
    );
    // The moment of the kill is the stimulus: the worst one in the lease cycle.
    std::thread::sleep(Duration::from_millis(kill_at.saturating_sub(now_ms())));
    let killed_at = now_ms();
    first.kill();
    eprintln!(
        "killed the leader with {} ms left on the earliest lease",
        lease_end - killed_at
    );
    let took_over = eventually(
        "the standby takes over",
        LEADER_LEASE + Duration::from_secs(10),
        || second.leads(),
    );
    eprintln!("the standby leads {took_over:?} after the kill");
    // Past the old lease end (and its cutoff) with every request answered: the traffic
    // must span it, so each loop has a request sent after it.
    let past = lease_end + 3_000;
    eventually(
        "both client loops send past the old lease end",
        Duration::from_secs(60),
        || traffic.iter().all(|t| t.sent_after(past)),
    );
    let renewed = earliest_lease_end(&admins).expect("leases");
    assert!(
        renewed > lease_end,
        "leases renewed by the new leader: {renewed} vs {lease_end}"
    );
    let [a, b] = traffic;
    let sent = a.finish("gateway A across the kill") + b.finish("gateway B across the kill");
    eprintln!("{sent} requests across the kill, none failed");
    assert_eq!(gateway_proxies(&admin_a), half);
    assert_eq!(gateway_proxies(&admin_b), half);

    // 2. The first controller comes back as a standby; SIGSTOP the leader past its lease.
    first.start(&scratch.path);
    eventually(
        "the restarted controller serves",
        Duration::from_secs(30),
        || first.admin("GET", "/v1/admin/workers").0 == 200,
    );
    assert!(!first.leads());
    let traffic = [
        Traffic::start(proxy_a.clone(), origin.clone()),
        Traffic::start(proxy_b.clone(), origin.clone()),
    ];
    second.signal("STOP");
    let stopped_at = now_ms();
    let took_over = eventually(
        "the restarted controller takes over from the stopped one",
        LEADER_LEASE + Duration::from_secs(10),
        || first.leads(),
    );
    eprintln!("took over {took_over:?} after SIGSTOP");
    // Both gateways move off the stopped controller: the live one answered them after the
    // stop.
    let live_control = format!("127.0.0.1:{}", controls[0]);
    let moved = eventually(
        "both gateways are served by the live controller",
        Duration::from_secs(60),
        || {
            admins.iter().all(|admin| {
                gateway_status(admin).is_some_and(|status| {
                    let since_stop = now_ms().saturating_sub(stopped_at);
                    status["controller"] == live_control.as_str()
                        && status["since_controller_ms"]
                            .as_u64()
                            .is_some_and(|since| since + 500 < since_stop)
                })
            })
        },
    );
    eprintln!("both gateways on the live controller {moved:?} after the takeover");
    second.signal("CONT");
    eventually(
        "the resumed controller steps down",
        Duration::from_secs(10),
        || second.metric("proxypool_controller_leader") == 0.0 && !second.leads(),
    );
    // Traffic through both gateways after the resume, while the resumed controller's
    // stale writes are refused.
    let resumed = traffic.each_ref().map(Traffic::finished);
    eventually(
        "40 more requests through each gateway after the resume",
        Duration::from_secs(60),
        || {
            traffic
                .iter()
                .zip(resumed)
                .all(|(t, at)| t.finished() >= at + 40)
        },
    );
    let [a, b] = traffic;
    let sent = a.finish("gateway A across the stop") + b.finish("gateway B across the stop");
    let refused = second.metric_sum(
        "proxypool_controller_store_errors_total",
        "error=\"stale_term\"",
    );
    eprintln!(
        "{sent} requests across the stop, none failed; stale-term refusals seen: {}",
        refused as u64
    );
    assert!(first.leads(), "one leader");
    // Nothing is held twice: every proxy is routed by exactly one gateway.
    assert_eq!(
        gateway_proxies(&admin_a) + gateway_proxies(&admin_b),
        PROXIES as u64
    );
    let exits_a = exits(&proxy_a, &origin, 15);
    let exits_b = exits(&proxy_b, &origin, 15);
    assert!(exits_a.is_disjoint(&exits_b), "{exits_a:?} / {exits_b:?}");
    assert_eq!(
        exits_a.len() + exits_b.len(),
        PROXIES,
        "{exits_a:?} / {exits_b:?}"
    );

    // 3. A drain sent to the standby is done by the leader and survives its death.
    let (status, body) = second.admin("POST", "/v1/admin/workers/gw-b/drain");
    assert_eq!(status, 200, "{body}");
    eventually(
        "the leader drains gateway B",
        Duration::from_secs(60),
        || gateway_proxies(&admin_b) == 0 && gateway_proxies(&admin_a) == PROXIES as u64,
    );
    assert_eq!(first.worker_mode("gw-b"), "draining");
    first.kill();
    eventually(
        "the standby takes over again",
        LEADER_LEASE + Duration::from_secs(10),
        || second.leads(),
    );
    assert_eq!(second.worker_mode("gw-b"), "draining");
    // A few ownership rounds of the new leader (each asks the store for assignable
    // proxies once): gateway B still gets nothing.
    let rounds = || ownership_rounds(&format!("http://127.0.0.1:{}/metrics", second.api));
    let before = rounds();
    eventually(
        "four ownership rounds of the new leader",
        Duration::from_secs(60),
        || rounds() >= before + 4.0,
    );
    assert_eq!(
        gateway_proxies(&admin_b),
        0,
        "the drain outlived the leader"
    );
    let (status, body) = second.admin("POST", "/v1/admin/workers/gw-b/uncordon");
    assert_eq!(status, 200, "{body}");
    assert_eq!(second.worker_mode("gw-b"), "active");
    // Back in the plan; rebalancing moves proxies to it again.
    eventually(
        "gateway B is given proxies again",
        Duration::from_secs(60),
        || gateway_proxies(&admin_b) > 0,
    );
}
