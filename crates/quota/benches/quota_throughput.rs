//! Quota decisions per second next to their physical ceiling, in one run.
//!
//! For PostgreSQL (a private server started by the testkit) and SQLite (a scratch file),
//! 16 concurrent callers make decisions on
//! - 10,000 distinct buckets (every decision inserts a new row), and
//! - one hot bucket (limit 1000 per 300 s: 1,000 admissions with a growing receipt array,
//!   then denials, each a locked no-op upsert plus the follow-up read),
//!
//! and the same callers run a bare single-row counter `INSERT … ON CONFLICT DO UPDATE …
//! RETURNING` on the same keys through an identically configured pool: the ceiling. Quota
//! and bare alternate every 1,000 decisions (so both see the same background load), each
//! workload runs five rounds, and the medians are reported with their ratio.
//!
//! Run: `cargo bench -p proxypool-quota --bench quota_throughput` (under a minute after the
//! release build). Absolute numbers on a shared 2-core machine are noise; the ratio is the
//! result.

#[path = "../tests/it/support/scratch.rs"]
mod scratch;

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proxypool_quota::postgres::migrate;
use proxypool_quota::{
    Operation, OperationLimits, PostgresQuota, PostgresSettings, QuotaCommand, QuotaDecision,
    QuotaPort, SqliteQuota, SqliteSettings,
};
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

const CALLERS: usize = 16;
const DISTINCT: usize = 10_000;
const HOT: usize = 10_000;
const WARMUP: usize = 500;
const ROUNDS: usize = 5;

/// Admitted / exceeded / unavailable counts of one quota round.
#[derive(Debug, Default)]
struct Tally {
    admitted: AtomicUsize,
    exceeded: AtomicUsize,
    unavailable: AtomicUsize,
}

impl Tally {
    fn count(&self, decision: &QuotaDecision) {
        let slot = match decision {
            QuotaDecision::Admitted { .. } => &self.admitted,
            QuotaDecision::Exceeded { .. } => &self.exceeded,
            QuotaDecision::Unavailable { .. } => &self.unavailable,
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }

    fn summary(&self) -> String {
        format!(
            "{} admitted, {} exceeded, {} unavailable",
            self.admitted.load(Ordering::Relaxed),
            self.exceeded.load(Ordering::Relaxed),
            self.unavailable.load(Ordering::Relaxed)
        )
    }
}

/// Runs `operation(index)` for every index in `indexes` with [`CALLERS`] concurrent tasks;
/// returns how long that took.
async fn drive<F, Fut>(indexes: Range<usize>, operation: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let operation = Arc::new(operation);
    let (next, end) = (Arc::new(AtomicUsize::new(indexes.start)), indexes.end);
    let started = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (operation, next) = (operation.clone(), next.clone());
        callers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= end {
                    break;
                }
                operation(index).await;
            }
        });
    }
    while let Some(joined) = callers.join_next().await {
        joined.expect("caller task");
    }
    started.elapsed()
}

/// Runs the quota over the commands of `indexes`, counting the outcomes.
async fn drive_quota<Q>(
    quota: &Q,
    indexes: Range<usize>,
    command: fn(usize, usize) -> QuotaCommand,
    round: usize,
    tally: &Arc<Tally>,
) -> Duration
where
    Q: QuotaPort + Clone + 'static,
{
    let (quota, tally) = (quota.clone(), tally.clone());
    drive(indexes, move |index| {
        let (quota, tally) = (quota.clone(), tally.clone());
        async move {
            let decision = quota
                .consume(&command(round, index), bench_limits())
                .await
                .expect("valid command");
            tally.count(&decision);
        }
    })
    .await
}

fn distinct_command(round: usize, index: usize) -> QuotaCommand {
    QuotaCommand::new(
        "bench",
        format!("distinct-{round}-{index}"),
        Operation::Extract,
        "receipt-1",
    )
}

fn hot_command(round: usize, index: usize) -> QuotaCommand {
    QuotaCommand::new(
        "bench",
        format!("hot-{round}"),
        Operation::Extract,
        format!("receipt-{index}"),
    )
}

fn warmup_command(round: usize, index: usize) -> QuotaCommand {
    QuotaCommand::new(
        "bench",
        format!("warmup-{round}"),
        Operation::Admin,
        format!("w-{index}"),
    )
}

/// A bare counter upsert, the ceiling of any one-statement decision.
#[derive(Clone)]
enum Bare {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

impl Bare {
    async fn create_table(&self) {
        match self {
            Bare::Postgres(pool) => {
                sqlx::query("CREATE TABLE bench_counter (k text PRIMARY KEY, n bigint NOT NULL)")
                    .execute(pool)
                    .await
                    .expect("create counter table");
            }
            Bare::Sqlite(pool) => {
                sqlx::query(
                    "CREATE TABLE bench_counter (k TEXT PRIMARY KEY, n INTEGER NOT NULL) STRICT, WITHOUT ROWID",
                )
                .execute(pool)
                .await
                .expect("create counter table");
            }
        }
    }

    async fn bump(&self, key: String) {
        let count: i64 = match self {
            Bare::Postgres(pool) => sqlx::query_scalar(
                "INSERT INTO bench_counter AS c (k, n) VALUES ($1, 1) \
                 ON CONFLICT (k) DO UPDATE SET n = c.n + 1 RETURNING n",
            )
            .bind(key)
            .fetch_one(pool)
            .await
            .expect("bare upsert"),
            Bare::Sqlite(pool) => sqlx::query_scalar(
                "INSERT INTO bench_counter AS c (k, n) VALUES (?1, 1) \
                 ON CONFLICT (k) DO UPDATE SET n = c.n + 1 RETURNING n",
            )
            .bind(key)
            .fetch_one(pool)
            .await
            .expect("bare upsert"),
        };
        assert!(count >= 1);
    }
}

async fn drive_bare(
    bare: &Bare,
    indexes: Range<usize>,
    key: fn(usize, usize) -> String,
    round: usize,
) -> Duration {
    let bare = bare.clone();
    drive(indexes, move |index| {
        let bare = bare.clone();
        async move { bare.bump(key(round, index)).await }
    })
    .await
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A workload: how many decisions, the quota command and the bare key of decision `index`
/// in round `round` (same buckets for both).
struct Workload {
    name: &'static str,
    total: usize,
    command: fn(usize, usize) -> QuotaCommand,
    key: fn(usize, usize) -> String,
}

/// One row of the result table.
struct Row {
    store: &'static str,
    workload: &'static str,
    quota: f64,
    bare: f64,
    outcomes: String,
}

/// Decisions per chunk: quota and bare alternate every chunk, so both see the same load
/// from whatever else the machine runs, and a round's rate is its total over the sum of
/// its chunk times.
const CHUNK: usize = 1_000;

async fn compare<Q>(store: &'static str, quota: Q, bare: Bare) -> Vec<Row>
where
    Q: QuotaPort + Clone + 'static,
{
    // Warm both pools: connections open, statements prepared.
    drive_quota(&quota, 0..WARMUP, warmup_command, 0, &Arc::default()).await;
    drive_bare(&bare, 0..WARMUP, |_, index| format!("warmup-{index}"), 0).await;

    let workloads = [
        Workload {
            name: "10,000 distinct buckets",
            total: DISTINCT,
            command: distinct_command,
            key: |round, index| format!("distinct-{round}-{index}"),
        },
        Workload {
            name: "1 hot bucket (limit 1000)",
            total: HOT,
            command: hot_command,
            key: |round, _| format!("hot-{round}"),
        },
    ];
    let mut rows = Vec::new();
    for workload in workloads {
        let (mut quota_rates, mut bare_rates) = (Vec::new(), Vec::new());
        let mut outcomes = String::new();
        for round in 1..=ROUNDS {
            let tally = Arc::new(Tally::default());
            let (mut quota_time, mut bare_time) = (Duration::ZERO, Duration::ZERO);
            for start in (0..workload.total).step_by(CHUNK) {
                let chunk = start..(start + CHUNK).min(workload.total);
                quota_time +=
                    drive_quota(&quota, chunk.clone(), workload.command, round, &tally).await;
                bare_time += drive_bare(&bare, chunk, workload.key, round).await;
            }
            quota_rates.push(workload.total as f64 / quota_time.as_secs_f64());
            bare_rates.push(workload.total as f64 / bare_time.as_secs_f64());
            outcomes = tally.summary();
        }
        let row = Row {
            store,
            workload: workload.name,
            quota: median(quota_rates),
            bare: median(bare_rates),
            outcomes,
        };
        eprintln!(
            "{store} / {}: quota {:.0}/s, bare {:.0}/s ({})",
            row.workload, row.quota, row.bare, row.outcomes
        );
        rows.push(row);
    }
    rows
}

/// Every call passes these (what a client's limits lookup would hand over).
fn bench_limits() -> OperationLimits {
    OperationLimits::new(OperationLimits::MAX_WINDOW, OperationLimits::MAX_LIMIT).expect("valid")
}

async fn postgres_rows() -> Vec<Row> {
    let Some(server) = proxypool_testkit::private_postgres_or_skip() else {
        return Vec::new();
    };
    let url = server
        .create_database("quota_bench")
        .expect("create database");
    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("connect");
    migrate(&admin).await.expect("migrate");
    let settings = PostgresSettings {
        max_connections: CALLERS as u32,
        ..PostgresSettings::new(url.clone())
    };
    let quota = PostgresQuota::connect_lazy(&settings).expect("quota");
    // The same pool shape as the quota's: no per-acquire ping, same size.
    let bare_pool = PgPoolOptions::new()
        .max_connections(CALLERS as u32)
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy(&url)
        .expect("bare pool");
    let bare = Bare::Postgres(bare_pool);
    bare.create_table().await;
    let rows = compare("PostgreSQL", quota, bare).await;
    drop(server);
    rows
}

async fn sqlite_rows() -> Vec<Row> {
    let dir = scratch::ScratchDir::new("bench");
    let path = dir.path().join("quota.db");
    let quota = SqliteQuota::open(&SqliteSettings::new(&path))
        .await
        .expect("open");
    // The same connection settings as the quota's (one connection, WAL, synchronous=NORMAL).
    let bare_pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(
            SqliteConnectOptions::new()
                .filename(&path)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(2)),
        );
    let bare = Bare::Sqlite(bare_pool);
    bare.create_table().await;
    compare("SQLite", quota, bare).await
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // `QUOTA_BENCH_STORES=sqlite` (or `postgres`) runs one store only, for quick iterations.
    let stores = std::env::var("QUOTA_BENCH_STORES").unwrap_or_else(|_| "postgres,sqlite".into());
    let started = Instant::now();
    let mut rows = Vec::new();
    if stores.contains("postgres") {
        rows.extend(runtime.block_on(postgres_rows()));
    }
    if stores.contains("sqlite") {
        rows.extend(runtime.block_on(sqlite_rows()));
    }
    println!();
    println!(
        "| store | workload (16 callers) | quota decisions/s | bare upsert/s | ratio | quota outcomes (last round) |"
    );
    println!("|---|---|---:|---:|---:|---|");
    for row in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2} | {} |",
            row.store,
            row.workload,
            row.quota,
            row.bare,
            row.quota / row.bare,
            row.outcomes
        );
    }
    println!("\n(total {:.0} s)", started.elapsed().as_secs_f64());
}
