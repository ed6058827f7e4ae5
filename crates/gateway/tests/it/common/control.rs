//! A small test controller: the server side of the worker control API, in memory, with
//! knobs the tests turn (publish a snapshot, fence the session, name proxies stale in its
//! report answers, list fleet members, go away entirely).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proxypool_core::control::{
    Advisories, ErrorBody, ErrorDetail, GatewayClient, HeldLease, RegisterSession, ReportAck,
    SessionGrant, SnapshotAck, SnapshotProxy, UpstreamTls, WorkerSnapshot,
};
use proxypool_core::fleet::{FLEET_PATH, FleetEndpoint, FleetList, FleetMember};
use proxypool_core::{ProxyId, RuntimeReport, SnapshotRef, TicketKey, WorkerId, now_millis};
use proxypool_snapshot::{CONTROL_PROTOCOL, SnapshotContent, SnapshotUpdate, snapshot_checksum};
use proxypool_testkit::eventually_async;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub const TOKEN: &str = "worker-token-for-tests";

#[derive(Debug, Default)]
pub struct ControlState {
    pub session: Option<String>,
    pub registrations: u32,
    pub version: u64,
    pub proxies: Vec<SnapshotProxy>,
    pub clients: Vec<GatewayClient>,
    pub max_staleness_ms: u64,
    pub acks: Vec<SnapshotAck>,
    pub reports: Vec<RuntimeReport>,
    pub ended: Vec<String>,
    /// The report interval granted to sessions (0: the default 200 ms).
    pub report_interval_ms: u64,
    /// The long-poll wait granted to sessions (0: the default 300 ms).
    pub snapshot_wait_ms: u64,
    /// Every request path seen (to prove what the gateway calls).
    pub calls: Vec<String>,
    /// Named in every report's answer as entries the store did not take (the worker no
    /// longer owns these proxies).
    pub stale_proxies: Vec<ProxyId>,
    /// Draining leases the snapshot carries.
    pub held: Vec<HeldLease>,
    /// Cooldowns, their policy and session feedback the snapshot carries.
    pub advisories: Advisories,
    /// The feedback-ticket key the snapshot carries (none: the gateway issues no tickets).
    pub ticket_key: Option<TicketKey>,
    /// How the snapshot says to reach `https` proxies.
    pub upstream_tls: Vec<UpstreamTls>,
    /// The controller hangs, as a stopped process does: connections are accepted, nothing
    /// is ever answered, waiting long-polls included.
    pub frozen: bool,
    /// Sessions live in a store shared with other controllers: a session this controller
    /// has not seen is taken as the current one instead of being fenced.
    pub shared_sessions: bool,
    /// Sessions are granted until this clock's now plus `session_ttl_ms` (default: the
    /// wall clock, 30 s), so a test on a manual clock moves session ends with it.
    pub session_clock: Option<Arc<proxypool_core::ManualClock>>,
    pub session_ttl_ms: u64,
    /// Runtime reports are answered 503 (the store is down): sessions are not renewed.
    pub refuse_reports: bool,
    /// Every snapshot served, by (session, version), so a gateway holding one gets the next
    /// as a delta, as from the real controller.
    pub served: std::collections::HashMap<(String, u64), SnapshotContent>,
    /// Serve only whole snapshots.
    pub whole_only: bool,
    /// The next delta announces a wrong checksum (as a delta against content the gateway
    /// does not hold would come out).
    pub corrupt_next_delta: bool,
    /// The control protocol the grant names (`None`: this build's).
    pub grant_protocol: Option<u32>,
    /// Deltas and whole snapshots served.
    pub deltas_served: u32,
    pub wholes_served: u32,
    /// The fleet's members, in every report's answer and at `GET /control/v1/fleet`.
    pub fleet: Vec<FleetMember>,
}

impl ControlState {
    /// The end of a session granted or renewed now.
    pub fn session_end(&self) -> u64 {
        use proxypool_core::Clock;
        let now = self
            .session_clock
            .as_ref()
            .map_or_else(now_millis, |clock| clock.now());
        now + if self.session_ttl_ms == 0 {
            30_000
        } else {
            self.session_ttl_ms
        }
    }

    /// Whether `session` is the current one (with shared sessions, an unseen one becomes it).
    fn knows(&mut self, session: &str) -> bool {
        if self.shared_sessions && self.session.is_none() {
            self.session = Some(session.to_owned());
        }
        self.session.as_deref() == Some(session)
    }
}

#[derive(Debug)]
pub struct TestController {
    pub addr: SocketAddr,
    pub worker: WorkerId,
    pub state: Arc<Mutex<ControlState>>,
    changed: Arc<Notify>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Serves the control API over TLS with this when set.
    tls: Option<proxypool_edge::ServerTls>,
}

impl TestController {
    pub async fn start(worker: &str, max_staleness_ms: u64) -> Arc<Self> {
        Self::start_with(worker, max_staleness_ms, None).await
    }

    /// A controller serving over TLS (`https://` URL).
    pub async fn start_tls(
        worker: &str,
        max_staleness_ms: u64,
        tls: proxypool_edge::ServerTls,
    ) -> Arc<Self> {
        Self::start_with(worker, max_staleness_ms, Some(tls)).await
    }

    async fn start_with(
        worker: &str,
        max_staleness_ms: u64,
        tls: Option<proxypool_edge::ServerTls>,
    ) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let controller = Arc::new(Self {
            addr,
            worker: WorkerId::new(worker).unwrap(),
            state: Arc::new(Mutex::new(ControlState {
                max_staleness_ms,
                ..ControlState::default()
            })),
            changed: Arc::new(Notify::new()),
            task: Mutex::new(None),
            tls,
        });
        controller.serve(listener);
        controller
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    fn serve(self: &Arc<Self>, listener: TcpListener) {
        let this = Arc::clone(self);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let this = Arc::clone(&this);
                connections.spawn(async move {
                    let stream = match &this.tls {
                        None => proxypool_edge::Conn::Plain(stream),
                        Some(tls) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                            match acceptor.accept(stream).await {
                                Ok(stream) => proxypool_edge::Conn::Server(Box::new(stream)),
                                Err(_) => return,
                            }
                        }
                    };
                    let service = service_fn(move |request| {
                        let this = Arc::clone(&this);
                        async move { Ok::<_, std::convert::Infallible>(this.handle(request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        *self.task.lock().unwrap() = Some(task);
    }

    /// The controller goes away: its listener and every open connection close.
    pub fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap().take() {
            task.abort();
        }
    }

    /// Comes back on the same address (free again once the aborted listener is dropped).
    pub async fn restart(self: &Arc<Self>) {
        self.stop();
        let what = format!("{} to be free again", self.addr);
        let listener = eventually_async(&what, Duration::from_secs(5), async || {
            TcpListener::bind(self.addr).await.ok()
        })
        .await;
        self.serve(listener);
    }

    /// Publishes a new snapshot version with these proxies and clients.
    pub fn publish(&self, proxies: Vec<SnapshotProxy>, clients: Vec<GatewayClient>) {
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        state.proxies = proxies;
        state.clients = clients;
        drop(state);
        self.changed.notify_waiters();
    }

    /// Publishes a new snapshot version with what `state` holds now (after a test changed
    /// its advisories, say).
    pub fn bump(&self) {
        self.state.lock().unwrap().version += 1;
        self.changed.notify_waiters();
    }

    /// Publishes a new snapshot version that also carries draining leases.
    pub fn publish_with_held(
        &self,
        proxies: Vec<SnapshotProxy>,
        held: Vec<HeldLease>,
        clients: Vec<GatewayClient>,
    ) {
        self.state.lock().unwrap().held = held;
        self.publish(proxies, clients);
    }

    /// The fleet's members this controller answers from now on (in report answers and at
    /// `GET /control/v1/fleet?worker=W`), as given: the test decides order and content.
    pub fn set_fleet(&self, members: Vec<FleetMember>) {
        self.state.lock().unwrap().fleet = members;
    }

    /// The fleet endpoint the gateway named in its last report (`None`: none yet, or the
    /// last report named none).
    pub fn last_fleet_endpoint(&self) -> Option<FleetEndpoint> {
        self.state
            .lock()
            .unwrap()
            .reports
            .last()
            .and_then(|report| report.fleet.clone())
    }

    /// Stops answering anything, without closing a connection (a SIGSTOPped process).
    pub fn freeze(&self) {
        self.state.lock().unwrap().frozen = true;
        self.changed.notify_waiters();
    }

    /// Invalidates the current session (as if another instance registered).
    pub fn fence(&self) {
        self.state.lock().unwrap().session = Some("someone-else".into());
        self.changed.notify_waiters();
    }

    pub fn snapshot(&self, state: &ControlState, session: &str) -> WorkerSnapshot {
        WorkerSnapshot {
            advisories: state.advisories.clone(),
            worker: self.worker.clone(),
            session_id: session.to_owned(),
            reference: SnapshotRef {
                version: state.version,
                epoch: 1,
                checksum: snapshot_checksum(
                    &state.proxies,
                    &state.held,
                    &state.clients,
                    &state.advisories,
                    state.ticket_key.as_ref(),
                    &state.upstream_tls,
                ),
            },
            generated_at_ms: now_millis(),
            max_staleness_ms: state.max_staleness_ms,
            proxies: state.proxies.clone(),
            clients: state.clients.clone(),
            held: state.held.clone(),
            ticket_key: state.ticket_key.clone(),
            upstream_tls: state.upstream_tls.clone(),
        }
    }

    async fn handle(self: &Arc<Self>, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let method = request.method().clone();
        let frozen = {
            let mut state = self.state.lock().unwrap();
            state.calls.push(format!("{method} {path}"));
            state.frozen
        };
        if frozen {
            return std::future::pending().await;
        }
        let authorized = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
        if !authorized {
            return error(StatusCode::UNAUTHORIZED, "unauthenticated");
        }
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let worker = format!("/control/v1/workers/{}", self.worker);
        match (method, path.as_str()) {
            (Method::POST, "/control/v1/sessions") => {
                let register: RegisterSession = serde_json::from_slice(&body).unwrap();
                let mut state = self.state.lock().unwrap();
                state.session = Some(register.session_id.clone());
                state.registrations += 1;
                json(&SessionGrant {
                    worker: register.worker,
                    session_id: register.session_id,
                    expires_at_ms: state.session_end(),
                    session_ttl_ms: 30_000,
                    report_interval_ms: if state.report_interval_ms == 0 {
                        200
                    } else {
                        state.report_interval_ms
                    },
                    snapshot_wait_ms: if state.snapshot_wait_ms == 0 {
                        300
                    } else {
                        state.snapshot_wait_ms
                    },
                    protocol: state.grant_protocol.unwrap_or(CONTROL_PROTOCOL),
                })
            }
            (Method::GET, p) if p == format!("{worker}/snapshot") => {
                let param = |name: &str| {
                    query
                        .split('&')
                        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                        .unwrap_or_default()
                        .to_owned()
                };
                let session = param("session_id");
                let after: u64 = param("after_version").parse().unwrap_or(0);
                let wait: u64 = param("wait_ms").parse().unwrap_or(0);
                let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
                loop {
                    let notified = self.changed.notified();
                    let frozen = self.state.lock().unwrap().frozen;
                    if frozen {
                        return std::future::pending().await;
                    }
                    {
                        let mut state = self.state.lock().unwrap();
                        if !state.knows(&session) {
                            return error(StatusCode::CONFLICT, "fenced");
                        }
                        if state.version > after {
                            let whole = self.snapshot(&state, &session);
                            let next = SnapshotContent::of(&whole).unwrap();
                            let base = state.served.get(&(session.clone(), after)).cloned();
                            state
                                .served
                                .insert((session.clone(), whole.reference.version), next.clone());
                            return match base {
                                Some(base) if !state.whole_only => {
                                    state.deltas_served += 1;
                                    let mut delta = base.delta_to(&self.worker, &next);
                                    delta.generated_at_ms = whole.generated_at_ms;
                                    delta.max_staleness_ms = whole.max_staleness_ms;
                                    if std::mem::take(&mut state.corrupt_next_delta) {
                                        delta.reference.checksum = "0".repeat(32);
                                    }
                                    json(&SnapshotUpdate::Delta(Box::new(delta)))
                                }
                                _ => {
                                    state.wholes_served += 1;
                                    json(&SnapshotUpdate::Full(Box::new(whole)))
                                }
                            };
                        }
                    }
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        let mut response = Response::new(Full::new(Bytes::new()));
                        *response.status_mut() = StatusCode::NO_CONTENT;
                        return response;
                    }
                }
            }
            (Method::POST, p) if p == format!("{worker}/snapshot-ack") => {
                let ack: SnapshotAck = serde_json::from_slice(&body).unwrap();
                let mut state = self.state.lock().unwrap();
                if !state.knows(&ack.session_id) {
                    return error(StatusCode::CONFLICT, "fenced");
                }
                state.acks.push(ack);
                let mut response = Response::new(Full::new(Bytes::new()));
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
            (Method::POST, p) if p == format!("{worker}/reports") => {
                let report: RuntimeReport = serde_json::from_slice(&body).unwrap();
                let mut state = self.state.lock().unwrap();
                if state.refuse_reports {
                    return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
                }
                if !state.knows(&report.session_id) {
                    return error(StatusCode::CONFLICT, "fenced");
                }
                if let Some(last) = state.reports.last()
                    && last.session_id == report.session_id
                    && last.sequence >= report.sequence
                {
                    return error(StatusCode::CONFLICT, "conflict");
                }
                state.reports.push(report);
                json(&ReportAck {
                    outcome: "accepted".into(),
                    session_expires_at_ms: state.session_end(),
                    stale_proxies: state.stale_proxies.clone(),
                    fleet: state.fleet.clone(),
                })
            }
            (Method::GET, FLEET_PATH) => {
                if query != format!("worker={}", self.worker) {
                    return error(StatusCode::BAD_REQUEST, "invalid_request");
                }
                json(&FleetList {
                    members: self.state.lock().unwrap().fleet.clone(),
                })
            }
            (Method::DELETE, p) if p.starts_with(&format!("{worker}/sessions/")) => {
                let id = p.rsplit('/').next().unwrap().to_owned();
                self.state.lock().unwrap().ended.push(id);
                let mut response = Response::new(Full::new(Bytes::new()));
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
            _ => error(StatusCode::NOT_FOUND, "not_found"),
        }
    }
}

fn json(value: &impl serde::Serialize) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let mut response = json(&ErrorBody {
        error: ErrorDetail {
            code: code.into(),
            message: code.into(),
        },
        request_id: "test".into(),
    });
    *response.status_mut() = status;
    response
}
