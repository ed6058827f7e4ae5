//! What the Redis benches share: the proxies they load (credentials, a region, a carrier on
//! every other one), loading them and marking them healthy through the pool's own ports,
//! extraction requests with distinct request ids, the runner that keeps a number of calls
//! in flight, and the parsing of `INFO commandstats`.

#![allow(dead_code, unreachable_pub)]

use proxypool_core::ports::*;
use proxypool_core::{
    Candidate, CheckOutcome, ClientId, Credentials, ExtractMode, ExtractRequest, FetchedBatch,
    HealthBatch, HealthObservation, Protocol, ProxyFilter, ProxyId, UpstreamId, now_millis,
    proxy_id_for,
};
use proxypool_redis::RedisPool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const REGIONS: [&str; 10] = ["us", "de", "fr", "gb", "br", "in", "jp", "ca", "au", "nl"];
pub const CARRIERS: [&str; 4] = ["att", "vodafone", "orange", "tmobile"];

/// Proxy `i`: credentials, a region, a carrier on every other one (a residential/mobile mix).
pub fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(
        Protocol::Http,
        format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255),
        8000 + (i % 1000) as u16,
    );
    c.credentials = Some(Credentials::new(format!("user{i}"), format!("pw{i:08}")));
    c.region = Some(REGIONS[i % REGIONS.len()].into());
    if i.is_multiple_of(2) {
        c.carrier = Some(CARRIERS[i % CARRIERS.len()].into());
    }
    c
}

pub fn id_of(i: usize) -> ProxyId {
    let c = candidate(i);
    proxy_id_for(c.protocol, &c.host, c.port, Some(&format!("user{i}")))
}

/// A vendor batch of the proxies `indices` (upstream `acme`, living an hour).
pub fn batch_of(indices: impl IntoIterator<Item = usize>) -> FetchedBatch {
    FetchedBatch {
        upstream: UpstreamId::new("acme").unwrap(),
        operation_id: None,
        ttl_ms: 3_600_000,
        safety_margin_ms: 5_000,
        max_size: 1_000_000,
        default_max_sessions: 4,
        candidates: indices.into_iter().map(candidate).collect(),
    }
}

pub fn batch(range: std::ops::Range<usize>) -> FetchedBatch {
    batch_of(range)
}

/// Upserts the new proxies `indices` in 1,000-proxy batches.
pub async fn upsert_new(pool: &RedisPool, indices: &[usize]) {
    for chunk in indices.chunks(1_000) {
        let report = pool
            .upsert(now_millis(), batch_of(chunk.iter().copied()))
            .await
            .unwrap();
        assert_eq!(report.inserted as usize, chunk.len());
    }
}

/// Loads proxies `from..from + n` in 1,000-proxy batches; returns batches per second.
pub async fn load(pool: &RedisPool, from: usize, n: usize) -> f64 {
    let started = Instant::now();
    for first in (from..from + n).step_by(1_000) {
        let report = pool
            .upsert(now_millis(), batch(first..first + 1_000))
            .await
            .unwrap();
        assert_eq!(report.inserted, 1_000);
    }
    (n / 1_000) as f64 / started.elapsed().as_secs_f64()
}

/// One successful check for each of the proxies `indices` (10,000 per health batch):
/// FETCHED proxies turn AVAILABLE.
pub async fn mark_healthy(pool: &RedisPool, indices: &[usize]) {
    for chunk in indices.chunks(10_000) {
        let now = now_millis();
        let observations = chunk
            .iter()
            .map(|&i| HealthObservation {
                proxy_id: id_of(i),
                checked_at_ms: now,
                outcome: CheckOutcome::Success { latency_ms: 20 },
            })
            .collect();
        let report = pool
            .apply_health(
                now,
                HealthBatch {
                    observations,
                    unhealthy_after_failures: 3,
                },
            )
            .await
            .unwrap();
        assert_eq!(report.ignored, 0);
    }
}

pub async fn make_available(pool: &RedisPool, from: usize, n: usize) {
    let indices: Vec<usize> = (from..from + n).collect();
    mark_healthy(pool, &indices).await;
}

/// One partial extraction by client `bench` with a request id no other request of this
/// process used (no idempotency key: the response is still stored under the request id).
pub fn request(filter: ProxyFilter) -> ExtractRequest {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    ExtractRequest {
        project: None,
        for_domain: None,
        client: ClientId::new("bench").unwrap(),
        idempotency_key: None,
        request_id: format!("bench-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        count: 1,
        mode: ExtractMode::Partial,
        filter,
        min_health_freshness_ms: None,
        reserve_for_gateway: 0,
        idempotency_ttl_ms: 60_000,
        key_held_ms: 0,
    }
}

/// Latencies and throughput of `ops` calls with a number in flight.
pub struct Run {
    pub p50: Duration,
    pub p99: Duration,
    pub ops_per_sec: f64,
    pub elapsed: Duration,
}

/// Runs `ops` calls with `in_flight` tasks each making its share one after another.
pub async fn run<F, Fut>(ops: usize, in_flight: usize, call: F) -> Run
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(ops / in_flight);
            for _ in 0..ops / in_flight {
                let t = Instant::now();
                call().await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(ops);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Run {
        p50: at(0.50),
        p99: at(0.99),
        ops_per_sec: latencies.len() as f64 / elapsed.as_secs_f64(),
        elapsed,
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1_000.0)
}

/// `INFO commandstats` as (command, calls, server µs) per command (commands a function or
/// script runs are counted under their own names).
pub fn command_stats(info: &str) -> Vec<(String, f64, f64)> {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| -> Option<f64> {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key))?
                    .parse()
                    .ok()
            };
            Some((name.to_owned(), field("calls=")?, field("usec=")?))
        })
        .collect()
}
