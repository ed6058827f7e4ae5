//! Test harness: a real server on 127.0.0.1:0 over a MemoryPool (or, in the Redis tests,
//! a RedisPool) and a real quota (memory, SQLite or PostgreSQL), plus reqwest helpers.
//!
//! Nothing here mocks a store. The upstream status source is the API's own trait, which
//! the controller implements in production; tests implement it here.
#![allow(unreachable_pub)]

use async_trait::async_trait;
use proxypool_api::{
    ApiClient, ApiLimits, ApiPorts, ApiState, ExtractionSettings, FetchHealth, OwnershipWake,
    ShieldSettings, UpstreamStatus, UpstreamStatusSource,
};
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, ClientId, Credentials, ExtractOutcome, ExtractRequest,
    ExtractResponse, ExtractionId, Extractor, FetchedBatch, HealthBatch, HealthObservation, Label,
    PoolResult, Protocol, ProxyId, SecretHash, UnixMillis, UpstreamId, now_millis, proxy_id_for,
};
use proxypool_pool::MemoryPool;
use proxypool_quota::{
    MemoryQuota, Operation, OperationLimits, QuotaConfig, QuotaPort, SqliteQuota, SqliteSettings,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

pub use proxypool_testkit::eventually_async;

pub const ALICE: &str = "token-alice-0123456789";
pub const BOB: &str = "token-bob-0123456789";
pub const ADMIN: &str = "token-admin-0123456789";
/// Restricted to upstream `acme` and region `us`.
pub const NARROW: &str = "token-narrow-0123456789";
/// Restricted to upstreams `acme` and `globex`.
pub const TWO: &str = "token-two-0123456789";

pub fn client(id: &str, project: &str, token: &str) -> ApiClient {
    ApiClient {
        id: ClientId::new(id).unwrap(),
        project: project.into(),
        token_hash: SecretHash::derive(token, "testsalt").unwrap(),
        admin: false,
        shared_feedback: false,
        allowed_upstreams: vec![],
        allowed_regions: vec![],
        quota: QuotaConfig::default(),
        ip_allowlist: proxypool_config::Cidrs::default(),
        rate_limit: None,
    }
}

pub fn standard_clients() -> Vec<ApiClient> {
    let mut admin = client("ops", "platform", ADMIN);
    admin.admin = true;
    let mut narrow = client("narrow", "p-narrow", NARROW);
    narrow.allowed_upstreams = vec![upstream("acme")];
    narrow.allowed_regions = vec![Label::new("us").unwrap()];
    let mut two = client("two", "p-two", TWO);
    two.allowed_upstreams = vec![upstream("acme"), upstream("globex")];
    vec![
        client("alice", "p-alice", ALICE),
        client("bob", "p-bob", BOB),
        admin,
        narrow,
        two,
    ]
}

/// `n` extra clients `c0..cN` with tokens `token-cI-...` in project `p-many`.
pub fn many_clients(n: usize) -> Vec<ApiClient> {
    (0..n)
        .map(|i| client(&format!("c{i}"), "p-many", &many_token(i)))
        .collect()
}

pub fn many_token(i: usize) -> String {
    format!("token-c{i}-0123456789")
}

pub fn upstream(name: &str) -> UpstreamId {
    UpstreamId::new(name).unwrap()
}

/// The controller's view in tests: a fixed list, optionally slow.
#[derive(Debug, Default)]
pub struct StaticUpstreams {
    pub list: Vec<UpstreamStatus>,
    pub delay: Option<Duration>,
    pub calls: AtomicUsize,
}

#[async_trait]
impl UpstreamStatusSource for StaticUpstreams {
    async fn upstreams(&self) -> PoolResult<Vec<UpstreamStatus>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(delay) = self.delay {
            // The stimulus: a controller that is slow to answer.
            tokio::time::sleep(delay).await;
        }
        Ok(self.list.clone())
    }
}

pub fn status(name: &str) -> UpstreamStatus {
    UpstreamStatus {
        id: upstream(name),
        provider: "static".into(),
        health: FetchHealth::Ok,
        fetch_interval_ms: 10_000,
        proxy_ttl_ms: 600_000,
        max_size: 10_000,
        last_fetch_at_ms: Some(now_millis()),
        last_success_at_ms: Some(now_millis()),
        consecutive_failures: 0,
        last_error: None,
        last_fetched: Some(10),
        last_dropped: Default::default(),
        last_ignored: Default::default(),
        last_refused: 0,
    }
}

pub fn standard_upstreams() -> StaticUpstreams {
    StaticUpstreams {
        list: vec![status("acme"), status("globex"), status("initech")],
        ..StaticUpstreams::default()
    }
}

/// Which quota backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKind {
    Memory,
    Sqlite,
}

/// A quota backend with a way to read its counters.
#[derive(Debug, Clone)]
pub enum Quota {
    Memory(Arc<MemoryQuota>),
    Sqlite(
        Arc<SqliteQuota>,
        #[expect(
            dead_code,
            reason = "held only so the database's directory outlives it"
        )]
        Arc<TempDir>,
    ),
    /// The quota (as its least-privilege role) and a superuser pool to read buckets.
    Postgres(Arc<proxypool_quota::PostgresQuota>, sqlx::PgPool),
}

impl Quota {
    /// A fresh backend; the limits are the clients' (see [`Setup::with_quota`]).
    pub async fn new(kind: QuotaKind) -> Quota {
        match kind {
            QuotaKind::Memory => Quota::Memory(Arc::new(MemoryQuota::new())),
            QuotaKind::Sqlite => {
                let dir = Arc::new(TempDir::new("quota"));
                let quota = SqliteQuota::open(&SqliteSettings::new(dir.0.join("quota.db")))
                    .await
                    .unwrap();
                Quota::Sqlite(Arc::new(quota), dir)
            }
        }
    }

    pub fn port(&self) -> Arc<dyn QuotaPort> {
        match self {
            Quota::Memory(quota) => quota.clone(),
            Quota::Sqlite(quota, _) => quota.clone(),
            Quota::Postgres(quota, _) => quota.clone(),
        }
    }

    /// Admissions charged in the current bucket of (project, client, operation); 0 when
    /// there is no bucket.
    pub async fn consumed(&self, project: &str, subject: &str, operation: Operation) -> u32 {
        match self {
            Quota::Memory(quota) => quota
                .bucket(project, subject, operation)
                .map_or(0, |bucket| bucket.consumed_count),
            Quota::Sqlite(quota, _) => {
                let row: Option<(i64,)> = sqlx::query_as(
                    "SELECT consumed_count FROM quota_buckets \
                     WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3",
                )
                .bind(project)
                .bind(subject)
                .bind(operation.as_str())
                .fetch_optional(quota.pool())
                .await
                .unwrap();
                row.map_or(0, |(count,)| count as u32)
            }
            Quota::Postgres(_, admin) => {
                let row: Option<(i32,)> = sqlx::query_as(
                    "SELECT consumed_count FROM proxypool_quota.quota_buckets \
                     WHERE project_id = $1 AND subject_id = $2 AND operation = $3",
                )
                .bind(project)
                .bind(subject)
                .bind(operation.as_str())
                .fetch_optional(admin)
                .await
                .unwrap();
                row.map_or(0, |(count,)| count as u32)
            }
        }
    }

    /// How many buckets exist at all (a request that must not touch the quota must not
    /// create one either).
    pub async fn buckets(&self) -> u64 {
        match self {
            Quota::Memory(quota) => quota.len() as u64,
            Quota::Sqlite(quota, _) => {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM quota_buckets WHERE project_id <> 'proxypool-readiness'",
                )
                .fetch_one(quota.pool())
                .await
                .unwrap();
                n as u64
            }
            Quota::Postgres(_, admin) => {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM proxypool_quota.quota_buckets \
                     WHERE project_id <> 'proxypool-readiness'",
                )
                .fetch_one(admin)
                .await
                .unwrap();
                n as u64
            }
        }
    }
}

/// A scratch directory removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "proxypool-api-{tag}-{}-{}-{}",
            std::process::id(),
            now_millis(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The default limits, with the per-address cap on requests in flight as high as the
/// global cap: every test client connects from 127.0.0.1, so a test that sends many
/// requests at once would otherwise meet that cap rather than what it tests.
pub fn one_address_limits() -> ApiLimits {
    let limits = ApiLimits::default();
    ApiLimits {
        max_requests_in_flight_per_ip: limits.max_concurrent_requests,
        ..limits
    }
}

/// Quota limits: the same window and limit for every operation.
/// The quota window of these tests: the longest there is. Windows are fixed and aligned to
/// the clock, so a test counting charges over its requests fails when a new window starts
/// while it runs; the longer the window, the rarer that is (see [`in_one_quota_window`]).
pub const QUOTA_WINDOW: Duration = OperationLimits::MAX_WINDOW;

pub fn quota_config(limit: u32) -> QuotaConfig {
    QuotaConfig::uniform(OperationLimits::new(QUOTA_WINDOW, limit).unwrap())
}

/// Returns once at least `needed` is left of the current quota window, waiting for the next
/// window to start if need be: a long test that counts charges runs in one window.
pub async fn in_one_quota_window(needed: Duration) {
    let window = QUOTA_WINDOW.as_millis() as u64;
    let left = window - now_millis() % window;
    if left < needed.as_millis() as u64 {
        // Until the clock reaches the next window's start (and a little past it).
        tokio::time::sleep(Duration::from_millis(left + 100)).await;
    }
}

/// What a test server is built from.
pub struct Setup {
    pub clients: Vec<ApiClient>,
    pub limits: ApiLimits,
    pub extraction: ExtractionSettings,
    pub shield: ShieldSettings,
    pub upstreams: Arc<StaticUpstreams>,
    pub metrics: bool,
    /// `GET /metrics` then needs this bearer token.
    pub metrics_token: Option<&'static str>,
    pub ownership_wake: Option<Arc<dyn OwnershipWake>>,
    /// Load balancers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<(std::net::IpAddr, u8)>,
    /// Serves extractions instead of the pool itself (e.g. [`CountingExtractor`] around it).
    pub extractor: Option<Arc<dyn Extractor>>,
    /// The API's clock (default: the wall clock).
    pub clock: Option<fn() -> UnixMillis>,
    /// Serves the quota instead of the test quota's own port (e.g. a counting wrapper).
    pub quota_port: Option<Arc<dyn QuotaPort>>,
    /// The listen address (default `127.0.0.1:0`).
    pub listen: Option<&'static str>,
    /// Each client's feedback bucket (default: `[cooldowns]`'s defaults).
    pub feedback_rate: Option<proxypool_api::FeedbackRate>,
}

impl Setup {
    /// Every client with the quota `config`.
    pub fn with_quota(mut self, config: QuotaConfig) -> Setup {
        for client in &mut self.clients {
            client.quota = config;
        }
        self
    }
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            clients: standard_clients(),
            limits: ApiLimits::default(),
            extraction: ExtractionSettings::default(),
            shield: ShieldSettings::default(),
            upstreams: Arc::new(standard_upstreams()),
            metrics: true,
            metrics_token: None,
            ownership_wake: None,
            trusted_proxies: Vec::new(),
            extractor: None,
            clock: None,
            quota_port: None,
            listen: None,
            feedback_rate: None,
        }
    }
}

/// An [`Extractor`] that forwards to a real store, counts the calls that reached it, and
/// can hold them at a gate (to keep extractions in flight).
#[derive(Debug)]
pub struct CountingExtractor {
    inner: Arc<dyn Extractor>,
    pub extract_calls: AtomicUsize,
    gate: Option<tokio::sync::Semaphore>,
}

impl CountingExtractor {
    pub fn new(inner: Arc<dyn Extractor>) -> Arc<CountingExtractor> {
        Arc::new(CountingExtractor {
            inner,
            extract_calls: AtomicUsize::new(0),
            gate: None,
        })
    }

    /// Extractions wait until [`CountingExtractor::open`] lets them through.
    pub fn gated(inner: Arc<dyn Extractor>) -> Arc<CountingExtractor> {
        Arc::new(CountingExtractor {
            inner,
            extract_calls: AtomicUsize::new(0),
            gate: Some(tokio::sync::Semaphore::new(0)),
        })
    }

    pub fn open(&self, calls: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(calls);
        }
    }

    pub fn calls(&self) -> usize {
        self.extract_calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Extractor for CountingExtractor {
    async fn extract(
        &self,
        now: UnixMillis,
        request: ExtractRequest,
    ) -> PoolResult<ExtractOutcome> {
        self.extract_calls.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        self.inner.extract(now, request).await
    }

    async fn get_extraction(
        &self,
        now: UnixMillis,
        client: &ClientId,
        id: &ExtractionId,
    ) -> PoolResult<ExtractResponse> {
        self.inner.get_extraction(now, client, id).await
    }
}

/// How many times [`TestServer::extract_retrying`] sends a request at most.
pub const EXTRACT_TRIES: usize = 5;

/// A running server.
pub struct TestServer {
    pub base: String,
    pub addr: std::net::SocketAddr,
    pub pool: Arc<dyn ActivityPool>,
    pub memory: Option<Arc<MemoryPool>>,
    pub quota: Quota,
    pub upstreams: Arc<StaticUpstreams>,
    pub http: reqwest::Client,
    /// The server's state (to reload its clients as a configuration reload would).
    pub state: ApiState,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

impl TestServer {
    /// A server over a fresh MemoryPool and the given quota.
    pub async fn start(setup: Setup, quota: Quota) -> TestServer {
        let memory = Arc::new(MemoryPool::default());
        let mut server = TestServer::start_on(setup, memory.clone(), quota).await;
        server.memory = Some(memory);
        server
    }

    /// A server over any activity pool.
    pub async fn start_on<P: ActivityPool>(setup: Setup, pool: Arc<P>, quota: Quota) -> TestServer {
        let quota_port = setup.quota_port.clone().unwrap_or_else(|| quota.port());
        let mut ports = ApiPorts::from_pool(pool.clone(), quota_port, setup.upstreams.clone());
        if let Some(extractor) = setup.extractor {
            ports.extractor = extractor;
        }
        let mut builder = ApiState::builder(ports, setup.clients)
            .limits(setup.limits.clone())
            .extraction(setup.extraction)
            .shield_settings(setup.shield);
        if setup.metrics {
            builder = builder.metrics(proxypool_metrics::install().unwrap());
        }
        if let Some(token) = setup.metrics_token {
            builder = builder.metrics_token(Some(
                proxypool_core::SecretHash::derive(token, "metricssalt").unwrap(),
            ));
        }
        builder = builder.trusted_proxies(setup.trusted_proxies);
        if let Some(wake) = setup.ownership_wake {
            builder = builder.ownership_wake(wake);
        }
        if let Some(clock) = setup.clock {
            builder = builder.clock(clock);
        }
        if let Some(rate) = setup.feedback_rate {
            builder = builder.feedback_rate(rate);
        }
        let state = builder.build().unwrap();
        let router = proxypool_api::router(state.clone());
        let listen = setup.listen.unwrap_or("127.0.0.1:0");
        let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stopped) = oneshot::channel::<()>();
        let limits = setup.limits.clone();
        tokio::spawn(async move {
            proxypool_api::serve(listener, router, &limits, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        TestServer {
            base: format!("http://{addr}"),
            addr,
            pool,
            memory: None,
            quota,
            upstreams: setup.upstreams,
            http: http_client(),
            state,
            shutdown: Some(shutdown),
        }
    }

    pub async fn memory(setup: Setup) -> TestServer {
        TestServer::start(
            setup.with_quota(quota_config(1000)),
            Quota::new(QuotaKind::Memory).await,
        )
        .await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        let mut request = self.http.get(self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        Reply::from(request.send().await.unwrap()).await
    }

    /// `POST /v1/extractions` with a JSON body and an optional idempotency key.
    pub async fn extract(&self, token: &str, key: Option<&str>, body: &Value) -> Reply {
        self.post_json("/v1/extractions", token, key, body).await
    }

    /// [`TestServer::extract`] as a real client makes it: a 503 with `Retry-After` (the
    /// server busy, or its store too slow for a loaded machine) is sent again with the same
    /// key after the time it names, at most [`EXTRACT_TRIES`] times in all.
    pub async fn extract_retrying(&self, token: &str, key: Option<&str>, body: &Value) -> Reply {
        for _ in 1..EXTRACT_TRIES {
            let reply = self.extract(token, key, body).await;
            let Some(retry_after) = reply.header("retry-after").filter(|_| reply.status == 503)
            else {
                return reply;
            };
            let seconds: u64 = retry_after.parse().unwrap();
            // The client's back-off, as the server asked: not a wait for anything here.
            tokio::time::sleep(Duration::from_secs(seconds)).await;
        }
        self.extract(token, key, body).await
    }

    /// `POST path` with a JSON body, the client's bearer token and an optional
    /// idempotency key.
    pub async fn post_json(
        &self,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: &Value,
    ) -> Reply {
        let mut request = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        Reply::from(request.send().await.unwrap()).await
    }

    /// Seeds `n` healthy proxies `first..first+n` into `upstream` (region `us` for even
    /// numbers, `de` for odd ones); returns their ids.
    pub async fn seed(&self, upstream_name: &str, first: usize, n: usize) -> Vec<ProxyId> {
        seed(self.pool.as_ref(), upstream_name, first, n).await
    }

    /// Un-extracted proxies of `upstream`, as the store counts them.
    pub async fn unextracted(&self, upstream_name: &str) -> u64 {
        self.pool
            .inventory(now_millis(), &upstream(upstream_name))
            .await
            .unwrap()
            .unextracted
    }
}

pub fn candidate(i: usize) -> Candidate {
    let mut c = Candidate::new(
        Protocol::Http,
        format!("p{i}.vendor.test"),
        10_000 + (i % 50_000) as u16,
    );
    c.credentials = Some(Credentials::new(
        format!("user{i}"),
        format!("pw-secret-{i}"),
    ));
    c.region = Some(if i.is_multiple_of(2) { "us" } else { "de" }.into());
    c
}

pub async fn seed<P: ActivityPool + ?Sized>(
    pool: &P,
    upstream_name: &str,
    first: usize,
    n: usize,
) -> Vec<ProxyId> {
    let now: UnixMillis = now_millis();
    let candidates: Vec<Candidate> = (first..first + n).map(candidate).collect();
    let ids: Vec<ProxyId> = candidates
        .iter()
        .map(|c| {
            proxy_id_for(
                c.protocol,
                &c.host,
                c.port,
                c.credentials.as_ref().map(|c| c.username.as_str()),
            )
        })
        .collect();
    let report = pool
        .upsert(
            now,
            FetchedBatch {
                upstream: upstream(upstream_name),
                operation_id: None,
                ttl_ms: 600_000,
                safety_margin_ms: 5_000,
                max_size: 1_000_000,
                default_max_sessions: 4,
                candidates,
            },
        )
        .await
        .unwrap();
    assert_eq!(report.inserted as usize, n, "{report:?}");
    let observations = ids
        .iter()
        .map(|id| HealthObservation {
            proxy_id: id.clone(),
            checked_at_ms: now,
            outcome: CheckOutcome::Success { latency_ms: 20 },
        })
        .collect();
    pool.apply_health(
        now,
        HealthBatch {
            observations,
            unhealthy_after_failures: 3,
        },
    )
    .await
    .unwrap();
    ids
}

/// A finished response: status, headers and body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub async fn from(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.unwrap().to_vec();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts an error of `status` and `code` in the API's shape, with the request id of
    /// the `X-Request-Id` header, `Cache-Control: no-store`, and `Retry-After` on 429/503.
    /// Returns the message.
    pub fn assert_error(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "body: {}", self.text());
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        let request_id = body["request_id"].as_str().expect("request_id");
        assert!(request_id.starts_with("req-"), "{body}");
        assert_eq!(self.header("x-request-id"), Some(request_id));
        assert_eq!(self.header("cache-control"), Some("no-store"));
        if status == 429 || status == 503 {
            let retry: u64 = self
                .header("retry-after")
                .expect("Retry-After on 429/503")
                .parse()
                .unwrap();
            assert!(retry >= 1);
        }
        body["error"]["message"].as_str().unwrap().to_owned()
    }
}

pub fn body(count: u32) -> Value {
    serde_json::json!({ "count": count })
}

/// Runs each listed `async fn name(kind: QuotaKind)` once on the memory quota and once on
/// the SQLite quota, as `memory::name` and `sqlite::name`.
#[macro_export]
macro_rules! on_memory_and_sqlite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::QuotaKind::Memory).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::QuotaKind::Sqlite).await
                }
            )*
        }
    };
}

/// A server on a fresh MemoryPool and a fresh quota of `kind` with `limit` per window.
pub async fn server_on(kind: QuotaKind, limit: u32, setup: Setup) -> TestServer {
    TestServer::start(
        setup.with_quota(quota_config(limit)),
        Quota::new(kind).await,
    )
    .await
}

/// The test's HTTP client (plain HTTP). The workspace builds reqwest with rustls and no
/// crypto provider of its own (the controller hands it ring), so a client built without a
/// TLS configuration needs the process's default provider: ring, as everywhere here.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap()
}
