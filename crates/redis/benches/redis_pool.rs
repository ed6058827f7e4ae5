//! RedisPool against a private redis-server, side by side with the ceiling of the same
//! client (a trivial `EVALSHA` returning 1), printing a Markdown table:
//!
//! - extraction p50/p99 and ops/s with 10,000 and 100,000 AVAILABLE proxies (one proxy
//!   per extraction, no filter and with a region filter; 1 and 8 calls in flight);
//! - upserts/s of 1,000-proxy batches (new proxies, and refreshes of known ones);
//! - Redis commands per extraction (`INFO commandstats`);
//! - Redis memory per stored proxy (INFO memory before/after loading 100,000 and
//!   1,000,000), FETCHED and after they turned AVAILABLE.
//!
//! Run: `cargo bench -p proxypool-redis --bench redis_pool` (release; about two minutes).

mod common;

use common::{REGIONS, batch, command_stats, load, make_available, ms, request, run};
use proxypool_core::ports::*;
use proxypool_core::{Label, ProxyFilter, UpstreamId, now_millis};
use proxypool_redis::{RedisClient, RedisPool, RedisPoolOptions};
use proxypool_testkit::{RedisServer, RespValue};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SEQUENTIAL_OPS: usize = 2_000;
const CONCURRENT_OPS: usize = 4_000;
/// Every row starts from the same pool size: what the previous row extracted is replaced.
const TOP_UP: usize = CONCURRENT_OPS;
const IN_FLIGHT: usize = 8;

fn used_memory(server: &RedisServer) -> i64 {
    let info = server.command(&["INFO", "memory"]).unwrap();
    let text = info.as_text().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Server-side microseconds per call since the last `CONFIG RESETSTAT`, over `FCALL` (port
/// calls) and `EVALSHA` (the trivial probe) together: the call's own cost, independent of
/// the client's scheduling on a busy machine.
fn server_usec_per_call(server: &RedisServer) -> f64 {
    let info = server.command(&["INFO", "commandstats"]).unwrap();
    let (calls, usec) = command_stats(&info.as_text().unwrap())
        .into_iter()
        .filter(|(name, _, _)| name == "evalsha" || name == "fcall")
        .fold((0.0, 0.0), |(c, u), (_, n, us)| (c + n, u + us));
    if calls == 0.0 { 0.0 } else { usec / calls }
}

/// CPU seconds redis-server's main thread has used (user + system, `INFO cpu`): unlike
/// the commandstats time this excludes the time the thread waited for a core, which on
/// this shared machine is most of the noise; it includes reading and answering the calls.
fn server_cpu_seconds(server: &RedisServer) -> f64 {
    let info = server.command(&["INFO", "cpu"]).unwrap();
    info.as_text()
        .unwrap()
        .lines()
        .filter_map(|line| {
            line.strip_prefix("used_cpu_user_main_thread:")
                .or_else(|| line.strip_prefix("used_cpu_sys_main_thread:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}

/// Redis commands per call since the last `CONFIG RESETSTAT`, from `INFO commandstats`
/// (commands a function runs are counted under their own names), over `calls` calls:
/// (command, calls per call, server µs per call).
fn commands_per_call(server: &RedisServer, calls: usize) -> Vec<(String, f64, f64)> {
    let info = server.command(&["INFO", "commandstats"]).unwrap();
    let mut out: Vec<(String, f64, f64)> = command_stats(&info.as_text().unwrap())
        .into_iter()
        .filter(|(name, _, _)| !name.starts_with("config") && name != "info")
        .map(|(name, n, usec)| (name, n / calls as f64, usec / calls as f64))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Bytes per proxy by key family (`MEMORY USAGE ... SAMPLES 0` of every key under `base`,
/// dynamic suffixes such as `region:us` folded into `region:*`), largest first.
fn memory_by_key(server: &RedisServer, base: &str, proxies: i64) -> Vec<(String, i64)> {
    let mut conn = server.connect().unwrap();
    let mut cursor = "0".to_owned();
    let mut families: Vec<(String, i64)> = Vec::new();
    let pattern = format!("{base}*");
    loop {
        let reply = conn
            .command(&["SCAN", cursor.as_str(), "MATCH", &pattern, "COUNT", "1000"])
            .unwrap();
        let RespValue::Array(parts) = reply else {
            panic!("SCAN answered {reply:?}")
        };
        cursor = parts[0].as_text().unwrap();
        if let RespValue::Array(batch) = &parts[1] {
            for key in batch.iter().filter_map(RespValue::as_text) {
                let bytes = match conn
                    .command(&["MEMORY", "USAGE", &key, "SAMPLES", "0"])
                    .unwrap()
                {
                    RespValue::Integer(n) => n,
                    _ => 0,
                };
                let name = &key[base.len()..];
                let family = match name.split_once(':') {
                    Some((head, _)) => format!("{head}:*"),
                    None => name.to_owned(),
                };
                match families.iter_mut().find(|(f, _)| *f == family) {
                    Some((_, total)) => *total += bytes,
                    None => families.push((family, bytes)),
                }
            }
        }
        if cursor == "0" {
            break;
        }
    }
    families.sort_by_key(|f| std::cmp::Reverse(f.1));
    families
        .into_iter()
        .map(|(f, b)| (f, b / proxies))
        .filter(|(_, b)| *b > 0)
        .collect()
}

fn new_pool(server: &RedisServer, prefix: &str) -> Arc<RedisPool> {
    let options = RedisPoolOptions {
        key_prefix: prefix.to_owned(),
        // Generous: the 1M rows queue 10,000-proxy health batches from four loaders behind
        // each other, which on this busy shared machine can take longer than 5 s.
        call_timeout: Duration::from_secs(60),
        inventory_scan_budget: 1_000_000,
        ..RedisPoolOptions::default()
    };
    Arc::new(RedisPool::new(RedisClient::open(server.url()).unwrap(), options).unwrap())
}

/// The trivial script's rate right now, with `in_flight` calls at a time: measured next to
/// each extraction row so both see the same machine (this one is shared and busy).
async fn trivial_rate(pool: &Arc<RedisPool>, ops: usize, in_flight: usize) -> f64 {
    let p = Arc::clone(pool);
    run(ops, in_flight, move || {
        let p = Arc::clone(&p);
        async move { p.probe().await.unwrap() }
    })
    .await
    .ops_per_sec
}

/// Extraction rows on a pool of `size` AVAILABLE proxies (`next` = first unused index).
async fn extract_rows(
    server: &RedisServer,
    pool: &Arc<RedisPool>,
    size: usize,
    next: &mut usize,
    label: &str,
) {
    for filtered in [false, true] {
        for (in_flight, ops) in [(1, SEQUENTIAL_OPS), (IN_FLIGHT, CONCURRENT_OPS)] {
            let before = trivial_rate(pool, ops, in_flight).await;
            server.command(&["CONFIG", "RESETSTAT"]).unwrap();
            let cpu_before = server_cpu_seconds(server);
            let p = Arc::clone(pool);
            let turn = Arc::new(AtomicU64::new(0));
            let r = run(ops, in_flight, move || {
                let p = Arc::clone(&p);
                // The region filter rotates over the regions, so no region runs dry.
                let filter = if filtered {
                    let n = turn.fetch_add(1, Ordering::Relaxed) as usize;
                    ProxyFilter {
                        region: Some(Label::new(REGIONS[n % REGIONS.len()]).unwrap()),
                        ..ProxyFilter::default()
                    }
                } else {
                    ProxyFilter::default()
                };
                async move {
                    let out = p.extract(now_millis(), request(filter)).await.unwrap();
                    assert_eq!(out.response.returned, 1);
                }
            })
            .await;
            let name = if filtered {
                "region filter"
            } else {
                "no filter"
            };
            let server_usec = server_usec_per_call(server);
            let cpu_usec = (server_cpu_seconds(server) - cpu_before) * 1e6 / ops as f64;
            // Against the better of the ceilings measured just before and just after.
            let ceiling = before.max(trivial_rate(pool, ops, in_flight).await);
            println!(
                "| extract 1 ({name}), {label} | {in_flight} | {} | {} | {:.0} | {:.0}% of {:.0} | {server_usec:.1} | {cpu_usec:.1} |",
                ms(r.p50),
                ms(r.p99),
                r.ops_per_sec,
                100.0 * r.ops_per_sec / ceiling,
                ceiling
            );
            // Put back as many fresh proxies as were handed out.
            load(pool, *next, TOP_UP).await;
            make_available(pool, *next, TOP_UP).await;
            *next += TOP_UP;
            let left = pool
                .inventory(now_millis(), &UpstreamId::new("acme").unwrap())
                .await
                .unwrap();
            assert!(left.unextracted as usize >= size, "{left:?}");
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RedisServer::start_private().expect("redis-server must be installed");
    let version = server.command(&["INFO", "server"]).unwrap();
    let version = version
        .as_text()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
        .unwrap_or_default();
    println!("redis-server {version}, private, loopback; client: redis-rs (ConnectionManager)\n");
    println!(
        "| operation | in flight | p50 ms | p99 ms | ops/s | vs trivial EVALSHA (ops/s) | server µs/call | server CPU µs/call |"
    );
    println!("|---|---|---|---|---|---|---|---|");

    // The ceiling: the same pool's connection running `return 1`.
    let ceiling = new_pool(&server, "probe");
    ceiling.probe().await.unwrap();
    let mut trivial = [0.0; 2];
    for (slot, (in_flight, ops)) in [(1, SEQUENTIAL_OPS * 2), (IN_FLIGHT, CONCURRENT_OPS * 2)]
        .into_iter()
        .enumerate()
    {
        server.command(&["CONFIG", "RESETSTAT"]).unwrap();
        let cpu_before = server_cpu_seconds(&server);
        let p = Arc::clone(&ceiling);
        let r = run(ops, in_flight, move || {
            let p = Arc::clone(&p);
            async move { p.probe().await.unwrap() }
        })
        .await;
        trivial[slot] = r.ops_per_sec;
        let cpu_usec = (server_cpu_seconds(&server) - cpu_before) * 1e6 / ops as f64;
        println!(
            "| trivial EVALSHA (`return 1`) | {in_flight} | {} | {} | {:.0} | 100% | {:.1} | {cpu_usec:.1} |",
            ms(r.p50),
            ms(r.p99),
            r.ops_per_sec,
            server_usec_per_call(&server)
        );
    }

    // 10,000 AVAILABLE proxies.
    let small = new_pool(&server, "small");
    load(&small, 0, 10_000).await;
    make_available(&small, 0, 10_000).await;
    let mut next = 10_000;
    extract_rows(&server, &small, 10_000, &mut next, "10k AVAILABLE").await;
    server.command(&["FLUSHALL"]).unwrap();

    // 100,000 proxies: memory per proxy, upsert rate, then extraction.
    let before = used_memory(&server);
    let big = new_pool(&server, "big");
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    let cpu_before = server_cpu_seconds(&server);
    let batches_per_sec = load(&big, 0, 100_000).await;
    let insert_usec = server_usec_per_call(&server);
    let insert_cpu = (server_cpu_seconds(&server) - cpu_before) * 1e6 / 100.0;
    let fetched = used_memory(&server);
    make_available(&big, 0, 100_000).await;
    let available = used_memory(&server);
    let by_key = memory_by_key(&server, &big.keyspace(), 100_000);
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    let cpu_before = server_cpu_seconds(&server);
    let started = Instant::now();
    for first in (0..20_000).step_by(1_000) {
        let report = big
            .upsert(now_millis(), batch(first..first + 1_000))
            .await
            .unwrap();
        assert_eq!(report.refreshed, 1_000);
    }
    let refresh_per_sec = 20.0 / started.elapsed().as_secs_f64();
    let refresh_usec = server_usec_per_call(&server);
    let refresh_cpu = (server_cpu_seconds(&server) - cpu_before) * 1e6 / 20.0;
    println!(
        "| upsert 1,000 new proxies (to 100k) | 1 | | | {batches_per_sec:.1} batches = {:.0} proxies/s | | {insert_usec:.0} | {insert_cpu:.0} |",
        batches_per_sec * 1_000.0
    );
    println!(
        "| upsert 1,000 known AVAILABLE proxies (refresh) | 1 | | | {refresh_per_sec:.1} batches = {:.0} proxies/s | | {refresh_usec:.0} | {refresh_cpu:.0} |",
        refresh_per_sec * 1_000.0
    );
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    let started = Instant::now();
    let view = big
        .inventory(now_millis(), &UpstreamId::new("acme").unwrap())
        .await
        .unwrap();
    assert_eq!(view.available_slots, 4 * 100_000);
    println!(
        "| inventory of one upstream with 100k AVAILABLE | 1 | {} | | | | {:.0} |",
        ms(started.elapsed()),
        server_usec_per_call(&server)
    );
    let mut next = 100_000;
    extract_rows(&server, &big, 100_000, &mut next, "100k AVAILABLE").await;

    // Redis commands per extraction (one proxy, region filter, 100k AVAILABLE).
    const COUNTED: usize = 200;
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    for n in 0..COUNTED {
        let filter = ProxyFilter {
            region: Some(Label::new(REGIONS[n % REGIONS.len()]).unwrap()),
            ..ProxyFilter::default()
        };
        let out = big.extract(now_millis(), request(filter)).await.unwrap();
        assert_eq!(out.response.returned, 1);
    }
    let counts = commands_per_call(&server, COUNTED);
    let inner = counts
        .iter()
        .filter(|(name, _, _)| name != "fcall" && name != "evalsha");
    let total: f64 = inner.clone().map(|(_, n, _)| n).sum();
    let inner_usec: f64 = inner.map(|(_, _, usec)| usec).sum();
    let listed: Vec<String> = counts
        .iter()
        .map(|(name, n, usec)| format!("{name} {n:.2} ({usec:.1} µs)"))
        .collect();
    println!();
    println!(
        "Redis commands per extraction (region filter, 100k AVAILABLE, INFO commandstats over {COUNTED}): {total:.1} inside the call, {inner_usec:.1} µs of the call's time in them; {}",
        listed.join(", ")
    );

    println!();
    println!("| Redis memory per proxy | bytes |");
    println!("|---|---|");
    println!(
        "| FETCHED (record, expiry, checks), 100k | {} |",
        (fetched - before) / 100_000
    );
    println!(
        "| AVAILABLE (+ the indexes of unowned candidates), 100k | {} |",
        (available - before) / 100_000
    );
    let listed: Vec<String> = by_key.iter().map(|(f, b)| format!("{f} {b}")).collect();
    println!(
        "| of which, by key (MEMORY USAGE, AVAILABLE, 100k) | {} |",
        listed.join(", ")
    );

    // 1,000,000 proxies: memory only (a few concurrent loaders, so it takes seconds).
    drop(big);
    server.command(&["FLUSHALL"]).unwrap();
    const MILLION: usize = 1_000_000;
    const LOADERS: usize = 4;
    let before = used_memory(&server);
    let huge = new_pool(&server, "huge");
    let started = Instant::now();
    let mut loaders = Vec::new();
    for l in 0..LOADERS {
        let pool = Arc::clone(&huge);
        loaders.push(tokio::spawn(async move {
            let share = MILLION / LOADERS;
            load(&pool, l * share, share).await;
        }));
    }
    for loader in loaders {
        loader.await.unwrap();
    }
    let fetched = used_memory(&server);
    let mut checkers = Vec::new();
    for l in 0..LOADERS {
        let pool = Arc::clone(&huge);
        checkers.push(tokio::spawn(async move {
            let share = MILLION / LOADERS;
            make_available(&pool, l * share, share).await;
        }));
    }
    for checker in checkers {
        checker.await.unwrap();
    }
    let available = used_memory(&server);
    println!("| FETCHED, 1M | {} |", (fetched - before) / MILLION as i64);
    println!(
        "| AVAILABLE, 1M (loaded and checked in {:.0} s) | {} |",
        started.elapsed().as_secs_f64(),
        (available - before) / MILLION as i64
    );
}
