//! Side-by-side benchmark: proxypool-throttle against governor's keyed limiter, same quota,
//! identical key streams, in one run. Prints ns/decision for both and the ratio, then the
//! resident memory per tracked key at 1,000,000 keys (each measured in a fresh child process
//! so one limiter's freed pages cannot flatter the other).
//!
//! Run: `cargo bench -p proxypool-throttle --bench vs_governor`
//!
//! Both limiters run with their default clock (ours: `CoarseClock`, a ticker-published
//! reading plus `Instant` for denials; governor: quanta's TSC clock), take `IpAddr` keys and
//! run their full check. Ours additionally tracks soft violations and lockouts, counts
//! outcomes and enforces `max_tracked`. Extra columns: ours with a cached per-connection key
//! (no address normalization or hashing), and ours reading `Instant` on every check.

use governor::{Quota, RateLimiter};
use proxypool_throttle::{
    BucketKey, Clock, EngineOptions, MonotonicClock, Policy, PolicyLimiter, TokenBucketEngine,
};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::process::Command;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The shared quota: 100 requests per second, bursts of 50.
const RATE_PER_SEC: u32 = 100;
const BURST: u32 = 50;
/// Decisions per thread per measured run.
const DECISIONS_PER_THREAD: usize = 2_000_000;
/// Each cell is the median of this many runs (limiters alternate to share any drift).
const REPETITIONS: usize = 5;
const MEMORY_KEYS: u32 = 1_000_000;

type Governor = governor::DefaultKeyedRateLimiter<IpAddr>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|a| a == "--memory-child") {
        memory_child(&args[position + 1]);
        return;
    }
    let started = Instant::now();
    println!("proxypool-throttle vs governor {}", governor_version());
    println!(
        "quota: {RATE_PER_SEC}/s, burst {BURST}; {DECISIONS_PER_THREAD} decisions per thread per run, \
         median of {REPETITIONS} runs; ns/decision = wall time / all decisions of all threads; \
         governor/ours = median of the per-run ratios (>1: ours is faster)\n"
    );
    println!(
        "| keys | threads | governor ns/decision | ours ns/decision | governor/ours | ours, cached key | ours, precise clock | allowed governor | allowed ours |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    // THROTTLE_BENCH_KEYS=1 (or 10000, 1000000) runs one row group only, for profiling.
    let only: Option<u32> = std::env::var("THROTTLE_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok());
    for (label, distinct) in [
        ("1 hot key", 1u32),
        ("10,000 keys", 10_000),
        ("1,000,000 keys", 1_000_000),
    ] {
        if only.is_some_and(|keys| keys != distinct) {
            continue;
        }
        // THROTTLE_BENCH_DECISIONS shortens runs for profilers that slow the code down.
        let decisions = std::env::var("THROTTLE_BENCH_DECISIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DECISIONS_PER_THREAD);
        let stream = key_stream(distinct, decisions);
        for threads in [1usize, 2] {
            run_row(label, distinct, &stream, threads);
        }
    }
    println!();
    if only.is_none() {
        memory_table();
    }
    println!(
        "\ntotal benchmark time: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn governor_version() -> &'static str {
    "0.10 (DefaultKeyedRateLimiter: DashMap + quanta clock)"
}

/// `length` client addresses drawn pseudo-randomly (fixed seed) from `distinct` addresses.
fn key_stream(distinct: u32, length: usize) -> Vec<IpAddr> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..length)
        .map(|_| {
            // xorshift64*: cheap, deterministic, good enough to defeat prefetching.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let draw = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
            address(((draw >> 32) % u64::from(distinct)) as u32)
        })
        .collect()
}

fn address(index: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + index))
}

fn governor_limiter() -> Governor {
    let quota = Quota::per_second(NonZeroU32::new(RATE_PER_SEC).unwrap())
        .allow_burst(NonZeroU32::new(BURST).unwrap());
    RateLimiter::keyed(quota)
}

fn our_options() -> EngineOptions {
    EngineOptions {
        max_tracked: 2_000_000,
        ..Default::default()
    }
}

fn our_policy() -> Policy {
    Policy::new(f64::from(RATE_PER_SEC), f64::from(BURST))
}

fn our_limiter() -> PolicyLimiter {
    PolicyLimiter::builder(our_options(), our_policy())
        .build()
        .expect("valid benchmark policy")
}

fn our_precise_limiter() -> PolicyLimiter<MonotonicClock> {
    PolicyLimiter::builder(our_options(), our_policy())
        .build_with_clock(MonotonicClock::new())
        .expect("valid benchmark policy")
}

fn populate<C: Clock>(limiter: &PolicyLimiter<C>, distinct: u32) {
    for index in 0..distinct {
        limiter.check_global(address(index));
    }
}

struct Measurement {
    ns_per_decision: f64,
    allowed: u64,
}

/// Runs `check` over the stream on `threads` threads (each starting at its own offset of
/// the same stream) and returns wall-clock ns per decision and admissions.
fn measure<T: Sync>(
    stream: &[T],
    threads: usize,
    check: impl Fn(&T) -> bool + Sync,
) -> Measurement {
    let barrier = Barrier::new(threads);
    // Each worker times itself from the common start to its own end; the wall time is the
    // earliest start to the latest end. (Timing from the spawning thread undercounts when
    // the workers keep it off the CPU, e.g. under a real-time scheduling policy.)
    let runs: Vec<(Instant, Instant, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, check) = (&barrier, &check);
                scope.spawn(move || {
                    let offset = thread * stream.len() / threads;
                    barrier.wait();
                    let start = Instant::now();
                    let mut allowed = 0u64;
                    for index in 0..stream.len() {
                        let item = &stream[(offset + index) % stream.len()];
                        allowed += u64::from(check(black_box(item)));
                    }
                    (start, Instant::now(), allowed)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let start = runs
        .iter()
        .map(|run| run.0)
        .min()
        .expect("at least one thread");
    let end = runs
        .iter()
        .map(|run| run.1)
        .max()
        .expect("at least one thread");
    let decisions = (stream.len() * threads) as f64;
    Measurement {
        ns_per_decision: (end - start).as_nanos() as f64 / decisions,
        allowed: runs.iter().map(|run| run.2).sum(),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn run_row(label: &str, distinct: u32, stream: &[IpAddr], threads: usize) {
    // THROTTLE_BENCH_LIMITER=governor|ours|cached|precise measures one column, for profiling.
    let only = std::env::var("THROTTLE_BENCH_LIMITER").ok();
    let wanted = |column: &str| only.as_deref().is_none_or(|only| only == column);
    let (mut governor_ns, mut ours_ns, mut cached_ns, mut precise_ns) = (
        vec![f64::NAN],
        vec![f64::NAN],
        vec![f64::NAN],
        vec![f64::NAN],
    );
    let (mut governor_allowed, mut ours_allowed) = (0, 0);
    // Per-repetition ratios: governor and ours run back to back, so a slow moment on a shared
    // machine slows both and cancels out of the ratio.
    let mut ratios = Vec::new();
    for repetition in 0..REPETITIONS {
        if repetition == 0 {
            (governor_ns, ours_ns, cached_ns, precise_ns) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        }
        // Fresh limiters per run, pre-populated with every key (untimed) so the timed part
        // is steady-state checking, not first-insert cost.
        if wanted("governor") {
            let governor = governor_limiter();
            for index in 0..distinct {
                let _ = governor.check_key(&address(index));
            }
            let g = measure(stream, threads, |ip| governor.check_key(ip).is_ok());
            governor_ns.push(g.ns_per_decision);
            governor_allowed = g.allowed;
        }
        if wanted("ours") {
            let ours = our_limiter();
            populate(&ours, distinct);
            let o = measure(stream, threads, |ip| ours.check_global(*ip).allowed);
            assert_eq!(ours.engine().tracked_keys(), distinct as usize);
            ours_ns.push(o.ns_per_decision);
            ours_allowed = o.allowed;
            if let Some(governor) = governor_ns.last() {
                ratios.push(governor / o.ns_per_decision);
            }
        }
        if wanted("cached") {
            let ours = our_limiter();
            populate(&ours, distinct);
            let keys: Vec<BucketKey> = stream.iter().map(|ip| ours.key(None, *ip)).collect();
            let c = measure(&keys, threads, |key| ours.check_key(key).allowed);
            cached_ns.push(c.ns_per_decision);
        }
        if wanted("precise") {
            let precise = our_precise_limiter();
            populate(&precise, distinct);
            let p = measure(stream, threads, |ip| precise.check_global(*ip).allowed);
            precise_ns.push(p.ns_per_decision);
        }
    }
    let median_or_nan = |values: Vec<f64>| {
        if values.is_empty() {
            f64::NAN
        } else {
            median(values)
        }
    };
    let (g, o) = (median_or_nan(governor_ns), median_or_nan(ours_ns));
    println!(
        "| {label} | {threads} | {g:.1} | {o:.1} | {:.2}x | {:.1} | {:.1} | {governor_allowed} | {ours_allowed} |",
        median_or_nan(ratios),
        median_or_nan(cached_ns),
        median_or_nan(precise_ns),
    );
}

fn memory_table() {
    println!(
        "per-key entry: ours {} bytes, one cache line (client 16 + scope 4 + hash 8 + bucket state {} + padding), \
         governor {} bytes (IpAddr {} + state {})",
        TokenBucketEngine::<MonotonicClock>::entry_bytes(),
        TokenBucketEngine::<MonotonicClock>::state_bytes(),
        size_of::<(IpAddr, governor::state::InMemoryState)>(),
        size_of::<IpAddr>(),
        size_of::<governor::state::InMemoryState>(),
    );
    println!("\n| limiter | tracked keys | resident memory | bytes per key |");
    println!("|---|---|---|---|");
    for which in ["governor", "ours"] {
        let exe = std::env::current_exe().expect("own path");
        let output = Command::new(exe)
            .args(["--memory-child", which])
            .output()
            .expect("spawn memory child");
        let text = String::from_utf8_lossy(&output.stdout);
        print!("{text}");
        if !output.status.success() {
            println!(
                "| {which} | memory child failed: {} |",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// Child process: RSS growth from an empty limiter to one tracking `MEMORY_KEYS` keys.
fn memory_child(which: &str) {
    let keys: Vec<IpAddr> = (0..MEMORY_KEYS).map(address).collect();
    let (before, after, tracked, extra) = match which {
        "governor" => {
            let limiter = governor_limiter();
            let before = resident_bytes();
            for ip in &keys {
                let _ = limiter.check_key(ip);
            }
            (before, resident_bytes(), limiter.len(), String::new())
        }
        _ => {
            let limiter = our_limiter();
            let before = resident_bytes();
            for ip in &keys {
                limiter.check_global(*ip);
            }
            let allocated = limiter.engine().allocated_bytes();
            (
                before,
                resident_bytes(),
                limiter.engine().tracked_keys(),
                format!(" (maps allocated {:.1} MiB)", allocated as f64 / 1048576.0),
            )
        }
    };
    let grown = after.saturating_sub(before);
    println!(
        "| {which} | {tracked} | {:.1} MiB{extra} | {:.1} |",
        grown as f64 / 1048576.0,
        grown as f64 / tracked as f64
    );
    // Keep the limiter alive until measured (it was); give the OS a clean exit.
    std::thread::sleep(Duration::from_millis(1));
}

/// Resident set size from /proc/self/statm (Linux), in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096
}
