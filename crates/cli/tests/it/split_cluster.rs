//! Split mode on a Redis Cluster that loses a primary: one `proxypool controller` and two
//! `proxypool gateway` processes, the activity pool on a private Redis Cluster (3 primaries
//! with a replica each, `redis+cluster://` with the primaries as seeds) spread over three
//! shard groups (`[store] groups = 3`, one per primary), the quota on a private PostgreSQL,
//! against a simulated vendor.
//!
//! While clients send requests through both gateways and extract proxies through the client
//! API, the primary of the home group (the leader lease, the extraction claims and merged
//! responses, the first copy of every worker session, beside a third of the proxies) is
//! killed with SIGKILL. What this proves:
//!
//! - Recovery without a restart: once the cluster has promoted the replica, the same
//!   controller and gateway processes serve again within a bound: extractions succeed, both
//!   gateways answer `/readyz` with 200 and route requests (2xx), and every lease either
//!   gateway holds is renewed on the promoted replica.
//! - Exclusivity through the failover, judged only from what the clients saw over the
//!   whole run (every gateway answer names its proxy in `X-Proxypool-Proxy`): no proxy id
//!   came back from two extractions; no gateway routed a proxy in a request sent after an
//!   extraction had handed that proxy out; and no proxy went back to a gateway once the
//!   other gateway had started routing it (one lease move per proxy at most, never
//!   overlapping).

use crate::common::api::Answer as HttpAnswer;
use crate::common::split::{
    cluster_store_url, controller_config_on, gateway_config, migrate_quota,
};
use crate::common::{
    Proc, Scratch, curl, curl_or_skip, eventually, free_port, gateway_proxies, gateway_status, run,
    sim_upstream, sim_vendor, try_exit_via,
};
use proxypool_testkit::{RedisCluster, RespValue};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Listed by the vendor (no rotation): enough that the extraction loop never runs out.
const PROXIES: usize = 64;
/// Each gateway's share (`[ownership] per_worker_target`).
const PER_GATEWAY: u64 = 8;
/// Extracted in one call before the loops start.
const EXTRACTED: usize = 3;
/// The pool's shard groups: one per primary.
const GROUPS: usize = 3;
/// The hash tag of the home group (`{key_prefix}:{activity}:v3:...`); the other groups'
/// are `{activity.<n>}`.
const HOME_TAG: &str = "{activity}";
/// How long the cluster may take to promote the replica (node timeout 1 s).
const FAILOVER_WAIT: Duration = Duration::from_secs(30);
/// How long after the promotion extractions and both gateways may take to work again.
const RECOVERY: Duration = Duration::from_secs(30);
/// `[ownership] lease` of the shared controller file.
const LEASE_MS: u64 = 6_000;
/// Upper bounds of every client loop, whatever happens to the test.
const LOOP_MAX_TIME: Duration = Duration::from_secs(240);
const LOOP_MAX_CALLS: usize = 5_000;

const ENV: [(&str, &str); 5] = [
    ("WORKER_TOKEN_A", "cluster-worker-token-a"),
    ("WORKER_TOKEN_B", "cluster-worker-token-b"),
    ("ACME_TOKEN", "acme-api-token-0001"),
    ("ACME_PASSWORD", "acme-gateway-password"),
    ("QUOTA_PASSWORD", "quota-role-password"),
];
const TOKEN: [(&str, &str); 1] = [("PROXYPOOL_TOKEN", "acme-api-token-0001")];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The primary to kill for one group of the pool's keys (the keys under `hash_tag`): the
/// one that owns the tag's slot now. Returns (its port, the slot).
fn primary_of_group(cluster: &RedisCluster, hash_tag: &str) -> (u16, u16) {
    let slot = RedisCluster::key_slot(hash_tag);
    (cluster.primary_of_slot(slot).unwrap(), slot)
}

/// How many keys the node on `port` holds in `slot`.
fn keys_in_slot(cluster: &RedisCluster, port: u16, slot: u16) -> i64 {
    let reply = cluster
        .connect(port)
        .and_then(|mut node| node.command(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]))
        .unwrap();
    match reply {
        RespValue::Integer(n) => n,
        other => panic!("CLUSTER COUNTKEYSINSLOT answered {other:?}"),
    }
}

/// One request through a gateway, as its client saw it.
#[derive(Debug, Clone)]
struct Answer {
    gateway: &'static str,
    /// Since the test's start: just before the request was sent, and once it was answered.
    sent: Duration,
    answered: Duration,
    /// The HTTP status (0: no HTTP answer at all).
    status: u16,
    /// `X-Proxypool-Proxy`: the proxy the gateway routed the request through.
    proxy: Option<String>,
    /// What a failed request was told (the start of the body, or curl's exit code).
    error: String,
}

impl Answer {
    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// One `proxypool extract --count 1`, as its client saw it.
#[derive(Debug, Clone)]
struct Extraction {
    sent: Duration,
    answered: Duration,
    /// The command's exit code (0: extracted; see `proxypool extract --help`).
    code: i32,
    ids: Vec<String>,
    error: String,
}

/// A GET of `origin` through the gateway's HTTP listener `proxy`: (status, proxy header,
/// the body of an answer other than 2xx).
fn through(proxy: &str, origin: &str) -> (u16, Option<String>, String) {
    let (code, out) = curl(&["-i", "-x", proxy, origin]);
    if code != 0 {
        return (0, None, format!("curl exit {code}"));
    }
    let answer = HttpAnswer::parse(&out);
    let proxy = answer.header("x-proxypool-proxy").map(str::to_owned);
    let error = if (200..300).contains(&answer.status) {
        String::new()
    } else {
        answer.body.chars().take(160).collect()
    };
    let status = answer.status;
    (status, proxy, error)
}

/// `proxypool extract --count 1 --json` against the client API at `api`.
fn extract(api: &str, count: usize) -> (i32, Vec<String>, String) {
    let count = count.to_string();
    let (code, stdout, stderr) = run(
        &[
            "extract",
            "--api",
            api,
            "--count",
            &count,
            "--mode",
            "all-or-nothing",
            "--json",
        ],
        &TOKEN,
    );
    if code != 0 {
        return (code, Vec::new(), stderr.trim().to_owned());
    }
    let answer: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let ids = answer["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|proxy| proxy["id"].as_str().unwrap().to_owned())
        .collect();
    (code, ids, String::new())
}

/// Runs `call` in a loop on a thread of its own, `pause` between calls, until stopped (or
/// past [`LOOP_MAX_TIME`] or [`LOOP_MAX_CALLS`]), keeping what each call returned.
struct Recorder<T> {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<T>>>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Clone + Send + 'static> Recorder<T> {
    fn start(pause: Duration, mut call: impl FnMut() -> T + Send + 'static) -> Recorder<T> {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let thread = std::thread::spawn({
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            move || {
                let started = Instant::now();
                let mut calls = 0;
                while !stop.load(Ordering::Relaxed)
                    && started.elapsed() < LOOP_MAX_TIME
                    && calls < LOOP_MAX_CALLS
                {
                    calls += 1;
                    let outcome = call();
                    seen.lock().unwrap().push(outcome);
                    // The client's pace, not a wait for anything.
                    std::thread::sleep(pause);
                }
            }
        });
        Recorder {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<T> {
        self.seen.lock().unwrap().clone()
    }

    fn finish(mut self) -> Vec<T> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.seen()
    }
}

impl<T> Drop for Recorder<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Requests through one gateway, back to back (50 ms apart).
fn traffic(gateway: &'static str, proxy: String, origin: String, t0: Instant) -> Recorder<Answer> {
    Recorder::start(Duration::from_millis(50), move || {
        let sent = t0.elapsed();
        let (status, proxy, error) = through(&proxy, &origin);
        Answer {
            gateway,
            sent,
            answered: t0.elapsed(),
            status,
            proxy,
            error,
        }
    })
}

/// Whether the gateway's admin listener answers `/readyz` with 200.
fn ready(admin: &str) -> bool {
    let (code, status) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://{admin}/readyz"),
    ]);
    code == 0 && status == "200"
}

/// Whether a request sent at or after `since` was answered 2xx.
fn routes_since(answers: &[Answer], since: Duration) -> bool {
    answers.iter().any(|a| a.sent >= since && a.ok())
}

/// The first and the last failed request of a gateway, and how many failed.
fn failures(answers: &[Answer]) -> Option<(Duration, Duration, usize)> {
    let failed: Vec<&Answer> = answers.iter().filter(|a| !a.ok()).collect();
    Some((failed.first()?.sent, failed.last()?.answered, failed.len()))
}

/// Which primary the test kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// The home group's: the leader lease, the extraction claims, the first session copies.
    Home,
    /// Another group's: only its proxies and the copies every group keeps.
    Other,
}

#[test]
fn a_killed_primary_of_the_home_group_is_failed_over_without_breaking_exclusivity() {
    failover(Victim::Home);
}

#[test]
fn a_killed_primary_of_another_group_is_failed_over_without_breaking_exclusivity() {
    failover(Victim::Other);
}

fn failover(which: Victim) {
    if !curl_or_skip() {
        return;
    }
    let Some(mut cluster) = proxypool_testkit::redis_cluster_or_skip(3, 1) else {
        return;
    };
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_split").unwrap();
    let (_runtime, sim) = sim_vendor(PROXIES);
    let scratch = Scratch::new("split-cluster");
    let (control, api) = (free_port(), free_port());
    let store_url = cluster_store_url(&cluster);
    let config = scratch.write(
        "controller.toml",
        &controller_config_on(
            &store_url,
            pg.port(),
            control,
            api,
            PER_GATEWAY as usize,
            &sim_upstream(&sim),
            None,
            false,
        )
        .replacen("[store]\n", &format!("[store]\ngroups = {GROUPS}\n"), 1),
    );
    let config = config.to_str().unwrap();
    let mut env: Vec<(&str, &str)> = ENV.to_vec();
    env.push(("PG_ADMIN_URL", admin_url.as_str()));
    migrate_quota(config, &env);

    let t0 = Instant::now();
    let mut controller = Proc::start(
        "controller",
        &["controller", "--config", config],
        &env,
        &scratch.path,
    );
    let ports_a = (free_port(), free_port());
    let ports_b = (free_port(), free_port());
    let file_a = scratch.write(
        "gw-a.toml",
        &gateway_config("gw-a", &[control], ports_a.0, ports_a.1, &sim, None),
    );
    let file_b = scratch.write(
        "gw-b.toml",
        &gateway_config("gw-b", &[control], ports_b.0, ports_b.1, &sim, None),
    );
    let mut gateway_a = Proc::start(
        "gw-a",
        &["gateway", "--config", file_a.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let mut gateway_b = Proc::start(
        "gw-b",
        &["gateway", "--config", file_b.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let admin_a = format!("127.0.0.1:{}", ports_a.1);
    let admin_b = format!("127.0.0.1:{}", ports_b.1);
    let origin = sim.origin().url("/");
    let proxy_a = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_a.0);
    let proxy_b = format!("http://acme:acme-gateway-password@127.0.0.1:{}", ports_b.0);

    // 1. Everything up: both gateways hold their share and route, and the API extracts.
    let started = eventually(
        "both gateways hold their share of the pool and route",
        Duration::from_secs(60),
        || {
            gateway_proxies(&admin_a) == PER_GATEWAY
                && gateway_proxies(&admin_b) == PER_GATEWAY
                && try_exit_via(&proxy_a, &origin).is_some()
                && try_exit_via(&proxy_b, &origin).is_some()
        },
    );
    eprintln!("both gateways route {started:?} after the start");
    let api_url = format!("http://127.0.0.1:{api}");
    let mut first = Vec::new();
    eventually(
        "the API extracts from the pool on the cluster",
        Duration::from_secs(30),
        || {
            let (code, ids, _) = extract(&api_url, EXTRACTED);
            first = ids;
            code == 0
        },
    );
    assert_eq!(first.len(), EXTRACTED, "{first:?}");
    let first_answered = t0.elapsed();

    // 2. Traffic through both gateways and extractions, throughout.
    let traffic_a = traffic("gw-a", proxy_a.clone(), origin.clone(), t0);
    let traffic_b = traffic("gw-b", proxy_b.clone(), origin.clone(), t0);
    let extractions = Recorder::start(Duration::from_millis(500), {
        let api_url = api_url.clone();
        move || {
            let sent = t0.elapsed();
            let (code, ids, error) = extract(&api_url, 1);
            Extraction {
                sent,
                answered: t0.elapsed(),
                code,
                ids,
                error,
            }
        }
    });
    eventually("the loops are under way", Duration::from_secs(30), || {
        traffic_a.seen().iter().filter(|a| a.ok()).count() >= 10
            && traffic_b.seen().iter().filter(|a| a.ok()).count() >= 10
            && extractions.seen().iter().filter(|e| e.code == 0).count() >= 2
    });

    // The pool is spread: every primary holds some of its keys.
    for port in cluster.primaries().unwrap() {
        let held = cluster
            .connect(port)
            .and_then(|mut node| node.command(&["DBSIZE"]))
            .unwrap();
        assert!(
            matches!(held, RespValue::Integer(n) if n > 0),
            "primary {port} holds none of the pool ({held:?})"
        );
    }
    // The primary of the home group, or of another one, dies.
    let (home, slot) = primary_of_group(&cluster, HOME_TAG);
    let keys = keys_in_slot(&cluster, home, slot);
    assert!(
        keys > 0,
        "the home group's slot {slot} holds no key on its primary {home}"
    );
    let victim = match which {
        Victim::Home => home,
        Victim::Other => cluster
            .primaries()
            .unwrap()
            .into_iter()
            .find(|port| *port != home)
            .unwrap(),
    };
    let killed_at = t0.elapsed();
    cluster.kill(victim).unwrap();
    eprintln!("killed primary {victim} ({which:?} group) at {killed_at:?}");

    // 3. The replica takes over; then everything works again, within a bound.
    let promoted = cluster.wait_for_failover(victim, FAILOVER_WAIT).unwrap();
    let failed_over_at = t0.elapsed();
    if which == Victim::Home {
        assert_eq!(primary_of_group(&cluster, HOME_TAG).0, promoted);
    }
    eprintln!(
        "replica {promoted} promoted {:?} after the kill",
        failed_over_at - killed_at
    );
    let recovered = eventually(
        "extractions succeed and both gateways route again after the failover",
        RECOVERY,
        || {
            extractions
                .seen()
                .iter()
                .any(|e| e.sent >= failed_over_at && e.code == 0)
                && routes_since(&traffic_a.seen(), failed_over_at)
                && routes_since(&traffic_b.seen(), failed_over_at)
                && ready(&admin_a)
                && ready(&admin_b)
        },
    );
    let recovered_ms = now_ms();
    eprintln!("recovered {recovered:?} after the promotion");
    // Traffic and extractions go on until every lease either gateway holds was granted or
    // renewed after the recovery: any lease moved by the outage has moved by then.
    let renewed = eventually(
        "every gateway lease renewed after the recovery",
        RECOVERY,
        || {
            [&admin_a, &admin_b].iter().all(|admin| {
                gateway_status(admin)
                    .and_then(|status| status["leases"]["earliest_end_ms"].as_u64())
                    .is_some_and(|end| end >= recovered_ms + LEASE_MS)
            })
        },
    );
    eprintln!("all leases renewed {renewed:?} after recovering");
    let ended = t0.elapsed();
    let answers: Vec<Answer> = [traffic_a.finish(), traffic_b.finish()].concat();
    let extractions = extractions.finish();

    // What the run looked like.
    for gateway in ["gw-a", "gw-b"] {
        let mine: Vec<Answer> = answers
            .iter()
            .filter(|a| a.gateway == gateway)
            .cloned()
            .collect();
        let statuses: BTreeMap<u16, usize> = mine.iter().fold(BTreeMap::new(), |mut m, a| {
            *m.entry(a.status).or_default() += 1;
            m
        });
        let told: BTreeSet<&str> = mine
            .iter()
            .filter(|a| !a.ok())
            .map(|a| a.error.as_str())
            .collect();
        eprintln!(
            "{gateway}: {} requests, statuses {statuses:?}, failures (first, last, count) {:?}: {told:?}",
            mine.len(),
            failures(&mine)
        );
    }
    let codes: BTreeMap<i32, usize> = extractions.iter().fold(BTreeMap::new(), |mut m, e| {
        *m.entry(e.code).or_default() += 1;
        m
    });
    eprintln!(
        "{} extractions in the loop, exit codes {codes:?}; kill at {killed_at:?}, promotion at {failed_over_at:?}, end at {ended:?}",
        extractions.len()
    );
    for e in extractions.iter().filter(|e| e.code != 0) {
        eprintln!(
            "  extraction at {:?}..{:?}: exit {}: {}",
            e.sent, e.answered, e.code, e.error
        );
    }

    // Before the kill nothing failed: what fails afterwards is the failover's doing.
    for a in answers.iter().filter(|a| a.answered < killed_at) {
        assert!(a.ok(), "a request failed before the kill: {a:?}");
    }
    assert!(
        extractions
            .iter()
            .filter(|e| e.answered < killed_at)
            .all(|e| e.code == 0),
        "an extraction failed before the kill: {extractions:?}"
    );

    // 4. Exclusivity, from what the clients saw.
    // (a) No proxy id came back from two extractions.
    let mut extracted_at: BTreeMap<String, Duration> = BTreeMap::new();
    for (id, answered) in first.iter().map(|id| (id, first_answered)).chain(
        extractions
            .iter()
            .flat_map(|e| e.ids.iter().map(|id| (id, e.answered))),
    ) {
        assert!(
            extracted_at.insert(id.clone(), answered).is_none(),
            "proxy {id} was extracted twice"
        );
    }
    // (b) No gateway routed an extracted proxy in a request sent after the extraction
    // answered. (Before it, a gateway may have held the proxy: a lease that lapsed in the
    // outage puts the proxy back in the pool, where an extraction may take it.)
    let mut routed_before_extraction = BTreeSet::new();
    for a in &answers {
        let Some(id) = &a.proxy else { continue };
        if let Some(&at) = extracted_at.get(id) {
            assert!(
                a.sent < at,
                "{} routed proxy {id} at {:?}, after its extraction answered at {at:?}",
                a.gateway,
                a.sent
            );
            routed_before_extraction.insert(id.clone());
        }
    }
    // (c) A proxy routed by both gateways moved once: no request of the first gateway
    // through it was sent after the second had answered one through it.
    let mut by_proxy: BTreeMap<&str, Vec<&Answer>> = BTreeMap::new();
    for a in &answers {
        if let Some(id) = &a.proxy {
            by_proxy.entry(id.as_str()).or_default().push(a);
        }
    }
    let mut moved = Vec::new();
    for (id, uses) in &by_proxy {
        let gateways: BTreeSet<&str> = uses.iter().map(|a| a.gateway).collect();
        if gateways.len() < 2 {
            continue;
        }
        let span = |gateway: &str| {
            let mine = uses.iter().filter(|a| a.gateway == gateway);
            let first = mine.clone().map(|a| a.answered).min().unwrap();
            let last = mine.map(|a| a.sent).max().unwrap();
            (first, last)
        };
        let (first_a, last_a) = span("gw-a");
        let (first_b, last_b) = span("gw-b");
        let (from, to, last_old, first_new) = if first_a < first_b {
            ("gw-a", "gw-b", last_a, first_b)
        } else {
            ("gw-b", "gw-a", last_b, first_a)
        };
        assert!(
            last_old < first_new,
            "proxy {id}: {from} still routed it at {last_old:?}, after {to} had from {first_new:?}"
        );
        moved.push(format!(
            "{id}: {from} -> {to} ({last_old:?} / {first_new:?})"
        ));
    }
    let routed: BTreeSet<&str> = by_proxy.keys().copied().collect();
    eprintln!(
        "{} proxies routed, {} moved between gateways {moved:?}, {} of {} extracted ones routed before their extraction",
        routed.len(),
        moved.len(),
        routed_before_extraction.len(),
        extracted_at.len()
    );
    assert!(
        routed.len() as u64 >= 2 * PER_GATEWAY,
        "the gateways routed through {} proxies",
        routed.len()
    );

    // Clean stops: the processes that lived through the failover end normally.
    for process in [&mut gateway_a, &mut gateway_b, &mut controller] {
        process.signal("TERM");
        assert_eq!(
            process.wait(Duration::from_secs(30)).code(),
            Some(0),
            "{}: {}",
            process.name,
            process.stderr_tail()
        );
    }
    drop(cluster);
    drop(pg);
}
