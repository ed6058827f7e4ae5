//! Shared test helpers: a tiny HTTP client for the control API, configs, and pool seeding.
#![allow(unreachable_pub)]

pub mod e2e;

pub use proxypool_testkit::eventually_async;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use proxypool_controller::config::{Config, Env, Role};
use proxypool_controller::{AlwaysLeader, Controller, ManualClock, OpenedStore};
use proxypool_core::{
    ActivityPool, Candidate, CheckOutcome, FetchedBatch, HealthBatch, HealthObservation, Protocol,
    ProxyId, SecretHash, UpstreamId,
};
use proxypool_pool::{MemoryPool, MemoryPoolOptions};
use proxypool_snapshot::{SnapshotContent, SnapshotUpdate};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub const WORKER_TOKEN: &str = "test-worker-token";
pub const T0: u64 = 1_800_000_000_000;

/// A minimal valid config (memory store); `extra` is appended as more TOML.
pub fn config_text(extra: &str) -> String {
    let hash = SecretHash::derive(WORKER_TOKEN, "testsalt").unwrap();
    let only_a = SecretHash::derive("only-a-token", "testsalt").unwrap();
    format!(
        r#"
[snapshot]
long_poll_wait = "10s"
session_ttl = "30s"
report_interval = "5s"
poll_interval = "50ms"

[ownership]
lease = "30s"
renew_before = "10s"
interval = "200ms"
per_worker_target = 100

[[worker_tokens]]
name = "all"
token = {{ hash = "{hash}" }}

[[worker_tokens]]
name = "only-a"
token = {{ hash = "{only_a}" }}
workers = ["gw-a"]

{extra}
"#,
        hash = hash.as_str(),
        only_a = only_a.as_str(),
    )
}

pub fn static_upstream(id: &str) -> String {
    format!(
        r#"
[[upstreams]]
id = "{id}"
ttl = "10m"
safety_margin = "10s"
max_size = 1000
max_sessions = 4
[upstreams.provider]
kind = "static"
proxies = ["127.0.0.1:1"]
[[upstreams.health.targets]]
url = "http://127.0.0.1:9/"
"#
    )
}

pub fn parse_config(text: &str) -> Config {
    parse_config_env(text, &[])
}

/// [`parse_config`] with these environment variables (for `{ env = ... }` secrets).
pub fn parse_config_env(text: &str, env: &[(&str, &str)]) -> Config {
    Config::from_toml_str(
        text,
        "test.toml",
        Path::new("."),
        Role::Controller,
        &Env::from_pairs(env.iter().copied()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A controller over a fresh MemoryPool and a manual clock at `T0`.
pub fn controller(config: Config) -> (Controller, Arc<MemoryPool>, Arc<ManualClock>) {
    let pool = Arc::new(MemoryPool::new(MemoryPoolOptions::default()));
    let clock = ManualClock::new(T0);
    let controller = Controller::with_store(
        config,
        OpenedStore {
            pool: pool.clone(),
            leadership: Arc::new(AlwaysLeader::new()),
        },
        clock.clone(),
    );
    (controller, pool, clock)
}

/// Serves the control router on a loopback port (no background loops: tests drive them).
pub async fn serve_control(controller: &Controller) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = controller.control_router();
    // The scaffold the controller serves with, at the configured limits.
    let limits = proxypool_controller::serve_limits(&controller.config().control.limits);
    tokio::spawn(async move {
        let service = proxypool_edge::TowerToHyperService::new(router);
        proxypool_edge::serve(listener, service, limits, std::future::pending())
            .await
            .unwrap();
    });
    addr
}

/// Puts `n` AVAILABLE proxies of `upstream` into the pool.
pub async fn seed_available(
    pool: &dyn ActivityPool,
    now: u64,
    upstream: &str,
    n: u16,
) -> Vec<ProxyId> {
    seed_more(pool, now, upstream, 0, n).await
}

/// `n` more available proxies, numbered from `first` (ports `20_000 + first ..`).
pub async fn seed_more(
    pool: &dyn ActivityPool,
    now: u64,
    upstream: &str,
    first: u16,
    n: u16,
) -> Vec<ProxyId> {
    let candidates: Vec<Candidate> = (first..first + n)
        .map(|i| Candidate::new(Protocol::Http, "127.0.0.1", 20_000 + i))
        .collect();
    pool.upsert(
        now,
        FetchedBatch {
            upstream: UpstreamId::new(upstream).unwrap(),
            operation_id: None,
            ttl_ms: 600_000,
            safety_margin_ms: 10_000,
            max_size: 1000,
            default_max_sessions: 4,
            candidates,
        },
    )
    .await
    .unwrap();
    let records = pool
        .due_for_check(
            now,
            proxypool_core::DueQuery {
                limit: 10_000,
                recheck_after_ms: 0,
            },
        )
        .await
        .unwrap();
    let ids: Vec<ProxyId> = records.iter().map(|r| r.id.clone()).collect();
    pool.apply_health(
        now,
        HealthBatch {
            observations: ids
                .iter()
                .map(|id| HealthObservation {
                    proxy_id: id.clone(),
                    checked_at_ms: now,
                    outcome: CheckOutcome::Success { latency_ms: 5 },
                })
                .collect(),
            unhealthy_after_failures: 3,
        },
    )
    .await
    .unwrap();
    ids
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    /// For a snapshot with content: the whole snapshot's JSON, also when a delta came
    /// (applied to what the client holds, checksum checked); otherwise the body as sent.
    pub body: Bytes,
    /// For a snapshot with content: `"full"` or `"delta"`, and the bytes that came.
    pub update: Option<&'static str>,
    #[allow(dead_code, reason = "read by the recorder binary's delta tests only")]
    pub wire: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn error_code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A control API client over real HTTP.
#[derive(Debug, Clone)]
pub struct ControlClient {
    base: String,
    token: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// What each (worker, session) was last sent, as a gateway holds it: deltas apply to it.
    held: Arc<Mutex<HashMap<(String, String), SnapshotContent>>>,
}

impl ControlClient {
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Self {
        ControlClient {
            base: format!("http://{addr}"),
            token: token.map(str::to_owned),
            client: Client::builder(TokioExecutor::new()).build_http(),
            held: Arc::default(),
        }
    }

    /// Forgets what the client holds of the session (a gateway that lost its snapshot).
    #[allow(dead_code, reason = "used by the recorder binary's delta tests only")]
    pub fn forget(&self, worker: &str, session: &str) {
        self.held
            .lock()
            .unwrap()
            .remove(&(worker.to_owned(), session.to_owned()));
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let body = match body {
            Some(json) => {
                builder = builder.header("content-type", "application/json");
                Full::new(Bytes::from(json.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        let response = self
            .client
            .request(builder.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            wire: body.clone(),
            update: None,
            body,
        }
    }

    pub async fn register(&self, worker: &str, session: &str) -> Reply {
        self.send(
            Method::POST,
            proxypool_core::control::SESSIONS_PATH,
            Some(serde_json::json!({
                "worker": worker, "session_id": session, "version": "test",
                "protocol": proxypool_snapshot::CONTROL_PROTOCOL,
            })),
        )
        .await
    }

    pub async fn snapshot(&self, worker: &str, session: &str, after: u64, wait_ms: u64) -> Reply {
        let path =
            proxypool_core::control::snapshot_path(&proxypool_core::WorkerId::new(worker).unwrap());
        let mut reply = self
            .send(
                Method::GET,
                &format!(
                    "{path}?session_id={session}&after_version={after}&wait_ms={wait_ms}&protocol={}",
                    proxypool_snapshot::CONTROL_PROTOCOL
                ),
                None,
            )
            .await;
        if reply.status != StatusCode::OK {
            return reply;
        }
        let update: SnapshotUpdate = serde_json::from_slice(&reply.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&reply.body)));
        let key = (worker.to_owned(), session.to_owned());
        let mut held = self.held.lock().unwrap();
        let whole = match update {
            SnapshotUpdate::Full(whole) => {
                reply.update = Some("full");
                let content = SnapshotContent::of(&whole).unwrap();
                assert_eq!(
                    content.checksum(),
                    whole.reference.checksum,
                    "whole snapshot checksum"
                );
                held.insert(key, content);
                *whole
            }
            SnapshotUpdate::Delta(delta) => {
                reply.update = Some("delta");
                let content = held
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("a delta for a session the client holds nothing of"));
                assert_eq!(
                    content.reference().version,
                    after,
                    "a delta from the asked version"
                );
                content
                    .apply(&delta)
                    .unwrap_or_else(|e| panic!("the delta does not apply: {e}"));
                content.to_snapshot(&delta.worker, delta.generated_at_ms, delta.max_staleness_ms)
            }
        };
        reply.body = Bytes::from(serde_json::to_vec(&whole).unwrap());
        reply
    }

    pub async fn ack(&self, worker: &str, session: &str, reference: &Value) -> Reply {
        let path =
            proxypool_core::control::ack_path(&proxypool_core::WorkerId::new(worker).unwrap());
        self.send(
            Method::POST,
            &path,
            Some(serde_json::json!({"session_id": session, "snapshot": reference})),
        )
        .await
    }

    /// A report with `entries` = [(proxy id, active, reserved)].
    pub async fn report(
        &self,
        worker: &str,
        session: &str,
        sequence: u64,
        reference: &Value,
        entries: &[(&str, u32, u32)],
    ) -> Reply {
        let path =
            proxypool_core::control::report_path(&proxypool_core::WorkerId::new(worker).unwrap());
        let entries: Vec<Value> = entries
            .iter()
            .map(|(id, active, reserved)| {
                serde_json::json!({"proxy_id": id, "active": active, "reserved": reserved})
            })
            .collect();
        self.send(
            Method::POST,
            &path,
            Some(serde_json::json!({
                "worker": worker, "session_id": session, "sequence": sequence,
                "snapshot": reference, "entries": entries
            })),
        )
        .await
    }

    pub async fn close(&self, worker: &str, session: &str) -> Reply {
        let path = proxypool_core::control::session_path(
            &proxypool_core::WorkerId::new(worker).unwrap(),
            session,
        );
        self.send(Method::DELETE, &path, None).await
    }

    /// Polls, acknowledges and returns (reference, proxy ids) of the worker's snapshot.
    pub async fn sync(&self, worker: &str, session: &str, after: u64) -> (Value, Vec<String>) {
        let reply = self.snapshot(worker, session, after, 0).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{:?}",
            String::from_utf8_lossy(&reply.body)
        );
        let snapshot = reply.json();
        let reference = snapshot["reference"].clone();
        let ack = self.ack(worker, session, &reference).await;
        assert_eq!(
            ack.status,
            StatusCode::NO_CONTENT,
            "{:?}",
            String::from_utf8_lossy(&ack.body)
        );
        let ids = snapshot["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect();
        (reference, ids)
    }
}

/// The machine's own name, when it resolves to a loopback or private address (as on most
/// hosts and in containers): a real name a vendor list could carry that leads inside.
/// `None` after a banner when it does not (under `CI=true` a panic instead).
pub async fn internal_hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default();
    let inside = match tokio::net::lookup_host((name.as_str(), 0)).await {
        Ok(mut addrs) => addrs
            .any(|addr| proxypool_controller::provider::hygiene::is_internal_address(addr.ip())),
        Err(_) => false,
    };
    if inside {
        return Some(name);
    }
    let message = format!("this machine's name {name:?} does not resolve to an internal address");
    if proxypool_testkit::running_in_ci() {
        panic!("CI=true and {message}, so this test cannot run");
    }
    eprintln!("SKIPPED: {message}; this test did NOT run");
    None
}
