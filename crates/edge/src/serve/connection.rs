//! One admitted connection under hyper HTTP/1.1: the head timeout and size cap, the idle
//! watchdog of a kept-alive connection, the graceful close on shutdown or when the gate
//! chooses it to make room, and the [`Peer`] and in-flight count of every request (which,
//! with the bytes its IO reads, tell the gate whether the connection is busy).

use super::activity::Activity;
use super::head_guard::HeadGuard;
use super::limits::{MIN_HEADER_BYTES, ServeLimits};
use crate::gate::ConnectionMark;
use crate::tls::Conn;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;

/// The peer address of the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Serves one connection until it ends, closing it when idle or on shutdown.
pub(super) async fn serve_connection<S, B>(
    stream: Conn,
    peer: SocketAddr,
    service: S,
    limits: &ServeLimits,
    mut stop: watch::Receiver<bool>,
    mark: Arc<ConnectionMark>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(HeadGuard::new(
        stream,
        Arc::clone(&activity),
        Arc::clone(&mark),
        limits.max_header_bytes,
    ));
    let service = Tracked {
        inner: service,
        peer,
        activity: Arc::clone(&activity),
        mark: Arc::clone(&mark),
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .max_header_size(limits.max_header_bytes)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let idle = limits.keepalive_idle;
    let check_every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut closing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended");
                }
                break;
            }
            () = tokio::time::sleep(check_every), if !closing => {
                if activity.in_flight() == 0 && activity.quiet() >= idle {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
            () = mark.evicted(), if !closing => {
                // Chosen to make room: an unused connection goes at once; one whose
                // request began meanwhile finishes it first.
                if activity.in_flight() == 0 {
                    tracing::debug!(%peer, "closed to make room for a new connection");
                    break;
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = stop.wait_for(|stop| *stop), if !closing => {
                // Finish the request in flight, then close instead of keeping alive.
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The service of one connection: adds the [`Peer`] and counts requests in flight.
#[derive(Debug)]
struct Tracked<S> {
    inner: S,
    peer: SocketAddr,
    activity: Arc<Activity>,
    mark: Arc<ConnectionMark>,
}

/// A request in flight; the last one to finish tells the gate the connection is idle.
struct InFlight {
    activity: Arc<Activity>,
    mark: Arc<ConnectionMark>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.mark.idle();
        }
        self.activity.touch();
    }
}

impl<S> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(Peer(self.peer));
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        self.mark.busy();
        let guard = InFlight {
            activity: Arc::clone(&self.activity),
            mark: Arc::clone(&self.mark),
        };
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await;
            drop(guard);
            response
        })
    }
}
