//! RedisPool over shard groups, three deployments side by side in one run:
//!
//! - (a) one private redis-server, `groups = 1` (the layout before shard groups);
//! - (b) the same redis-server, `groups = 3` (what the groups cost by themselves);
//! - (c) a private Redis Cluster of 3 primaries without replicas, `groups = 3` (each
//!   group's hash tag on its own primary).
//!
//! For each it measures, printing Markdown tables:
//!
//! - extraction throughput with 16 and 64 calls in flight (one proxy each, partial, no
//!   filter, a distinct request id each: an extraction is anchored in the group its id
//!   hashes to, so the requests spread over the groups), p50 and p99, and per extraction:
//!   the CPU of every redis-server process of the deployment (utime + stime of
//!   `/proc/<pid>/stat`), the bench process's own CPU (`/proc/self/stat`: the pool's
//!   client side plus the loop around it), and the `FCALL`s it took and the Redis
//!   commands they ran (`INFO commandstats` of every node);
//! - upsert throughput of 1,000-proxy batches of new proxies (one batch in flight), with
//!   the same CPU and call counts per proxy;
//! - the trivial `EVALSHA` of `RedisPool::probe` with 64 in flight: the per-call cost of
//!   each client (connection manager or cluster connection) and server, with no pool work;
//! - the ratios (b)/(a) and (c)/(a) of every row, what limited each row on this machine
//!   (cores busy: the redis-servers, the bench, everything else; and the time each spent
//!   runnable but waiting for a core, from `/proc/<pid>/task/*/schedstat`), the cluster's
//!   work per primary, the groups the extracted proxies came from, and what a core per
//!   primary would carry, from the CPU per operation.
//!
//! (The group of each extracted proxy is `RedisPool::group_index`; the records each group
//! holds after the first load are checked against it.)
//!
//! Each deployment starts with 50,000 AVAILABLE proxies; after every extraction row each
//! group gets back as many fresh AVAILABLE proxies as were taken from it, so every row of
//! every deployment starts from the same stock. The rows run in rounds, the deployments in
//! a rotating order within each round (so a burst of load from elsewhere on the machine
//! hits each of them in turn); the tables show the median over the rounds.
//!
//! Run: `cargo bench -p proxypool-redis --bench cluster_scale` (release; about a minute
//! after the build; needs `redis-server` and `redis-cli`).

mod common;

use common::{command_stats, id_of, mark_healthy, request, run, upsert_new};
use proxypool_core::ports::*;
use proxypool_core::{ProxyFilter, now_millis};
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisCluster, RedisServer, RespConnection, RespValue};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// AVAILABLE proxies each deployment holds at the start of every row.
const POOL: usize = 50_000;
/// Shard groups of (b) and (c), and primaries of the cluster.
const GROUPS: usize = 3;
/// Extractions per measurement (a multiple of every in-flight count).
/// Well below a third of `POOL`, so no group runs dry within a row even if the
/// extractions landed on one group (the table of where they came from shows it).
const EXTRACTIONS: usize = 8_000;
const IN_FLIGHT: [usize; 3] = [16, 64, 192];
/// 1,000-proxy batches of new proxies per upsert measurement.
const UPSERT_BATCHES: usize = 30;
/// Trivial calls per probe measurement (a multiple of the in-flight count).
const PROBES: usize = 64_000;
const PROBE_IN_FLIGHT: usize = 64;
/// Enough CPU per measurement that the 10 ms clock tick of `/proc/<pid>/stat` is a few
/// per cent of it, and enough rounds that a median is not one burst of other work.
const ROUNDS: usize = 7;

/// One redis-server process of a deployment.
struct Node {
    port: u16,
    pid: u32,
}

impl Node {
    fn command(&self, args: &[&str]) -> RespValue {
        RespConnection::connect("127.0.0.1", self.port)
            .unwrap()
            .command(args)
            .unwrap()
    }

    /// Since the last `CONFIG RESETSTAT`: the `FCALL`s (port calls) and `EVALSHA`s (the
    /// probe), and the Redis commands the functions ran inside them.
    fn calls(&self) -> (f64, f64) {
        let info = self.command(&["INFO", "commandstats"]);
        command_stats(&info.as_text().unwrap()).into_iter().fold(
            (0.0, 0.0),
            |(calls, inside), (name, n, _)| match name.as_str() {
                "fcall" | "evalsha" => (calls + n, inside),
                "info" | "config" | "function" | "cluster" | "client" | "hello" => (calls, inside),
                _ => (calls, inside + n),
            },
        )
    }
}

/// One of the three deployments: its pool, its server processes and which serves each group.
struct Deployment {
    label: &'static str,
    pool: Arc<RedisPool>,
    groups: usize,
    nodes: Vec<Node>,
    /// The node (index into `nodes`) that holds each group's keys.
    node_of_group: Vec<usize>,
    /// The first proxy index this deployment has not loaded yet.
    next: usize,
    /// Proxies taken from each group by the extraction rows, over every round.
    taken: Vec<u64>,
}

fn new_pool(client: RedisClient, prefix: &str, groups: usize) -> Arc<RedisPool> {
    let options = RedisPoolOptions {
        key_prefix: prefix.to_owned(),
        // Generous: on this shared 2-core machine a burst of other work can hold a call
        // up far longer than the production default.
        call_timeout: Duration::from_secs(60),
        inventory_scan_budget: 1_000_000,
        groups,
        ..RedisPoolOptions::default()
    };
    Arc::new(RedisPool::new(client, options).unwrap())
}

impl Deployment {
    /// The next `wanted[g]` unused proxies of each group `g`, in index order.
    fn fresh(&mut self, wanted: &[u64]) -> Vec<usize> {
        let mut left = wanted.to_vec();
        let mut out = Vec::new();
        while left.iter().any(|&n| n > 0) {
            let i = self.next;
            self.next += 1;
            let g = self.pool.group_index(&id_of(i));
            if left[g] > 0 {
                left[g] -= 1;
                out.push(i);
            }
        }
        out
    }

    /// Loads and marks healthy the next `wanted[g]` new proxies of each group.
    async fn top_up(&mut self, wanted: &[u64]) {
        let indices = self.fresh(wanted);
        upsert_new(&self.pool, &indices).await;
        mark_healthy(&self.pool, &indices).await;
    }

    /// Records per group as Redis holds them (`HLEN records` on the group's node).
    fn records_per_group(&self) -> Vec<i64> {
        self.pool
            .group_keyspaces()
            .iter()
            .zip(&self.node_of_group)
            .map(|(base, &node)| {
                match self.nodes[node].command(&["HLEN", &format!("{base}records")]) {
                    RespValue::Integer(n) => n,
                    other => panic!("HLEN answered {other:?}"),
                }
            })
            .collect()
    }

    fn reset_stats(&self) {
        for node in &self.nodes {
            node.command(&["CONFIG", "RESETSTAT"]);
        }
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: &str) -> u64 {
    proxypool_testkit::cpu::cpu_ticks(pid).expect("the process's /proc/<pid>/stat")
}

/// Nanoseconds the threads of a process spent runnable but waiting for a core (the second
/// field of each `/proc/<pid>/task/<tid>/schedstat`): what CPU contention costs it.
fn run_queue_wait_ns(pid: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The machine's busy and stolen ticks over all cores (`/proc/stat`, first line).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    (f[0] + f[1] + f[2] + f[5] + f[6], f[7])
}

/// CPU counters at one instant.
struct Sample {
    at: Instant,
    nodes: Vec<u64>,
    bench: u64,
    machine: (u64, u64),
    /// Run-queue waits (ns) of the redis-servers together, and of this process.
    nodes_wait: u64,
    bench_wait: u64,
}

fn sample(deployment: &Deployment) -> Sample {
    Sample {
        at: Instant::now(),
        nodes: deployment
            .nodes
            .iter()
            .map(|n| cpu_ticks(&n.pid.to_string()))
            .collect(),
        bench: cpu_ticks("self"),
        machine: machine_ticks(),
        nodes_wait: deployment
            .nodes
            .iter()
            .map(|n| run_queue_wait_ns(&n.pid.to_string()))
            .sum(),
        bench_wait: run_queue_wait_ns("self"),
    }
}

/// One measurement of one row on one deployment.
#[derive(Clone)]
struct Measure {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Per operation (extraction, proxy, or trivial call).
    server_us: f64,
    node_us: Vec<f64>,
    bench_us: f64,
    calls: f64,
    node_calls: Vec<f64>,
    /// Redis commands run inside those calls, per operation, on each node.
    node_inside: Vec<f64>,
    /// Cores busy during the measurement.
    node_cores: Vec<f64>,
    bench_cores: f64,
    machine_cores: f64,
    steal_cores: f64,
    /// Seconds per second the redis-servers (together) and this process waited for a core.
    server_wait: f64,
    bench_wait: f64,
}

impl Measure {
    fn server_cores(&self) -> f64 {
        self.node_cores.iter().sum()
    }
}

/// What `before` to now cost, over `ops` operations and `calls_per` of them per reported
/// call count (1, or 1,000 for upsert batches).
fn measure(
    deployment: &Deployment,
    before: &Sample,
    ops: f64,
    calls_per: f64,
    run: Option<&common::Run>,
    hz: f64,
) -> Measure {
    let after = sample(deployment);
    let secs = after.at.duration_since(before.at).as_secs_f64();
    let us_per_op = |ticks: u64| ticks as f64 / hz * 1e6 / ops;
    let cores = |ticks: u64| ticks as f64 / hz / secs;
    let node_ticks: Vec<u64> = after
        .nodes
        .iter()
        .zip(&before.nodes)
        .map(|(a, b)| a - b)
        .collect();
    let (node_calls, node_inside): (Vec<f64>, Vec<f64>) = deployment
        .nodes
        .iter()
        .map(|n| {
            let (calls, inside) = n.calls();
            (calls / ops * calls_per, inside / ops * calls_per)
        })
        .unzip();
    Measure {
        rate: run.map_or(ops / secs, |r| r.ops_per_sec),
        p50_ms: run.map_or(f64::NAN, |r| r.p50.as_secs_f64() * 1e3),
        p99_ms: run.map_or(f64::NAN, |r| r.p99.as_secs_f64() * 1e3),
        server_us: us_per_op(node_ticks.iter().sum()),
        node_us: node_ticks.iter().map(|&t| us_per_op(t)).collect(),
        bench_us: us_per_op(after.bench - before.bench),
        calls: node_calls.iter().sum(),
        node_calls,
        node_inside,
        node_cores: node_ticks.iter().map(|&t| cores(t)).collect(),
        bench_cores: cores(after.bench - before.bench),
        machine_cores: cores(after.machine.0 - before.machine.0),
        steal_cores: cores(after.machine.1 - before.machine.1),
        server_wait: (after.nodes_wait - before.nodes_wait) as f64 / 1e9 / secs,
        bench_wait: (after.bench_wait - before.bench_wait) as f64 / 1e9 / secs,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Row {
    Extract(usize),
    Upsert,
    Probe,
}

impl Row {
    fn label(self) -> String {
        match self {
            Row::Extract(n) => format!("extract 1 (no filter), {n} in flight"),
            Row::Upsert => "upsert 1,000 new proxies, 1 batch in flight".to_owned(),
            Row::Probe => format!("trivial EVALSHA (`return 1`), {PROBE_IN_FLIGHT} in flight"),
        }
    }

    /// What one operation of the row is, and its plural.
    fn unit(self) -> (&'static str, &'static str) {
        match self {
            Row::Extract(_) => ("extraction", "extractions"),
            Row::Upsert => ("proxy", "proxies"),
            Row::Probe => ("call", "calls"),
        }
    }
}

async fn measure_row(deployment: &mut Deployment, row: Row, hz: f64) -> Measure {
    deployment.reset_stats();
    match row {
        Row::Extract(in_flight) => {
            let taken: Arc<Vec<AtomicU64>> =
                Arc::new((0..deployment.groups).map(|_| AtomicU64::new(0)).collect());
            let pool = Arc::clone(&deployment.pool);
            let counts = Arc::clone(&taken);
            let before = sample(deployment);
            let r = run(EXTRACTIONS, in_flight, move || {
                let (pool, counts) = (Arc::clone(&pool), Arc::clone(&counts));
                async move {
                    let out = pool
                        .extract(now_millis(), request(ProxyFilter::default()))
                        .await
                        .unwrap();
                    assert_eq!(out.response.returned, 1);
                    for proxy in &out.response.proxies {
                        counts[pool.group_index(&proxy.id)].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .await;
            let m = measure(deployment, &before, EXTRACTIONS as f64, 1.0, Some(&r), hz);
            let taken: Vec<u64> = taken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
            for (total, n) in deployment.taken.iter_mut().zip(&taken) {
                *total += n;
            }
            // Every group gets back what it gave, so the next row starts from the same stock.
            deployment.top_up(&taken).await;
            m
        }
        Row::Upsert => {
            let proxies = UPSERT_BATCHES * 1_000;
            let indices: Vec<usize> = (deployment.next..deployment.next + proxies).collect();
            deployment.next += proxies;
            let before = sample(deployment);
            upsert_new(&deployment.pool, &indices).await;
            measure(deployment, &before, proxies as f64, 1_000.0, None, hz)
        }
        Row::Probe => {
            let pool = Arc::clone(&deployment.pool);
            let before = sample(deployment);
            let r = run(PROBES, PROBE_IN_FLIGHT, move || {
                let pool = Arc::clone(&pool);
                async move { pool.probe().await.unwrap() }
            })
            .await;
            measure(deployment, &before, PROBES as f64, 1.0, Some(&r), hz)
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The median over the rounds of every field.
fn median_of(rounds: &[Measure]) -> Measure {
    let of = |f: &dyn Fn(&Measure) -> f64| median(rounds.iter().map(f).collect());
    let each = |f: &dyn Fn(&Measure) -> &Vec<f64>| -> Vec<f64> {
        (0..f(&rounds[0]).len())
            .map(|i| median(rounds.iter().map(|m| f(m)[i]).collect()))
            .collect()
    };
    Measure {
        rate: of(&|m| m.rate),
        p50_ms: of(&|m| m.p50_ms),
        p99_ms: of(&|m| m.p99_ms),
        server_us: of(&|m| m.server_us),
        node_us: each(&|m| &m.node_us),
        bench_us: of(&|m| m.bench_us),
        calls: of(&|m| m.calls),
        node_calls: each(&|m| &m.node_calls),
        node_inside: each(&|m| &m.node_inside),
        node_cores: each(&|m| &m.node_cores),
        bench_cores: of(&|m| m.bench_cores),
        machine_cores: of(&|m| m.machine_cores),
        steal_cores: of(&|m| m.steal_cores),
        server_wait: of(&|m| m.server_wait),
        bench_wait: of(&|m| m.bench_wait),
    }
}

/// What held a measurement back on this machine, from the cores each part kept busy and
/// the time each waited for one.
fn limited_by(m: &Measure, cores: f64) -> String {
    let busiest = m.node_cores.iter().copied().fold(0.0, f64::max);
    if busiest >= 0.85 {
        if m.node_cores.len() > 1 {
            format!("the busiest primary ({busiest:.2} core)")
        } else {
            format!("the redis-server thread ({busiest:.2} core)")
        }
    } else if m.machine_cores + m.steal_cores >= 0.9 * cores {
        format!("both cores busy ({:.2} of {cores})", m.machine_cores)
    } else if m.server_wait + m.bench_wait >= 0.2 {
        format!(
            "CPU contention (waits for a core {:.2} s/s)",
            m.server_wait + m.bench_wait
        )
    } else {
        "round trips (no CPU saturated)".to_owned()
    }
}

fn ratio(x: f64, base: f64) -> String {
    format!("{:.2}", x / base)
}

fn blank_if_nan(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.3}")
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Loads `POOL` proxies into a deployment and marks them healthy.
async fn fill(deployment: &mut Deployment) -> Duration {
    let started = Instant::now();
    let indices: Vec<usize> = (0..POOL).collect();
    deployment.next = POOL;
    upsert_new(&deployment.pool, &indices).await;
    mark_healthy(&deployment.pool, &indices).await;
    started.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let hz = proxypool_testkit::cpu::clock_ticks_per_second() as f64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let server = RedisServer::start_private().expect("redis-server must be installed");
    let cluster =
        RedisCluster::start(GROUPS, 0).expect("redis-server and redis-cli must be installed");
    let version = server.command(&["INFO", "server"]).unwrap();
    let version = version
        .as_text()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
        .unwrap_or_default();

    let single = || {
        vec![Node {
            port: server.port(),
            pid: server.pid().unwrap(),
        }]
    };
    let mut deployments = vec![
        Deployment {
            label: "(a) 1 server, 1 group",
            pool: new_pool(RedisClient::open(server.url()).unwrap(), "one", 1),
            groups: 1,
            nodes: single(),
            node_of_group: vec![0],
            next: 0,
            taken: vec![0],
        },
        Deployment {
            label: "(b) 1 server, 3 groups",
            pool: new_pool(RedisClient::open(server.url()).unwrap(), "three", GROUPS),
            groups: GROUPS,
            nodes: single(),
            node_of_group: vec![0; GROUPS],
            next: 0,
            taken: vec![0; GROUPS],
        },
    ];
    let primaries = cluster.primaries().unwrap();
    let seeds: Vec<String> = primaries.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let cluster_url = format!("redis+cluster://{}", seeds.join(","));
    let pool = new_pool(RedisClient::open(&cluster_url).unwrap(), "cluster", GROUPS);
    let node_of_group = pool
        .group_keyspaces()
        .iter()
        .map(|base| {
            let owner = cluster
                .primary_of_slot(RedisCluster::key_slot(base))
                .unwrap();
            primaries.iter().position(|&p| p == owner).unwrap()
        })
        .collect();
    let nodes = primaries
        .iter()
        .map(|&port| Node {
            port,
            pid: cluster
                .nodes()
                .iter()
                .find(|n| n.port == port)
                .and_then(|n| n.pid)
                .unwrap(),
        })
        .collect();
    deployments.push(Deployment {
        label: "(c) cluster of 3 primaries, 3 groups",
        pool,
        groups: GROUPS,
        nodes,
        node_of_group,
        next: 0,
        taken: vec![0; GROUPS],
    });

    println!(
        "redis-server {version}, private, loopback; client: redis-rs (connection manager; cluster connection for (c)); {cores} cores, clock tick {hz} Hz; load average at the start {}\n",
        loadavg()
    );
    let cluster_dep = &deployments[2];
    for (g, base) in cluster_dep.pool.group_keyspaces().iter().enumerate() {
        let node = &cluster_dep.nodes[cluster_dep.node_of_group[g]];
        println!(
            "(c) group {g} (`{base}`, slot {}): primary :{} (pid {})",
            RedisCluster::key_slot(base),
            node.port,
            node.pid
        );
    }
    println!();

    // 50,000 AVAILABLE proxies each; the records per group must be where `group_index` says.
    for deployment in &mut deployments {
        let took = fill(deployment).await;
        let mut expected = vec![0i64; deployment.groups];
        for i in 0..POOL {
            expected[deployment.pool.group_index(&id_of(i))] += 1;
        }
        let held = deployment.records_per_group();
        assert_eq!(held, expected, "{}: records per group", deployment.label);
        println!(
            "{}: {POOL} proxies loaded and marked healthy in {:.1} s, records per group {held:?}",
            deployment.label,
            took.as_secs_f64()
        );
    }
    println!();

    let rows = [
        Row::Extract(IN_FLIGHT[0]),
        Row::Extract(IN_FLIGHT[1]),
        Row::Extract(IN_FLIGHT[2]),
        Row::Upsert,
        Row::Probe,
    ];
    // results[row][deployment] = one measure per round.
    let mut results: Vec<Vec<Vec<Measure>>> = vec![vec![Vec::new(); deployments.len()]; rows.len()];
    for round in 0..ROUNDS {
        for (r, &row) in rows.iter().enumerate() {
            for k in 0..deployments.len() {
                let d = (round + k) % deployments.len();
                let m = measure_row(&mut deployments[d], row, hz).await;
                results[r][d].push(m);
            }
        }
        eprintln!(
            "round {} of {ROUNDS} done at {:.0} s (load average {})",
            round + 1,
            started.elapsed().as_secs_f64(),
            loadavg()
        );
    }
    let medians: Vec<Vec<Measure>> = results
        .iter()
        .map(|per_dep| per_dep.iter().map(|m| median_of(m)).collect())
        .collect();

    println!(
        "Medians of {ROUNDS} rounds. CPU per operation: every redis-server process of the deployment (server) and this process (bench: the pool's client side and the loop). Cores busy: over the measurement's wall time; \"others\" is the rest of the machine, \"stolen\" what the hypervisor ran elsewhere (/proc/stat).\n"
    );
    println!(
        "| operation | deployment | ops/s (rounds' range) | p50 ms | p99 ms | FCALLs per op (Redis commands inside them) | server CPU µs/op | bench CPU µs/op | cores busy: redis / bench / others / stolen | waiting for a core, s/s: redis / bench | limited by |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (r, &row) in rows.iter().enumerate() {
        for (d, deployment) in deployments.iter().enumerate() {
            let m = &medians[r][d];
            let inside: f64 = m.node_inside.iter().sum();
            let rates = results[r][d].iter().map(|m| m.rate);
            let range = format!(
                "({:.0}-{:.0})",
                rates.clone().fold(f64::INFINITY, f64::min),
                rates.fold(0.0, f64::max)
            );
            let (rate, calls) = match row {
                Row::Upsert => (
                    format!("{:.0} proxies/s {range}", m.rate),
                    format!("{:.1} per batch ({inside:.0} inside)", m.calls),
                ),
                _ => (
                    format!("{:.0} {range}", m.rate),
                    format!("{:.2} ({inside:.1} inside)", m.calls),
                ),
            };
            let others = (m.machine_cores - m.server_cores() - m.bench_cores).max(0.0);
            println!(
                "| {} | {} | {rate} | {} | {} | {calls} | {:.1} | {:.1} | {:.2} / {:.2} / {others:.2} / {:.2} | {:.2} / {:.2} | {} |",
                row.label(),
                deployment.label,
                blank_if_nan(m.p50_ms),
                blank_if_nan(m.p99_ms),
                m.server_us,
                m.bench_us,
                m.server_cores(),
                m.bench_cores,
                m.steal_cores,
                m.server_wait,
                m.bench_wait,
                limited_by(m, cores)
            );
        }
    }
    println!(
        "\n(upsert row: ops/s and CPU per proxy, FCALLs and commands per 1,000-proxy batch)\n"
    );

    println!(
        "| operation | ops/s (b)/(a) | ops/s (c)/(a) | server CPU/op (b)/(a) | server CPU/op (c)/(a) | bench CPU/op (b)/(a) | bench CPU/op (c)/(a) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (r, &row) in rows.iter().enumerate() {
        let [a, b, c] = [&medians[r][0], &medians[r][1], &medians[r][2]];
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.label(),
            ratio(b.rate, a.rate),
            ratio(c.rate, a.rate),
            ratio(b.server_us, a.server_us),
            ratio(c.server_us, a.server_us),
            ratio(b.bench_us, a.bench_us),
            ratio(c.bench_us, a.bench_us)
        );
    }

    // The cluster's work per primary.
    let c = &deployments[2];
    println!("\n(c) per primary (medians):\n");
    println!(
        "| operation | primary | groups | FCALLs per op | commands inside them per op | CPU µs/op | cores busy |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (r, &row) in rows.iter().enumerate() {
        let m = &medians[r][2];
        for (n, node) in c.nodes.iter().enumerate() {
            let groups: Vec<String> = (0..c.groups)
                .filter(|&g| c.node_of_group[g] == n)
                .map(|g| {
                    if g == 0 {
                        "0 (home)".to_owned()
                    } else {
                        g.to_string()
                    }
                })
                .collect();
            let (calls, inside) = if row == Row::Upsert {
                (
                    format!("{:.1} per batch", m.node_calls[n]),
                    format!("{:.0} per batch", m.node_inside[n]),
                )
            } else {
                (
                    format!("{:.2}", m.node_calls[n]),
                    format!("{:.1}", m.node_inside[n]),
                )
            };
            println!(
                "| {} | :{} | {} | {calls} | {inside} | {:.1} | {:.2} |",
                row.label(),
                node.port,
                groups.join(", "),
                m.node_us[n],
                m.node_cores[n]
            );
        }
    }
    println!();
    for deployment in &deployments[1..] {
        let total: u64 = deployment.taken.iter().sum();
        let shares: Vec<String> = deployment
            .taken
            .iter()
            .enumerate()
            .map(|(g, &n)| format!("group {g} {:.1}%", 100.0 * n as f64 / total as f64))
            .collect();
        println!(
            "{}: the {total} extracted proxies came from {}",
            deployment.label,
            shares.join(", ")
        );
    }

    // What a core per redis-server would carry, from the server CPU per operation.
    println!("\nWith a core per primary (server CPU only; the clients need cores of their own):\n");
    for (r, &row) in rows.iter().enumerate() {
        let a = &medians[r][0];
        let cm = &medians[r][2];
        let (busiest, slowest) =
            cm.node_us.iter().enumerate().fold(
                (0, 0.0),
                |best, (n, &us)| if us > best.1 { (n, us) } else { best },
            );
        let per_primary: Vec<String> = c
            .nodes
            .iter()
            .zip(&cm.node_us)
            .map(|(node, us)| format!(":{} {us:.1} µs", node.port))
            .collect();
        let (unit, units) = row.unit();
        println!(
            "- {}: (a) one primary carries {:.0} {units}/s ({:.1} µs per {unit}). (c) per {unit}: {}; bounded by :{} at {:.0} {units}/s ({:.2}x (a)). Bench CPU per {unit}: (a) {:.1} µs, (c) {:.1} µs.",
            row.label(),
            1e6 / a.server_us,
            a.server_us,
            per_primary.join(", "),
            c.nodes[busiest].port,
            1e6 / slowest,
            a.server_us / slowest,
            a.bench_us,
            cm.bench_us
        );
    }
    println!(
        "\nload average at the end {}; total {:.0} s",
        loadavg(),
        started.elapsed().as_secs_f64()
    );
}
