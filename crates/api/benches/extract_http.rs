//! Extraction requests per second over HTTP next to the HTTP ceiling of the same server.
//!
//! One server (MemoryPool, memory quota, the per-IP shield, metrics: the whole admission
//! chain) on 127.0.0.1; `CONNECTIONS` kept-alive client connections send requests back to
//! back. Each round refills the pool (one proxy per extraction), moves the quota's clock to
//! a new window (so the quota admits and keeps deciding, as in production, without ever
//! denying), then measures
//! - `POST /v1/extractions` `{"count": 1}` (auth, body parsing, authorization, quota, the
//!   atomic extraction, the JSON answer with credentials), and
//! - `GET /v1/me` (auth and a tiny JSON answer): the trivial authenticated GET, the ceiling,
//!
//! alternating, and prints the medians and their ratio (target: at least 0.5).
//!
//! Run: `cargo bench -p proxypool-api --bench extract_http`. The client runs in the same
//! process and shares the 2 cores; absolute numbers on a shared machine are noise, the
//! ratio is the result.

use proxypool_api::{
    ApiClient, ApiPorts, ApiState, ShieldSettings, UpstreamStatus, UpstreamStatusSource,
};
use proxypool_core::{
    Candidate, CheckOutcome, ClientId, Credentials, FetchedBatch, HealthBatch, HealthObservation,
    PoolResult, Protocol, SecretHash, UpstreamId, now_millis, proxy_id_for,
};
use proxypool_pool::MemoryPool;
use proxypool_quota::{ManualClock, MemoryQuota, OperationLimits, QuotaConfig};
use proxypool_throttle::Policy;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 16;
/// Per connection per round: within one quota window of the limit below.
const REQUESTS_PER_CONNECTION: usize = 500;
/// Rounds alternate which kind goes first, so drift in the machine's load hits both alike;
/// the ratio is taken per round (both measured within the same second or two).
const ROUNDS: usize = 10;

#[derive(Debug)]
struct NoUpstreams;

#[async_trait::async_trait]
impl UpstreamStatusSource for NoUpstreams {
    async fn upstreams(&self) -> PoolResult<Vec<UpstreamStatus>> {
        Ok(Vec::new())
    }
}

fn token(i: usize) -> String {
    format!("bench-token-{i:04}-abcdefghijklmnopqrstuvwxyz")
}

async fn refill(pool: &MemoryPool, first: usize, n: usize) {
    let now = now_millis();
    let candidates: Vec<Candidate> = (first..first + n)
        .map(|i| {
            let mut c = Candidate::new(Protocol::Http, format!("h{i}.bench.test"), 20_000);
            c.credentials = Some(Credentials::new(format!("u{i}"), format!("p{i}")));
            c
        })
        .collect();
    let ids: Vec<_> = candidates
        .iter()
        .map(|c| {
            proxy_id_for(
                c.protocol,
                &c.host,
                c.port,
                Some(&c.credentials.as_ref().unwrap().username),
            )
        })
        .collect();
    use proxypool_core::{HealthStore, Upserter};
    pool.upsert(
        now,
        FetchedBatch {
            upstream: UpstreamId::new("bench").unwrap(),
            operation_id: None,
            ttl_ms: 3_600_000,
            safety_margin_ms: 5_000,
            max_size: 10_000_000,
            default_max_sessions: 4,
            candidates,
        },
    )
    .await
    .unwrap();
    pool.apply_health(
        now,
        HealthBatch {
            observations: ids
                .into_iter()
                .map(|proxy_id| HealthObservation {
                    proxy_id,
                    checked_at_ms: now,
                    outcome: CheckOutcome::Success { latency_ms: 10 },
                })
                .collect(),
            unhealthy_after_failures: 3,
        },
    )
    .await
    .unwrap();
}

/// CPU time this process has used (user + system); `None` where `/proc` cannot tell.
fn process_cpu() -> Option<Duration> {
    proxypool_testkit::cpu::cpu_time("self")
}

/// What one phase measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    per_second: f64,
    /// CPU of the whole process (server and client) per request.
    cpu_us_per_request: Option<f64>,
}

/// Runs `CONNECTIONS` × `REQUESTS_PER_CONNECTION` requests.
async fn phase(http: &reqwest::Client, base: &str, extract: bool) -> Measured {
    let cpu_before = process_cpu();
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let http = http.clone();
            let base = base.to_owned();
            tokio::spawn(async move {
                let token = token(i);
                for _ in 0..REQUESTS_PER_CONNECTION {
                    let request = if extract {
                        http.post(format!("{base}/v1/extractions"))
                            .header("content-type", "application/json")
                            .body(r#"{"count":1}"#)
                    } else {
                        http.get(format!("{base}/v1/me"))
                    };
                    let response = request.bearer_auth(&token).send().await.unwrap();
                    assert_eq!(response.status(), 200);
                    let body = response.bytes().await.unwrap();
                    // Every extraction must really hand out a proxy with its credentials.
                    assert!(!extract || body.windows(12).any(|w| w == b"\"password\":\""));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let requests = (CONNECTIONS * REQUESTS_PER_CONNECTION) as f64;
    let elapsed = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    Measured {
        per_second: requests / elapsed.as_secs_f64(),
        cpu_us_per_request: cpu.map(|cpu| cpu.as_secs_f64() * 1e6 / requests),
    }
}

fn micros(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1} us"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = Arc::new(MemoryPool::default());
        let clock = Arc::new(ManualClock::new(now_millis()));
        let limits = OperationLimits::new(Duration::from_secs(60), 1000).unwrap();
        let quota = Arc::new(MemoryQuota::with_clock(clock.clone()));
        let clients: Vec<ApiClient> = (0..CONNECTIONS)
            .map(|i| ApiClient {
                id: ClientId::new(format!("bench{i}")).unwrap(),
                project: "bench".into(),
                token_hash: SecretHash::derive(&token(i), "benchsalt").unwrap(),
                admin: false,
                shared_feedback: false,
                allowed_upstreams: vec![],
                allowed_regions: vec![],
                quota: QuotaConfig::uniform(limits),
                ip_allowlist: proxypool_config::Cidrs::default(),
                rate_limit: None,
            })
            .collect();
        let state = ApiState::builder(
            ApiPorts::from_pool(pool.clone(), quota, Arc::new(NoUpstreams)),
            clients,
        )
        .shield_settings(ShieldSettings {
            // The shield runs on every request but must not deny the benchmark's one address.
            policy: Policy::new(1_000_000.0, 1_000_000.0),
            ..ShieldSettings::default()
        })
        .metrics(proxypool_metrics::install().unwrap())
        .build()
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // Its CONNECTIONS all come from one address, well under the per-IP cap.
        let limits = proxypool_api::ApiLimits::default();
        tokio::spawn(proxypool_api::serve(
            listener,
            proxypool_api::router(state),
            &limits,
            std::future::pending(),
        ));
        // reqwest is built with rustls and no provider of its own (see the API's tests).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(CONNECTIONS)
            .build()
            .unwrap();

        // Warm-up: connections, allocator, first-use paths.
        refill(&pool, 0, CONNECTIONS * REQUESTS_PER_CONNECTION).await;
        phase(&http, &base, true).await;
        phase(&http, &base, false).await;

        let per_round = CONNECTIONS * REQUESTS_PER_CONNECTION;
        let (mut extract, mut get, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut extract_cpu, mut get_cpu) = (Vec::new(), Vec::new());
        for round in 1..=ROUNDS {
            refill(&pool, round * per_round, per_round).await;
            clock.advance(60_000);
            let (e, g) = if round % 2 == 1 {
                let e = phase(&http, &base, true).await;
                (e, phase(&http, &base, false).await)
            } else {
                let g = phase(&http, &base, false).await;
                (phase(&http, &base, true).await, g)
            };
            println!(
                "round {round:>2}: extraction {:>8.0} req/s   GET /v1/me {:>8.0} req/s   ratio {:.2}   \
                 cpu/request {} vs {}",
                e.per_second,
                g.per_second,
                e.per_second / g.per_second,
                micros(e.cpu_us_per_request),
                micros(g.cpu_us_per_request),
            );
            extract.push(e.per_second);
            get.push(g.per_second);
            ratios.push(e.per_second / g.per_second);
            extract_cpu.extend(e.cpu_us_per_request);
            get_cpu.extend(g.cpu_us_per_request);
        }
        let (extract, get, ratio) = (median(&mut extract), median(&mut get), median(&mut ratios));
        println!(
            "extraction over HTTP (keep-alive, {CONNECTIONS} connections, memory pool + memory quota, \
             median of {ROUNDS} rounds of {per_round}): {extract:.0} req/s"
        );
        println!("trivial authenticated GET /v1/me on the same server (median): {get:.0} req/s");
        println!("ratio extraction / GET (median of per-round ratios): {ratio:.2} (target >= 0.5)");
        if !extract_cpu.is_empty() && !get_cpu.is_empty() {
            let (e, g) = (median(&mut extract_cpu), median(&mut get_cpu));
            println!(
                "process CPU per request (server + client, median): extraction {e:.1} us, GET {g:.1} us; \
                 CPU-bound ratio {:.2} (what the req/s ratio tends to on an idle machine)",
                g / e
            );
        }
    });
}
