//! [`ControlClient`]: the worker side of the control API in `proxypool_core::control`.
//!
//! One short-lived HTTP/1.1 connection per call: calls are rare (a long poll, a report
//! every few seconds), and a fresh connection never inherits a half-dead socket after the
//! controller restarts. Every call has a deadline. Over `https://` each call runs a TLS
//! handshake (the configured CA bundle or the public roots, and the worker's client
//! certificate if it has one); a controller the roots do not vouch for is refused, and the
//! reason (rustls's, e.g. an unknown issuer) is the call's error, logged by the control
//! loop and shown as `control_error` on the admin `/status`.
//!
//! **Several controllers.** The client knows every controller of the deployment and talks
//! to one at a time. A call that cannot reach it (refused, reset, timed out) moves the
//! client on to the next, and a long-poll waiting on the old one is cut short, so a
//! controller that died (or hangs) costs the gateway one retry, not its leases: any
//! controller serves any worker's session from the shared store.

use crate::config::ControllerAddr;
use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use proxypool_core::control::{
    ErrorBody, RegisterSession, ReportAck, SESSIONS_PATH, SessionGrant, SnapshotAck, ack_path,
    report_path, session_path, snapshot_path,
};
use proxypool_core::fleet::{FLEET_PATH, FleetList};
use proxypool_core::{RuntimeReport, Secret, WorkerId};
use proxypool_snapshot::{CONTROL_PROTOCOL, SnapshotUpdate};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// Largest control response accepted (a snapshot with many proxies and clients).
const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// Why a control call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ControlError {
    /// A newer session of this worker exists: register again.
    #[error("session fenced by a newer one")]
    Fenced,
    #[error("controller answered {status}: {code}: {message}")]
    Status {
        status: u16,
        code: String,
        message: String,
    },
    #[error("controller unreachable: {0}")]
    Transport(String),
    #[error("control call timed out")]
    Timeout,
    /// The client moved to another controller while this call waited on the old one.
    #[error("moved to another controller")]
    Moved,
    #[error("bad controller response: {0}")]
    Decode(String),
    /// The controller speaks another worker control protocol.
    #[error("{0}")]
    Protocol(String),
}

/// Client of the controllers for one worker (one at a time; see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct ControlClient {
    addrs: Arc<[ControllerAddr]>,
    /// Index into `addrs` of the controller calls go to.
    current: Arc<AtomicUsize>,
    /// Bumped each time `current` moves, so a waiting long-poll can give up the old one.
    moves: Arc<watch::Sender<u64>>,
    token: Secret,
    worker: WorkerId,
    timeout: Duration,
    /// The last failed call's reason (cleared by a call that succeeds), for `/status`.
    last_error: Arc<ArcSwapOption<String>>,
}

impl ControlClient {
    /// A client of `addrs` (at least one), starting with the first.
    pub(crate) fn new(
        addrs: Vec<ControllerAddr>,
        token: Secret,
        worker: WorkerId,
        timeout: Duration,
    ) -> Self {
        assert!(!addrs.is_empty(), "a gateway needs a controller");
        Self {
            addrs: addrs.into(),
            current: Arc::new(AtomicUsize::new(0)),
            moves: Arc::new(watch::Sender::new(0)),
            token,
            worker,
            timeout,
            last_error: Arc::new(ArcSwapOption::empty()),
        }
    }

    /// The last failed call's reason (the admin `/status` shows it).
    pub(crate) fn last_error(&self) -> Option<Arc<String>> {
        self.last_error.load_full()
    }

    /// The controller calls go to now, as `host:port` (the admin `/status` shows it).
    pub(crate) fn current_controller(&self) -> &str {
        self.addrs[self.current.load(Ordering::Relaxed) % self.addrs.len()]
            .target
            .authority
            .as_str()
    }

    /// After a call to `addrs[from]` could not reach it: the next controller, unless
    /// another call already moved on (two failures of one outage move once).
    fn move_on(&self, from: usize) {
        if self.addrs.len() < 2 {
            return;
        }
        let next = (from + 1) % self.addrs.len();
        if self
            .current
            .compare_exchange(from, next, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            tracing::warn!(
                from = %self.addrs[from].target.authority,
                to = %self.addrs[next].target.authority,
                "controller unreachable; moving to the next one"
            );
            self.moves.send_modify(|n| *n += 1);
        }
    }

    pub(crate) async fn register(
        &self,
        request: &RegisterSession,
    ) -> Result<SessionGrant, ControlError> {
        let body = self
            .call(
                Method::POST,
                SESSIONS_PATH,
                Some(json(request)?),
                self.timeout,
            )
            .await
            .map_err(|error| match error {
                // A controller that predates protocol versions refuses the unknown field.
                ControlError::Status { message, .. } if message.contains("`protocol`") => {
                    ControlError::Protocol(format!(
                        "the controller does not know worker control protocol \
                         {CONTROL_PROTOCOL} (it is older than this gateway): upgrade the \
                         controller ({message})"
                    ))
                }
                ControlError::Status { code, message, .. } if code == "protocol_mismatch" => {
                    ControlError::Protocol(message)
                }
                other => other,
            })
            .inspect_err(|error| self.show_protocol_error(error))?;
        let grant: SessionGrant = decode(&body.1)?;
        if grant.protocol != CONTROL_PROTOCOL {
            let error = ControlError::Protocol(format!(
                "this gateway speaks worker control protocol {CONTROL_PROTOCOL}, the controller \
                 {}: upgrade the {}",
                grant.protocol,
                if grant.protocol < CONTROL_PROTOCOL {
                    "controller"
                } else {
                    "gateway"
                }
            ));
            self.show_protocol_error(&error);
            return Err(error);
        }
        Ok(grant)
    }

    /// A protocol mismatch is what `/status` shows as the control error (the call itself
    /// may have succeeded).
    fn show_protocol_error(&self, error: &ControlError) {
        if let ControlError::Protocol(_) = error {
            self.last_error.store(Some(Arc::new(error.to_string())));
        }
    }

    /// Long-polls for a snapshot newer than `after_version` (whole, or a delta against
    /// `after_version`; 0 asks for the whole snapshot); `None` = nothing new.
    pub(crate) async fn poll_snapshot(
        &self,
        session_id: &str,
        after_version: u64,
        wait: Duration,
    ) -> Result<Option<SnapshotUpdate>, ControlError> {
        let path = format!(
            "{}?session_id={}&after_version={after_version}&wait_ms={}&protocol={CONTROL_PROTOCOL}",
            snapshot_path(&self.worker),
            session_id,
            wait.as_millis()
        );
        let mut moves = self.moves.subscribe();
        moves.borrow_and_update();
        let (status, body) = tokio::select! {
            answer = self.call(Method::GET, &path, None, wait + self.timeout) => answer?,
            _ = moves.changed() => return Err(ControlError::Moved),
        };
        if status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        decode(&body).map(Some)
    }

    pub(crate) async fn ack(&self, ack: &SnapshotAck) -> Result<(), ControlError> {
        self.call(
            Method::POST,
            &ack_path(&self.worker),
            Some(json(ack)?),
            self.timeout,
        )
        .await
        .map(drop)
    }

    pub(crate) async fn report(&self, report: &RuntimeReport) -> Result<ReportAck, ControlError> {
        let (_, body) = self
            .call(
                Method::POST,
                &report_path(&self.worker),
                Some(json(report)?),
                self.timeout,
            )
            .await?;
        decode(&body)
    }

    /// The fleet's live members (`GET /control/v1/fleet?worker=W`), between reports.
    pub(crate) async fn fleet(&self) -> Result<FleetList, ControlError> {
        let path = format!("{FLEET_PATH}?worker={}", self.worker);
        let (_, body) = self.call(Method::GET, &path, None, self.timeout).await?;
        decode(&body)
    }

    pub(crate) async fn end_session(&self, session_id: &str) -> Result<(), ControlError> {
        self.call(
            Method::DELETE,
            &session_path(&self.worker, session_id),
            None,
            self.timeout,
        )
        .await
        .map(drop)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Duration,
    ) -> Result<(StatusCode, Bytes), ControlError> {
        let index = self.current.load(Ordering::Acquire) % self.addrs.len();
        let addr = &self.addrs[index];
        let result =
            match tokio::time::timeout(deadline, self.exchange(addr, method, path, body)).await {
                Ok(result) => result,
                Err(_) => Err(ControlError::Timeout),
            };
        match &result {
            // Fenced is the protocol working, not a failure to show.
            Ok(_) | Err(ControlError::Fenced) => self.last_error.store(None),
            Err(error) => {
                if let ControlError::Status { code, .. } = error
                    && code == "store_lost"
                {
                    // The pool store lost its memory: the proxies this gateway holds stay
                    // its own until their leases end (a recovery withholds them from
                    // everyone else that long); nothing new comes until the controllers
                    // have put a new store in place.
                    metrics::counter!(crate::metrics::STORE_LOST_ANSWERS).increment(1);
                }
                self.last_error.store(Some(Arc::new(format!(
                    "{}: {error}",
                    addr.target.authority
                ))));
                if matches!(error, ControlError::Transport(_) | ControlError::Timeout) {
                    self.move_on(index);
                }
            }
        }
        result
    }

    async fn exchange(
        &self,
        addr: &ControllerAddr,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), ControlError> {
        let transport = |error: &dyn std::fmt::Display| ControlError::Transport(error.to_string());
        let stream = addr
            .target
            .dial(addr.tls.as_ref())
            .await
            .map_err(|e| transport(&e))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|e| transport(&e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
            .map_err(|_| ControlError::Transport("worker token is not a valid header".into()))?;
        bearer.set_sensitive(true);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, addr.target.authority.as_str())
            .header(header::AUTHORIZATION, bearer);
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| transport(&e))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| transport(&e))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| ControlError::Transport(e.to_string()))?
            .to_bytes();
        if status.is_success() {
            return Ok((status, body));
        }
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(error) => (error.error.code, error.error.message),
            Err(_) => (String::new(), String::from_utf8_lossy(&body).into_owned()),
        };
        // A session the controller no longer knows (it restarted, or the session expired)
        // is as good as fenced: register again.
        let session_scoped = path.starts_with("/control/v1/workers/");
        if (status == StatusCode::CONFLICT && code == "fenced")
            || (status == StatusCode::NOT_FOUND && session_scoped)
        {
            return Err(ControlError::Fenced);
        }
        Err(ControlError::Status {
            status: status.as_u16(),
            code,
            message,
        })
    }
}

fn json(value: &impl Serialize) -> Result<Vec<u8>, ControlError> {
    serde_json::to_vec(value).map_err(|e| ControlError::Decode(e.to_string()))
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ControlError> {
    serde_json::from_slice(body).map_err(|e| ControlError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_controller_urls() {
        let addr = ControllerAddr::parse("http://127.0.0.1:9000/").unwrap();
        assert_eq!(
            (addr.target.tls, addr.target.authority.as_str()),
            (false, "127.0.0.1:9000")
        );
        let addr = ControllerAddr::parse("https://ctl.local:8443").unwrap();
        assert_eq!(
            (addr.target.tls, addr.target.host.as_str()),
            (true, "ctl.local")
        );
        assert!(ControllerAddr::parse("ftp://x:1").is_err());
        assert!(ControllerAddr::parse("http://x").is_err());
        assert!(ControllerAddr::parse("http://x:1/api").is_err());
    }
}
