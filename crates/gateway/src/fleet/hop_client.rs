//! Connections to owners: the entry side of the hop. Each is TCP to the member's address
//! (under `connect_timeout`), TLS 1.3 with this gateway's fleet certificate and the member
//! pinned by its `spki_sha256` ([`super::pins`]), then HTTP/1.1 as a client speaks to the
//! proxy listener.
//!
//! - Plain HTTP ([`HopClient::send`]) goes over kept-alive connections, a few idle ones
//!   kept per member (under its pin, so a member that restarted with a new key is never
//!   reached over an old connection) for at most `idle_timeout`. A connection goes back
//!   to the pool when the owner's answer has been read to its end ([`HopResponseBody`]);
//!   one that the owner closed meanwhile is replaced by a fresh one when the request was
//!   not written yet.
//! - A tunnel ([`HopClient::open_tunnel`]) takes a connection of its own: `CONNECT`, and
//!   on the owner's `200` the upgraded stream, which the caller splices to its client.
//!
//! Two deadlines. Reaching the owner (connect, TLS, the HTTP handshake, the request
//! written) runs under `hop_timeout`: a member that misses it, refuses the connection or
//! fails TLS (a wrong pin) is [`HopError`], which the caller answers by marking the member
//! unreachable and trying the next owner once. The owner's answer head then comes when
//! the owner has routed the request, which may take what its own dials may take (every
//! attempt's connect and handshake, a capacity wait): that is bounded by
//! [`HopTimeouts::answer`], the longest a live owner can legitimately take, so a slow
//! origin is never mistaken for a dead owner. A written request still unanswered after
//! `hop_timeout` prompts one fresh handshake with the member: an owner that stopped (its
//! kernel still holds the connection) or vanished (its address drops packets) cannot
//! finish it, and is given up then, not at the answer bound.

use super::identity::{FleetIdentity, Pin as KeyPin};
use super::view::Member;
use crate::config::{FleetConfig, GatewayConfig};
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use proxypool_core::LockExt;
use rustls::pki_types::ServerName;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Most idle connections kept per member: beyond it a finished connection is closed.
const MAX_IDLE_PER_MEMBER: usize = 32;

/// The name the hop's TLS asks for: the member is recognised by its pin, never by name.
const SERVER_NAME: &str = "proxypool-fleet";

/// How long a just-returned pooled connection may take to become ready (hyper may not
/// have seen the end of the last answer yet).
const READY_GRACE: Duration = Duration::from_millis(50);

/// The hop's bounds, read from `[gateway.fleet]` per relay (they apply on reload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HopTimeouts {
    /// TCP connect to the member.
    pub connect: Duration,
    /// From the hop's start until the owner is reached (TLS up, request handed over).
    pub head: Duration,
    /// From the hop's start to the owner's answer head: `head`, and the longest the owner
    /// may take to route (every attempt's connect and handshake, the capacity wait).
    pub answer: Duration,
    /// Longest an idle pooled connection is reused after.
    pub idle: Duration,
}

impl HopTimeouts {
    pub(crate) fn of(config: &FleetConfig, gateway: &GatewayConfig) -> Self {
        let head = config.hop_timeout.as_duration();
        let dial = &gateway.dial;
        let per_attempt = dial.connect_timeout.as_duration() + dial.handshake_timeout.as_duration();
        let routing =
            per_attempt * dial.max_attempts.max(1) + gateway.limits.capacity_wait.as_duration();
        HopTimeouts {
            connect: config.connect_timeout.as_duration(),
            head,
            answer: head + routing,
            idle: config.idle_timeout.as_duration(),
        }
    }
}

/// Why a hop got no answer head from the owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HopError {
    /// The connection, its TLS (a wrong pin among others) or the exchange failed.
    #[error("owner unreachable: {0}")]
    Unreachable(String),
    /// No answer head within `hop_timeout`.
    #[error("no answer head from the owner within the hop timeout")]
    Timeout,
}

/// A failed [`HopClient::send`]: why, and the request when none of it was written (so it
/// can go to the next owner, or be routed here).
#[derive(Debug)]
pub(crate) struct SendFailure {
    pub error: HopError,
    pub unsent: Option<Request<Incoming>>,
}

/// The owner's answer to a relayed `CONNECT`.
#[derive(Debug)]
pub(crate) enum TunnelAnswer {
    /// `200`: the answer's head, and the stream to the target through the owner.
    Open {
        head: http::response::Parts,
        stream: TokioIo<Upgraded>,
    },
    /// Any other status (a refusal): the whole answer.
    Refused(Response<Incoming>),
}

/// An idle kept-alive connection.
#[derive(Debug)]
struct Idle {
    sender: SendRequest<Incoming>,
    since: Instant,
}

/// Idle connections per member pin.
type IdleMap = HashMap<KeyPin, Vec<Idle>>;

/// Connections from this gateway to the fleet's other members.
#[derive(Debug)]
pub(crate) struct HopClient {
    identity: Arc<FleetIdentity>,
    idle: Arc<Mutex<IdleMap>>,
}

impl HopClient {
    pub(crate) fn new(identity: Arc<FleetIdentity>) -> Self {
        HopClient {
            identity,
            idle: Arc::default(),
        }
    }

    /// Sends a plain HTTP request (absolute form, fleet headers set) to `member` and
    /// returns the owner's answer head, its body streaming; its connection goes back to
    /// the pool when the body has been read to the end.
    pub(crate) async fn send(
        &self,
        member: &Member,
        timeouts: HopTimeouts,
        request: Request<Incoming>,
    ) -> Result<Response<HopResponseBody>, SendFailure> {
        let started = Instant::now();
        let deadline = started + timeouts.head;
        let answer_by = started + timeouts.answer;
        let mut request = request;
        let mut pooled = self.take(&member.pin, timeouts.idle).await;
        loop {
            let reused = pooled.is_some();
            let mut sender = match pooled.take() {
                Some(sender) => sender,
                None => match self.open_pooled(member, timeouts, deadline).await {
                    Ok(sender) => sender,
                    Err(error) => {
                        return Err(SendFailure {
                            error,
                            unsent: Some(request),
                        });
                    }
                },
            };
            let sent = self
                .answer(
                    member,
                    timeouts,
                    deadline,
                    answer_by,
                    sender.try_send_request(request),
                )
                .await;
            match sent {
                Some(Ok(response)) => {
                    let release = Release {
                        pool: Arc::clone(&self.idle),
                        pin: member.pin,
                        sender,
                    };
                    return Ok(response.map(|inner| HopResponseBody::new(inner, release)));
                }
                Some(Err(mut error)) => match error.take_message() {
                    // Never written: the pooled connection had just closed. A fresh one.
                    Some(unsent) if reused => request = unsent,
                    unsent => {
                        return Err(SendFailure {
                            error: HopError::Unreachable(format!(
                                "hop request failed: {}",
                                error.error()
                            )),
                            unsent,
                        });
                    }
                },
                None => {
                    return Err(SendFailure {
                        error: HopError::Timeout,
                        unsent: None,
                    });
                }
            }
        }
    }

    /// Waits for the owner's answer to a written request: past `head` without one, a fresh
    /// handshake with the member tells a slow owner (it answers: wait on until
    /// `answer_by`) from one that stopped or vanished without closing the kept-alive
    /// connection (it does not: given up now, not at `answer_by`).
    async fn answer<T>(
        &self,
        member: &Member,
        timeouts: HopTimeouts,
        head: Instant,
        answer_by: Instant,
        sent: impl Future<Output = T>,
    ) -> Option<T> {
        tokio::pin!(sent);
        if let Ok(answer) = tokio::time::timeout_at(head, &mut sent).await {
            return Some(answer);
        }
        let probe = tokio::time::timeout(timeouts.head, self.connect(member, timeouts)).await;
        if !matches!(probe, Ok(Ok(_))) {
            return None;
        }
        tokio::time::timeout_at(answer_by, sent).await.ok()
    }

    /// Opens a tunnel to `authority` through `member` on a connection of its own:
    /// `CONNECT` with `headers` (the fleet headers), and on `200` the upgraded stream.
    pub(crate) async fn open_tunnel(
        &self,
        member: &Member,
        timeouts: HopTimeouts,
        authority: &str,
        headers: http::HeaderMap,
    ) -> Result<TunnelAnswer, HopError> {
        let started = Instant::now();
        let reached = tokio::time::timeout_at(started + timeouts.head, async {
            let tls = self.connect(member, timeouts).await?;
            let (sender, connection) = client_builder()
                .handshake::<_, Empty<Bytes>>(TokioIo::new(tls))
                .await
                .map_err(|error| HopError::Unreachable(format!("hop handshake: {error}")))?;
            tokio::spawn(connection.with_upgrades());
            Ok(sender)
        })
        .await;
        let mut sender = reached.unwrap_or(Err(HopError::Timeout))?;
        // The owner dials its proxy before it answers: its own bounds, not the hop's.
        let opened = tokio::time::timeout_at(started + timeouts.answer, async {
            let mut request = Request::connect(authority)
                .body(Empty::new())
                .map_err(|error| HopError::Unreachable(format!("bad CONNECT target: {error}")))?;
            *request.headers_mut() = headers;
            if let Ok(host) = http::HeaderValue::from_str(authority) {
                request.headers_mut().insert(http::header::HOST, host);
            }
            let mut response = sender
                .send_request(request)
                .await
                .map_err(|error| HopError::Unreachable(format!("hop CONNECT failed: {error}")))?;
            if response.status() != http::StatusCode::OK {
                return Ok(TunnelAnswer::Refused(response));
            }
            let upgraded = hyper::upgrade::on(&mut response)
                .await
                .map_err(|error| HopError::Unreachable(format!("hop upgrade failed: {error}")))?;
            let (head, _) = response.into_parts();
            Ok(TunnelAnswer::Open {
                head,
                stream: TokioIo::new(upgraded),
            })
        })
        .await;
        opened.unwrap_or(Err(HopError::Timeout))
    }

    /// TCP, then TLS with the member pinned, both before `deadline`.
    async fn connect(
        &self,
        member: &Member,
        timeouts: HopTimeouts,
    ) -> Result<TlsStream<TcpStream>, HopError> {
        let tcp = tokio::time::timeout(
            timeouts.connect,
            TcpStream::connect(member.address.as_str()),
        )
        .await
        .map_err(|_| HopError::Unreachable("connect timed out".into()))?
        .map_err(|error| HopError::Unreachable(format!("connect: {error}")))?;
        let _ = tcp.set_nodelay(true);
        let config = super::pins::client_config(&self.identity, &member.pin)
            .map_err(|error| HopError::Unreachable(format!("hop TLS settings: {error}")))?;
        let name = ServerName::try_from(SERVER_NAME).expect("a valid DNS name");
        TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|error| HopError::Unreachable(format!("hop TLS: {error}")))
    }

    /// A new kept-alive connection to `member`, ready before `deadline`.
    async fn open_pooled(
        &self,
        member: &Member,
        timeouts: HopTimeouts,
        deadline: Instant,
    ) -> Result<SendRequest<Incoming>, HopError> {
        let opened = tokio::time::timeout_at(deadline, async {
            let tls = self.connect(member, timeouts).await?;
            let (sender, connection) = client_builder()
                .handshake::<_, Incoming>(TokioIo::new(tls))
                .await
                .map_err(|error| HopError::Unreachable(format!("hop handshake: {error}")))?;
            // Ends when the sender is dropped (idle past its time, or the pool full) or
            // the owner closes.
            tokio::spawn(connection);
            Ok(sender)
        })
        .await;
        opened.unwrap_or(Err(HopError::Timeout))
    }

    /// The most recently returned live connection to the member of `pin`, not idle for
    /// longer than `max_idle`.
    async fn take(&self, pin: &KeyPin, max_idle: Duration) -> Option<SendRequest<Incoming>> {
        loop {
            let mut sender = {
                let mut idle = self.idle.lock_or_recover();
                prune(&mut idle, max_idle);
                let list = idle.get_mut(pin)?;
                let conn = list.pop()?;
                if list.is_empty() {
                    idle.remove(pin);
                }
                conn.sender
            };
            if sender.is_ready() {
                return Some(sender);
            }
            if let Ok(Ok(())) = tokio::time::timeout(READY_GRACE, sender.ready()).await {
                return Some(sender);
            }
        }
    }
}

/// The hop's HTTP/1.1 client: header names keep the case the client wrote them in (the
/// owner's server keeps it too, and so do the answers coming back), as on one gateway.
fn client_builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.preserve_header_case(true);
    builder
}

/// Drops idle connections past `max_idle` or closed by the owner, and empty lists.
fn prune(idle: &mut IdleMap, max_idle: Duration) {
    idle.retain(|_, list| {
        list.retain(|conn| conn.since.elapsed() < max_idle && !conn.sender.is_closed());
        !list.is_empty()
    });
}

/// Where a connection goes back when its answer is read to the end.
#[derive(Debug)]
struct Release {
    pool: Arc<Mutex<IdleMap>>,
    pin: KeyPin,
    sender: SendRequest<Incoming>,
}

impl Release {
    fn finish(self) {
        if self.sender.is_closed() {
            return;
        }
        let mut idle = self.pool.lock_or_recover();
        let list = idle.entry(self.pin).or_default();
        if list.len() < MAX_IDLE_PER_MEMBER {
            list.push(Idle {
                sender: self.sender,
                since: Instant::now(),
            });
        }
    }
}

/// The body of an owner's answer: the connection goes back to the pool once it ends
/// complete (dropped early, the connection closes with it).
#[derive(Debug)]
pub(crate) struct HopResponseBody {
    inner: Incoming,
    release: Option<Release>,
}

impl HopResponseBody {
    fn new(inner: Incoming, release: Release) -> Self {
        let mut body = HopResponseBody {
            inner,
            release: Some(release),
        };
        if body.inner.is_end_stream() {
            // No body at all (204, 304, HEAD, length 0): it may never be polled.
            body.finish();
        }
        body
    }

    fn finish(&mut self) {
        if let Some(release) = self.release.take() {
            release.finish();
        }
    }
}

impl Body for HopResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.finish(),
            Poll::Ready(None) => this.finish(),
            // Broken mid-answer: never reused.
            Poll::Ready(Some(Err(_))) => this.release = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
